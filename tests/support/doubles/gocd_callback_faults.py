"""Faults of the bridge's callback endpoint (gocd_callbacks.py), for the fault matrix.

Two kinds. An outage: every call the plugin makes back into GoCD is answered 503, or is accepted and
never answered (held until the outage ends, then the connection is dropped without a byte, as a bridge
that hung and was restarted); `outage()` starts it, `recover()` ends it. And a hook: a one-shot action
run when the plugin makes a given call, before GoCD carries it out or after it did and before the answer
goes back, so that a test can act at an exact step of the plugin's work (kill the plugin's process
between disabling an agent and deleting its pod) without a hook in the product. A hook may drop the
call once it has acted: before, GoCD never carries the call out; after, its answer never goes back.

Every call is recorded with its outcome and the stopwatch's time (real time: the fault matrix reports
real seconds), so a test can say when the plugin's calls worked again.

The endpoint takes them through its seam: `CallbackServer(..., faults=CallbackFaults())` (a
`CallbackInterceptor`); `callback_faults_of` gives them back typed as they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from elastic_agent.simulation.gocd_callbacks import CallbackServer, DropConnection

OutageMode = Literal["503", "hang"]
# A held call is dropped at the latest after this long, so that a test that forgets recover() ends.
MAX_HOLD_S = 600.0


@dataclass(frozen=True)
class CallRecord:
    at: float  # stopwatch time the call arrived
    api: str
    outcome: str  # "200", "503", "dropped", ...


@dataclass
class Hook:
    api: str
    action: Callable[[str], None]  # given the request body
    after: bool  # after GoCD carried the call out (else before)
    condition: Callable[[str], bool]
    drop: bool  # then drop the connection
    fired_at: float | None = None


class CallbackFaults:
    def __init__(self, stopwatch: Callable[[], float] = time.monotonic) -> None:
        self._stopwatch = stopwatch
        self._lock = threading.Lock()
        self._mode: OutageMode | None = None
        self._recovered = threading.Event()
        self._recovered.set()
        self._hooks: list[Hook] = []
        self.calls: list[CallRecord] = []

    # ---- what a test does -------------------------------------------------------------------------

    def outage(self, mode: OutageMode) -> None:
        with self._lock:
            self._mode = mode
            self._recovered.clear()

    def recover(self) -> None:
        with self._lock:
            self._mode = None
            self._recovered.set()

    def when(
        self,
        api: str,
        action: Callable[[str], None],
        *,
        after: bool,
        condition: Callable[[str], bool] = lambda _body: True,
        drop: bool = False,
    ) -> Hook:
        """Run `action(body)` once, at the first call of `api` whose body meets `condition`; with `drop`,
        then drop the call's connection."""
        hook = Hook(api, action, after, condition, drop)
        with self._lock:
            self._hooks.append(hook)
        return hook

    def outcomes(self, since: float = float("-inf")) -> list[CallRecord]:
        with self._lock:
            return [call for call in self.calls if call.at >= since]

    # ---- what the callback app asks ---------------------------------------------------------------

    def refusal(self, api: str) -> tuple[int, str] | None:
        """During an outage: the answer (503), or DropConnection once a held call's outage ends."""
        with self._lock:
            mode = self._mode
        if mode is None:
            return None
        if mode == "503":
            self.record(api, "503")
            return 503, "GoCD is not available (injected outage)"
        self._recovered.wait(MAX_HOLD_S)
        self.record(api, "dropped")
        raise DropConnection("injected outage: the call was never answered")

    def run_hooks(self, api: str, body: str, *, after: bool) -> None:
        """Raises DropConnection after a hook that drops the call."""
        with self._lock:
            due = [h for h in self._hooks if h.api == api and h.after == after and h.fired_at is None]
        for hook in due:
            if not hook.condition(body):
                continue
            with self._lock:
                if hook.fired_at is not None:  # another call took it meanwhile
                    continue
                hook.fired_at = self._stopwatch()
            hook.action(body)
            if hook.drop:
                self.record(api, "dropped")
                raise DropConnection("a hook dropped the call")

    def record(self, api: str, outcome: str) -> None:
        with self._lock:
            self.calls.append(CallRecord(self._stopwatch(), api, outcome))


def callback_faults_of(server: CallbackServer) -> CallbackFaults:
    """The faults `server` was built with (`CallbackServer(..., faults=CallbackFaults())`)."""
    faults = server.faults
    if not isinstance(faults, CallbackFaults):
        raise TypeError("this callback server was built without CallbackFaults")
    return faults
