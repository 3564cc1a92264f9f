"""Server-pings the in-process simulation does not send, because the backend can show they would do nothing.

GoCD pings every minute (`ElasticAgentPluginService.heartbeat`); on a quiet night or weekend each ping
reads every pool and decides nothing. A ping is a function of the backend's state, GoCD's agent list
and the time. So once a ping has changed nothing (no pod written, created or deleted, no change mark,
no agent disabled or deleted), and no other event has happened since (no request, no trace arrival, no
wake-up, no kubelet or store event, no LostContact), the next ping sees the same state and list: only
the time differs, and it can decide something only once the time passes one the state keeps
(`Backend.quiet_until`, pool/quiet.py). The pings before that time are skipped; the first event of any
other kind ends the quiet stretch, and the ping after it is sent.

`step_begins` and `step_ended` bracket each loop step of the driver (virtual_time.py), which says
whether the step was eventful; `skip` is asked before each step whose only due event may be the
model's next ping. A run with `SimSettings(skip_idle_events=False)` never skips (it is the reference
tests/scenarios/test_quiet_pings.py compares with).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from elastic_agent.backend import Backend
from elastic_agent.simulation.gocd_inprocess import InProcessGoCD
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX

PING = REQUEST_PREFIX + "server-ping"


@dataclass(frozen=True)
class _Inputs:
    """Everything a ping reads that an event may change, as counters that only grow."""

    store_changes: int
    requests: int  # handled by the plugin, server-pings not counted
    pings: int
    marks: tuple[int, ...]
    agent_changes: int


class QuietPings:
    def __init__(
        self,
        model: InProcessGoCD,
        backend: Backend,
        requests: dict[str, int],
        store_changes: Callable[[], int],
        pending_writes: Callable[[], bool],
    ) -> None:
        self._model = model
        self._backend = backend
        self._requests = requests  # the transport's counts per request name, updated in place
        self._store_changes = store_changes
        self._pending_writes = pending_writes
        self._before: _Inputs | None = None
        self._until = -math.inf  # pings before this time change nothing; -inf: not quiet

    def _inputs(self) -> _Inputs:
        requests = self._requests
        return _Inputs(
            self._store_changes(),
            sum(requests.values()) - requests.get(PING, 0),
            requests.get(PING, 0),
            tuple(pool.change_mark() for pool in self._backend.pools()),
            self._model.agent_changes,
        )

    def step_begins(self, due: float) -> None:
        """Before the loop step at `due`. Only a step that may hold a ping, or one within a quiet
        stretch, needs its inputs read: any other step cannot start a stretch, nor end one."""
        watched = self._until > -math.inf or self._model.next_ping_at() <= due
        self._before = self._inputs() if watched else None

    def step_ended(self, *, eventful: bool) -> None:
        """After a loop step; `eventful`: a trace arrival, a wake-up of the backend or a due kubelet step
        happened in it (each may change what the next ping sees)."""
        before = self._before
        if before is None:
            return  # not watched (`step_begins`): not quiet before, and no ping to make it so
        after = self._inputs()
        inert = (
            not eventful
            and (before.store_changes, before.requests, before.marks, before.agent_changes)
            == (after.store_changes, after.requests, after.marks, after.agent_changes)
            and not self._pending_writes()
        )
        if not inert:
            self._until = -math.inf
        elif after.pings != before.pings:  # a ping that changed nothing: quiet until the state's next time
            self._until = self._backend.quiet_until()

    def skip(self, due: float) -> bool:
        """Skip the step due at `due` if it is the model's next ping alone and quiet; whether it was."""
        if due < self._until and self._model.ping_alone_at() == due:
            self._model.skip_ping()
            return True
        return False
