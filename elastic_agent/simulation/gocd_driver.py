"""What moves the simulated GoCD server in time: its `step` (everything due at the clock's now, in a fixed
order) run event by event in virtual time, or in a background thread for real or scaled time.

In virtual time (in process) `advance_to` moves an advanceable clock (ManualClock) from one due event to
the next, so a run is a pure function of its inputs and seeds. In real or scaled time the thread runs
`step` and sleeps until the next event, never longer than `runner_tick_s`, because jobs and agents also
arrive from other threads; a step that fails is recorded and the server goes on, like GoCD's timers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from elastic_agent.clock import Clock
from elastic_agent.simulation.gocd_records import GoCDConfig


@runtime_checkable
class AdvanceableClock(Protocol):
    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


class Driver:
    def __init__(
        self,
        clock: Clock,
        step: Callable[[], None],
        next_due_at: Callable[[], float],
        config: GoCDConfig,
        record_error: Callable[[str], None],
    ) -> None:
        """`step()`: everything due now; `next_due_at()`: when the next is due; `config`: the server's
        (its `runner_tick_s`); `record_error(message)`: where a failed step is recorded."""
        self._clock = clock
        self._step = step
        self._next_due_at = next_due_at
        self._config = config
        self._record_error = record_error
        self._runner: threading.Thread | None = None
        self._stop_runner = threading.Event()

    @property
    def running(self) -> bool:
        return self._runner is not None

    def advance_to(self, target: float) -> None:
        """Virtual time: move an advanceable clock (ManualClock) event by event up to `target`."""
        clock = self._clock
        if not isinstance(clock, AdvanceableClock):
            raise TypeError("advance_to needs a clock with advance(), such as ManualClock")
        while (due := self._next_due_at()) <= target:
            if due > clock.now():
                clock.advance(due - clock.now())
            self._step()
        if target > clock.now():
            clock.advance(target - clock.now())

    def start(self) -> None:
        """Run `step()` in a daemon thread."""
        self._stop_runner.clear()
        self._runner = threading.Thread(target=self._run, name="simulated-gocd", daemon=True)
        self._runner.start()

    def stop(self, timeout_s: float) -> None:
        self._stop_runner.set()
        if self._runner is not None:
            self._runner.join(timeout_s)
            self._runner = None

    def _run(self) -> None:
        while not self._stop_runner.is_set():
            try:
                self._step()
            except Exception as error:  # keep the server alive, like GoCD's timers; surface it in stats
                self._record_error(f"simulated server step failed: {type(error).__name__}: {error}")
            # Sleep until the next timed event, but never longer than a tick: jobs and agents also arrive
            # from other threads and should be seen promptly.
            until_due = self._next_due_at() - self._clock.now()
            self._clock.sleep(max(0.0, min(self._config.runner_tick_s, until_due)))
