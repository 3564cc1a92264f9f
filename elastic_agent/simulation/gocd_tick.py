"""The simulated GoCD server's assignment tick: every `scheduler_interval_s` it loads the scheduled jobs and
sends create-agent for the waiting ones that need an agent.

gocd/gocd's `BuildAssignmentService` reloads the job plans on its 5-s timer (`reloadJobPlans`): only the plans
loaded are offered to agents, and the plans new to it get a create-agent
(`ElasticAgentPluginService.createAgentsFor`). A job still waiting `job_starvation_timeout_s` after its last
create-agent is starving, and gets another one, with a fresh single-use key each time
(`EphemeralAutoRegisterKeyService.autoRegisterKey`: gocd_keys.py). The dormant agents of a job's environment
wake when it is loaded (gocd_polls.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_jobs import JobBook
from elastic_agent.simulation.gocd_messages import PluginMessenger
from elastic_agent.simulation.gocd_records import JobState, ServerCore
from elastic_agent.simulation.gocd_timing import EPSILON_S, is_due


class Waker(Protocol):
    def wake(self, environment: str | None, now: float) -> None: ...


class AssignmentTick:
    def __init__(
        self,
        core: ServerCore,
        book: JobBook,
        timers: Waker,
        issue_key: Callable[[int], str],
        messenger: PluginMessenger,
        start: float,
    ) -> None:
        """`timers`: the agents' poll timers, woken for each job loaded; `issue_key(job id)`: a fresh key;
        `start`: when the server started (its first tick is an interval later)."""
        self._clock = core.clock
        self._lock = core.lock
        self._config = core.config
        self._stats = core.stats
        self._book = book
        self._timers = timers
        self._issue_key = issue_key
        self._messenger = messenger
        self.next_at = start + core.config.scheduler_interval_s

    def run(self) -> None:
        """The tick, if it is due (one for any number of intervals passed)."""
        sends: list[dict[str, Any]] = []
        with self._lock:
            now = self._clock.now()
            if not is_due(self.next_at, now):
                return
            while is_due(self.next_at, now):
                self.next_at += self._config.scheduler_interval_s
            self._admit_planned(now)
            for job in self._book.waiting.values():
                last = job.create_agent_sent_at
                if last is not None and now - last < self._config.job_starvation_timeout_s - EPSILON_S:
                    continue
                if last is not None:
                    self._stats.create_agent_resends += 1
                self._stats.create_agent_sent += 1
                job.create_agent_sent_at, job.create_agent_sends = now, job.create_agent_sends + 1
                key = self._issue_key(job.job_id)
                sends.append(wire.create_agent_body(key, *job.profiles(), job.environment, job.identifier()))
        self._messenger.post_create_agents(sends)

    def _admit_planned(self, now: float) -> None:
        """The tick loads the scheduled jobs: from now on agents are offered them, and the dormant agents
        of their environments poll at their next poll time (their back-off went on)."""
        for job in self._book.take_planned().values():
            if job.state is not JobState.SCHEDULED:
                continue
            self._book.wait(job)
            self._timers.wake(job.environment, now)

    def catch_up(self, now: float) -> None:
        """Move the next tick past the ticks before `now` that were not run (gocd_inprocess.py skips the
        ticks while no job is planned or waiting), by the same additions they would have made."""
        while self.next_at < now:
            self.next_at += self._config.scheduler_interval_s
