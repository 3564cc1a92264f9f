"""The progress of the advisor and of `trace` on stderr: tqdm's bar when a person watches (stderr is a
terminal); otherwise, when the caller gives a clock, a plain line every few seconds, for a log, a cron
job's mail or a CI job, where a bar's carriage returns would be noise; otherwise nothing.

The lines are timed by the injected clock (`elastic_agent/clock.py`), so that they come as often in
scaled or virtual time as the clock says, and tests see them without waiting. tqdm is a dependency of
the package, since every command that shows progress imports it.
"""

from __future__ import annotations

import sys
import threading
from typing import Protocol, TextIO

from tqdm import tqdm

LINE_EVERY_S = 5.0  # a line at most this often: frequent enough to show life, rare enough for a log


class Clock(Protocol):
    """What the lines need of `elastic_agent/clock.py`'s clocks (a sibling module: not imported)."""

    def now(self) -> float: ...


class Progress(Protocol):
    total: float | None

    def update(self, n: float = 1) -> object: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


class _Silent:
    """Counts what a bar would show, draws nothing."""

    def __init__(self, total: int) -> None:
        self.total: float | None = total
        self.n = 0.0

    def update(self, n: float = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


class ProgressLines:
    """A line such as `stage runs: 1200 of 3400 calls (35 %), 60 s so far` on `stream` when at least
    `every_s` of the clock's time passed since the last one; a last line at close if any was printed.
    Updated from several threads at once (the calls finish on a pool)."""

    def __init__(
        self, total: int, desc: str, unit: str, clock: Clock, stream: TextIO, every_s: float = LINE_EVERY_S
    ) -> None:
        self.total: float | None = total
        self.n = 0.0
        self._desc, self._unit, self._clock, self._stream, self._every_s = desc, unit, clock, stream, every_s
        self._started = clock.now()
        self._next = self._started + every_s
        self._printed = False
        self._closed = False
        self._lock = threading.Lock()

    def update(self, n: float = 1) -> None:
        with self._lock:
            self.n += n
            now = self._clock.now()
            if now < self._next or self._closed:
                return
            self._next = now + self._every_s
            self._printed = True
            line = self._line(now)
        print(line, file=self._stream, flush=True)

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            if self._closed or not self._printed:
                self._closed = True
                return
            self._closed = True
            line = self._line(self._clock.now())
        print(line, file=self._stream, flush=True)

    def _line(self, now: float) -> str:
        total = int(self.total or 0)
        share = f" ({100 * self.n / total:.0f} %)" if total else ""
        units = self._unit if total == 1 else self._unit + "s"
        return f"{self._desc}: {self.n:g} of {total} {units}{share}, {now - self._started:.0f} s so far"


def progress_bar(
    total: int,
    shown: bool,
    desc: str = "simulations",
    unit: str = "run",
    *,
    clock: Clock | None = None,
    stream: TextIO | None = None,
) -> Progress:
    """A tqdm bar counting `total` things (`desc`) on stderr if `shown`; else progress lines on `stream`
    (stderr by default) timed by `clock`, when one is given; else a silent counter."""
    if shown:
        bar: Progress = tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)
        return bar
    if clock is not None:
        return ProgressLines(total, desc, unit, clock, stream or sys.stderr)
    return _Silent(total)
