"""The simulated GoCD server of the in-process simulations (virtual_time.py, and the tests'
tests/support/doubles/harness.py): the server of gocd_model.py, sending its requests as values and, when the
driver allows it, not simulating the events that change nothing. The HTTP stacks use `SimulatedGoCD` itself,
which sends JSON text over the bridge contract.

`SimulatedGoCD` is kept whole; this subclass changes what follows, and tests/scenarios/test_fast_path.py and
tests/scenarios/test_quiet_pings.py show that the skipping leaves every pod, wait and assignment as it was:

- Requests travel as values. A transport with `send_value` (inprocess_requests.py) gets each body as the
  JSON-shaped dict `SimulatedGoCD` would encode (should-assign-work's job members built once per job), so
  neither side writes or reads JSON text. A transport without it (another plugin than this project's)
  gets the encoded text.
- An idle agent's poll that would find no waiting job is not an event. Simulated in full, such a poll asks
  nothing and ends with the agent dormant (gocd_polls.PollTimers.queue_poll); here the agent is made dormant
  when its poll reaches the head of the queue and nothing of its environments waits. Why that is the same:
  jobs start waiting only at a scheduler tick (gocd_tick.py), which wakes every dormant agent of the job's
  environment at the first time of its poll schedule at or after the tick (the schedule is a pure function
  of when the agent's back-off began, gocd_timing.PollBackOff, which a poll without work does not change).
  The tick comes after the agent's previous poll (that poll was handled at an earlier event), so the first
  poll time at or after it is the very poll that was dropped, and the agent polls exactly when it would
  have. Without a tick that admits a job, the dropped poll would have done nothing but make the agent
  dormant.
- Scheduler ticks while no job waits or is scheduled are not events. Such a tick admits no job and
  loops over none, so it sends nothing and changes nothing but the time of the next tick. That time is
  caught up in `_add_job` when the first job is scheduled, by the same additions the skipped ticks
  would have made, so every later tick falls on the same float as when every tick is simulated.

- A server-ping the backend can show would change nothing is not sent (quiet_pings.py decides; the
  model only moves its next ping on, `skip_ping`). `agent_changes` counts what changes GoCD's agent list
  other than a request or a kubelet event (the plugin's disable and delete calls, LostContact), so that
  the decision sees every input of the ping.

The first two skips remove events that do nothing, which holds only while no other part needs an event to
act (a write waiting for its backoff, a graceful deletion waiting for the store's tick). The driver says
so with `allow_skipping` before each event (virtual_time.py); when it stops allowing, the polls dropped
early are queued again, so from then on every event happens. Until it first allows, nothing is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from elastic_agent.clock import Clock
from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_model import Agent, GoCDConfig, Job, SimulatedGoCD
from elastic_agent.simulation.gocd_timing import EPSILON_S
from elastic_agent.simulation.gocd_transport import PluginTransport


@runtime_checkable
class ValueTransport(PluginTransport, Protocol):
    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        """Deliver one request whose body is the JSON-shaped value GoCD would encode."""


class InProcessGoCD(SimulatedGoCD):
    def __init__(self, clock: Clock, transport: PluginTransport, config: GoCDConfig | None = None) -> None:
        super().__init__(clock, transport, config)
        # The transport, when it takes values; its method is looked up at each request (a test may wrap it).
        self._values = transport if isinstance(transport, ValueTransport) else None
        self._skipping = False
        self._dropped: dict[str, float] = {}  # agent id -> the poll dropped early, while skipping
        self.agent_changes = 0

    def allow_skipping(self, allowed: bool) -> None:
        """Whether events that change nothing may be skipped from now on (the module's docstring)."""
        if allowed or not self._skipping:
            self._skipping = allowed
            return
        self._skipping = False
        now = self._clock.now()
        with self._state_lock:
            for agent_id, at in self._dropped.items():
                agent = self._registry.agents.get(agent_id)
                if agent is None or not agent.dormant or agent.next_poll_at != at or at <= now:
                    continue  # woken since (its poll is queued again), gone, or past
                for environment in agent.environments or (None,):
                    self._timers.dormant_by_env.get(environment, set()).discard(agent_id)
                agent.dormant = False
                self._timers.queue.push(at, agent_id)
            self._dropped.clear()

    def next_due_at(self) -> float:
        with self._state_lock:
            idle = self._skipping and not self._book.waiting and not self._book.planned
            return min(
                math.inf if idle else self._tick.next_at,
                self._pings.next_at,
                self._timers.queue.first(),
                self._completions.queue.first(),
                self._registry.silences.first(),
            )

    def ping_alone_at(self) -> float:
        """The next ping's time when nothing else of this server's is due then or before; else infinity."""
        with self._state_lock:
            idle = self._skipping and not self._book.waiting and not self._book.planned
            other = min(
                math.inf if idle else self._tick.next_at,
                self._timers.queue.first(),
                self._completions.queue.first(),
                self._registry.silences.first(),
            )
            next_ping_at = self._pings.next_at
            return next_ping_at if next_ping_at < other - EPSILON_S else math.inf

    def next_ping_at(self) -> float:
        return self._pings.next_at

    def skip_ping(self) -> None:
        """The next server-ping is not sent: only its time moves on (gocd_pings.ServerPings.skip)."""
        self._pings.skip()

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        self.agent_changes += 1
        super().disable_agents(agent_ids)

    def delete_agents(self, agent_ids: Iterable[str]) -> list[str]:
        self.agent_changes += 1
        return super().delete_agents(agent_ids)

    def _lose_contact(self, agent: Agent, now: float) -> None:
        self.agent_changes += 1
        super()._lose_contact(agent, now)

    def _add_job(self, job: Job) -> None:
        if not self._book.waiting and not self._book.planned:
            # The ticks skipped while nothing waited: those before now would have been events of their
            # own (each at its own time); one at now is due now, with this job waiting, as when every
            # tick is simulated.
            self._tick.catch_up(self._clock.now())
        super()._add_job(job)

    def _poll_is_current(self, at: float, agent_id: str) -> bool:
        if not super()._poll_is_current(at, agent_id):
            return False
        if not self._skipping:
            return True
        agent = self._registry.agents[agent_id]
        environments = agent.environments or (None,)
        if self._book.waits_in(environments):
            return True
        # The poll would ask nothing and make the agent dormant: do that now (module docstring).
        self._timers.make_dormant(agent, environments)
        if len(self._dropped) > 4 * len(self._registry.agents) + 1024:  # forget polls long past
            now = self._clock.now()
            self._dropped = {key: when for key, when in self._dropped.items() if when > now}
        self._dropped[agent_id] = at
        return False

    def _agent_status(self, agent: Agent) -> Any:
        if self._values is None:
            return super()._agent_status(agent)
        return agent.status()

    def _should_assign_body(self, status: Any, job: Job) -> dict[str, Any] | str:
        if isinstance(status, str):
            return super()._should_assign_body(status, job)
        encoded_jobs = self._assigner.encoded_jobs
        members: dict[str, Any] | None = encoded_jobs.get(job.job_id)
        if members is None:
            members = wire.should_assign_work_body({}, job.environment, *job.profiles(), job.identifier())
            del members["agent"]
            encoded_jobs[job.job_id] = members
        return {"agent": status, **members}

    def _send(self, request_name: str, body: dict[str, Any] | str) -> tuple[int, str]:
        if self._values is not None and isinstance(body, dict):
            return self._values.send_value(request_name, body)
        return super()._send(request_name, body)
