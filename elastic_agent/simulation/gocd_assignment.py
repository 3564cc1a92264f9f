"""How the simulated GoCD server gives work to an agent that asks for it: should-assign-work asked of the
plugin for each waiting job the agent could run, the first `true` assigned.

Modelled on gocd/gocd's `BuildAssignmentService.assignWorkToAgent`: under one server-wide assignment lock
(a slow should-assign-work delays every agent), the waiting jobs of the agent's environments are offered
in scheduling order, each with the job's own elastic and cluster profiles (whatever the agent was created
for), and the agent's status as it was when the poll began. The job's part of each body is encoded once
per waiting job (gocd_inprocess.py keeps values instead of text). What the plugin answers is checked:
anything but `true` or `false` is a protocol error. The assignment itself can race the plugin: an agent
it disabled between its `true` and the assignment still gets the job, as in GoCD.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Mapping
from typing import Any

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_assignment_log import AssignmentLog
from elastic_agent.simulation.gocd_completions import JobCompletions
from elastic_agent.simulation.gocd_jobs import JobBook
from elastic_agent.simulation.gocd_messages import Body, PluginMessenger
from elastic_agent.simulation.gocd_polls import PollTimers
from elastic_agent.simulation.gocd_records import (
    Agent,
    AgentState,
    BuildState,
    ConfigState,
    Job,
    JobState,
    ServerCore,
)


class WorkAssignment:
    def __init__(
        self,
        core: ServerCore,
        *,
        book: JobBook,
        agents: Mapping[str, Agent],
        timers: PollTimers,
        completions: JobCompletions,
        log: AssignmentLog,
        messenger: PluginMessenger,
        stopwatch: Callable[[], float],
        agent_status: Callable[[Agent], Any],
        should_assign_body: Callable[[Any, Job], Body],
    ) -> None:
        """`agents`: the registry's; `stopwatch`: real elapsed time, for the plugin's latency even in
        virtual time; `agent_status(agent)` and `should_assign_body(status, job)`: the agent's part of a
        should-assign-work body, and the body made of it and a job (`text_body` by default)."""
        self._clock = core.clock
        self._lock = core.lock
        self._config = core.config
        self._stats = core.stats
        self._book = book
        self._agents = agents
        self._timers = timers
        self._completions = completions
        self._log = log
        self._messenger = messenger
        self._stopwatch = stopwatch
        self._agent_status = agent_status
        self._should_assign_body = should_assign_body
        # GoCD assigns work under one server-wide lock: a slow should-assign-work delays every agent.
        self._assignment_lock = threading.Lock()
        # Waiting job id -> its should-assign-work members, encoded (gocd_inprocess.py keeps them as values).
        self.encoded_jobs: dict[int, Any] = {}

    def poll(self, agent_id: str) -> None:
        """The agent asks for work: should-assign-work for each waiting job of its environments, the first
        `true` assigned; then its next poll is queued (if it is still idle)."""
        with self._assignment_lock:
            with self._lock:
                agent = self._agents.get(agent_id)
                if agent is None or not agent.can_poll:
                    return
                candidates = self._candidates(agent)
                status = self._agent_status(agent)  # unchanged through this poll: it ends at a `true`
            for job in candidates:
                with self._lock:
                    if not agent.can_poll or agent_id not in self._agents:
                        break
                    if job.state is not JobState.SCHEDULED:
                        continue
                    body = self._should_assign_body(status, job)
                if self._ask(body):
                    with self._lock:
                        self._assign(job, agent_id)
                    break
            with self._lock:
                if agent.can_poll and agent_id in self._agents:
                    now = self._clock.now()
                    self._timers.queue_poll(agent, self._timers.next_time(agent, now, inclusive=False))

    def _candidates(self, agent: Agent) -> list[Job]:
        """Waiting jobs of the agent's environments, in scheduling order."""
        if len(agent.environments) < 2:  # the usual case: one list, already in job-id order
            return self._book.waiting_in(next(iter(agent.environments), None))
        groups = [self._book.waiting_in(e) for e in sorted(agent.environments)]
        return list(heapq.merge(*groups, key=lambda job: job.job_id))

    def text_body(self, status: str, job: Job) -> str:
        """The should-assign-work body as JSON text, the job's members encoded once while it waits."""
        members: str | None = self.encoded_jobs.get(job.job_id)
        if members is None:
            members = wire.should_assign_work_job_members(job.environment, *job.profiles(), job.identifier())
            self.encoded_jobs[job.job_id] = members
        return wire.should_assign_work_text(status, members)

    def _ask(self, body: Body) -> bool:
        self._stats.should_assign_asked += 1
        started = self._stopwatch()
        answer = self._messenger.call("should-assign-work", body)
        if self._config.record_latencies:
            self._stats.should_assign_latencies_s.append(self._stopwatch() - started)
        if answer is None or answer[0] != 200:
            return False
        text = answer[1].strip()
        if text not in ("true", "false"):
            self._messenger.record_protocol_error(
                f"should-assign-work answered {text[:40]!r}, not true or false"
            )
            return False
        return text == "true"

    def _assign(self, job: Job, agent_id: str) -> None:
        now = self._clock.now()
        agent = self._agents.get(agent_id)
        if job.state is not JobState.SCHEDULED or agent is None:
            self._stats.assignment_races.append(
                f"job {job.job_id} not given to {agent_id}: changed meanwhile"
            )
            return
        if agent.config_state is ConfigState.DISABLED:
            # The plugin disabled the agent between its `true` and the assignment (docs/architecture.md,
            # "What the earlier attempt got wrong", item 9): GoCD still hands the work over, so the test
            # sees what the plugin caused.
            self._stats.assignment_races.append(f"agent {agent_id} disabled while assigned job {job.job_id}")
        if agent.running_job_id is not None:
            self._stats.invariant_violations.append(f"agent {agent_id} got job {job.job_id} while building")
            return
        self.withdraw(job)
        self._book.running[job.job_id] = job
        job.state, job.agent_id, job.assigned_at = JobState.BUILDING, agent_id, now
        if not agent.remote:  # a remote agent reports its job's end itself (report_completed)
            job.ends_at = now + job.duration_s
            self._completions.expect(job)
        agent.agent_state, agent.build_state = AgentState.BUILDING, BuildState.BUILDING
        agent.running_job_id = job.job_id
        self._log.record(job.job_id, agent_id, now)
        self._stats.assignments += 1

    def withdraw(self, job: Job) -> None:
        """The job waits no more (assigned or cancelled): it is offered to no agent from now on."""
        self._book.unwait(job)
        self.encoded_jobs.pop(job.job_id, None)
