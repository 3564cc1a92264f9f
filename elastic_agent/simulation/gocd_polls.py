"""When the simulated GoCD server's idle in-process agents ask for work: each agent's get-work timer.

A real agent polls on its own back-off (gocd_timing.PollBackOff, gocd/gocd's
`AgentWorkRetrievalScheduler`); here the server keeps those timers for the agents it runs in process.
An agent whose environments have no waiting job would poll and ask nothing, so it goes dormant instead:
no poll is queued until the assignment tick admits a job of one of its environments (`wake`), which
queues its poll at the first time of its schedule from then on. Its polls are a pure function of when
its back-off began, so the skipped polls leave every later one where it was. A remote agent
(gocd_agent_api.py) asks for work itself and gets no timer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from elastic_agent.simulation.gocd_records import Agent, GoCDConfig
from elastic_agent.simulation.gocd_timing import PollBackOff, TimedQueue


class WaitingJobs(Protocol):
    def waits_in(self, environments: Iterable[str | None]) -> bool: ...


class PollTimers:
    def __init__(
        self,
        config: GoCDConfig,
        agents: Mapping[str, Agent],
        jobs: WaitingJobs,
        is_current: Callable[[float, str], bool] | None = None,
    ) -> None:
        """`config`: the agents' get-work back-off (read once); `agents`: the registry's; `is_current`:
        whether a queued poll still stands (default `is_current` below; the in-process server's also drops
        the polls that would ask nothing, gocd_inprocess.py)."""
        self._backoff = PollBackOff.of(
            config.get_work_delay_s,
            config.get_work_multiplier,
            config.get_work_interval_s,
            waits_first=config.get_work_waits_first,
        )
        self._agents = agents
        self._jobs = jobs
        self.queue: TimedQueue[str] = TimedQueue(is_current or self.is_current)  # agent ids
        self.dormant_by_env: dict[str | None, set[str]] = {}

    def is_current(self, at: float, agent_id: str) -> bool:
        agent = self._agents.get(agent_id)
        return agent is not None and agent.can_poll and not agent.dormant and agent.next_poll_at == at

    def next_time(self, agent: Agent, after: float, *, inclusive: bool) -> float:
        return self._backoff.next_poll(agent.backoff_since, after, inclusive=inclusive)

    def queue_poll(self, agent: Agent, at: float) -> None:
        """The agent's next poll is at `at`, or it goes dormant when nothing of its environments waits."""
        if agent.remote:  # it asks for work itself (get_work)
            return
        environments: Iterable[str | None] = agent.environments or (None,)
        if not self._jobs.waits_in(environments):
            self.make_dormant(agent, environments)
            return
        agent.dormant, agent.next_poll_at = False, at
        self.queue.push(at, agent.agent_id)

    def make_dormant(self, agent: Agent, environments: Iterable[str | None]) -> None:
        agent.dormant = True
        for environment in environments:
            self.dormant_by_env.setdefault(environment, set()).add(agent.agent_id)

    def wake(self, environment: str | None, now: float) -> None:
        """A job of `environment` starts waiting: its dormant agents poll at their next poll time (their
        back-off went on meanwhile)."""
        for agent_id in self.dormant_by_env.pop(environment, set()):
            agent = self._agents.get(agent_id)
            if agent is not None and agent.dormant:
                for other in agent.environments:
                    self.dormant_by_env.get(other, set()).discard(agent_id)
                self.queue_poll(agent, self.next_time(agent, now, inclusive=True))
