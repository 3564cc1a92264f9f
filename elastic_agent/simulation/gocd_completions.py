"""The simulated GoCD server's job completions: when a running job ends, the job is Completed, its agent
idle again, and job-completion goes to the plugin, once, never retried, whatever the answer (gocd/gocd's
`ElasticAgentPluginService.jobCompleted`, sent with the profiles the job was scheduled with).

An in-process agent's job ends `duration_s` after its assignment, or at once when cancelled; a remote
agent reports the end itself (gocd_agent_side.py). A job whose agent process died never completes: it
waits for its agent's LostContact and a reschedule (gocd_model.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_assignment_log import AssignmentLog
from elastic_agent.simulation.gocd_jobs import JobBook
from elastic_agent.simulation.gocd_messages import PluginMessenger
from elastic_agent.simulation.gocd_polls import PollTimers
from elastic_agent.simulation.gocd_records import (
    Agent,
    AgentState,
    BuildState,
    Job,
    JobState,
    ServerCore,
)
from elastic_agent.simulation.gocd_timing import TimedQueue


class JobCompletions:
    def __init__(
        self,
        core: ServerCore,
        book: JobBook,
        agents: Mapping[str, Agent],
        timers: PollTimers,
        log: AssignmentLog,
        messenger: PluginMessenger,
    ) -> None:
        self._clock = core.clock
        self._lock = core.lock
        self._stats = core.stats
        self._book = book
        self._agents = agents
        self._timers = timers
        self._log = log
        self._messenger = messenger
        self.queue: TimedQueue[int] = TimedQueue(self._is_current)  # job ids

    def expect(self, job: Job) -> None:
        """The job ends at its `ends_at` (an in-process agent's, or a cancelled one's)."""
        assert job.ends_at is not None
        self.queue.push(job.ends_at, job.job_id)

    def cancel(self, job: Job) -> bool:
        """Cancel a building job: its agent stops at once and job-completion follows, as for any completed
        job (a cancelling agent still shows Building). False when it is not building, or cancelled already."""
        if job.state is not JobState.BUILDING or job.result == "Cancelled":  # cancelled once, ends once
            return False
        job.result = "Cancelled"
        job.ends_at = self._clock.now()
        self.expect(job)
        agent = self._agents.get(job.agent_id or "")
        if agent is not None:
            agent.build_state = BuildState.CANCELLED
        return True

    def run(self) -> None:
        """Complete the jobs whose end is due, and tell the plugin."""
        bodies: list[dict[str, Any]] = []
        with self._lock:
            now = self._clock.now()
            for job_id in self.queue.pop_due(now):
                bodies.append(self.finish(self._book.running.pop(job_id), now))
        for body in bodies:
            self.send(body)

    def send(self, body: dict[str, Any]) -> None:
        """job-completion, sent once, never retried, whatever the answer."""
        self._stats.job_completions_sent += 1
        self._messenger.call("job-completion", body)

    def finish(self, job: Job, now: float) -> dict[str, Any]:
        """The job is Completed and its agent idle; the job-completion body to send (under the state lock)."""
        agent = self._agents[job.agent_id or ""]
        job.state, job.completed_at, job.result = JobState.COMPLETED, now, job.result or job.planned_result
        agent.agent_state, agent.build_state = AgentState.IDLE, BuildState.IDLE
        agent.running_job_id = None
        agent.jobs_run += 1
        # The agent asks for work again at once, its back-off begun anew (`AgentWorkRetrievalScheduler` after
        # `WorkAttempt.OK`; before GoCD 25.4.0 it waited a step first: PollBackOff). That poll is handled at
        # the next step of this instant, after this job-completion reached the plugin. In GoCD the two race:
        # `reportCompleted` posts the job's status on `JobStatusTopic`, whose listener sends job-completion,
        # while the agent checks for an upgrade over HTTP (`AgentController.performWork`) before its next
        # get-work; a plugin that hears the poll first says no, and the agent asks again 1 s later.
        agent.backoff_since = now
        self._timers.queue_poll(agent, self._timers.next_time(agent, now, inclusive=True))
        self._log.finish(job.job_id, now)
        return wire.job_completion_body(agent.agent_id, *job.profiles(), job.identifier())

    def _is_current(self, at: float, job_id: int) -> bool:
        job = self._book.running.get(job_id)
        return job is not None and job.ends_at == at and self._completes(job)

    def _completes(self, job: Job) -> bool:
        # A job whose agent process died never completes: it waits for LostContact and a reschedule.
        agent = self._agents.get(job.agent_id or "")
        return job.ends_at is not None and agent is not None and agent.process_alive
