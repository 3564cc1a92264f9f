"""Injected time. Every component reads time through a Clock so the same code runs in real,
scaled and virtual time."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch, in this clock's time."""

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for `seconds` of this clock's time."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ScaledClock:
    """Real time running `factor` times faster: lets a demo show ten minutes of idle timeout in ten
    seconds while every thread still really waits."""

    def __init__(self, factor: float, start: float | None = None) -> None:
        if factor <= 0:
            raise ValueError("a clock's speed factor must be positive")
        self.factor = factor
        self._real_origin = time.monotonic()
        self._origin = time.time() if start is None else start

    def now(self) -> float:
        return self._origin + (time.monotonic() - self._real_origin) * self.factor

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.factor)

    def advance(self, seconds: float) -> None:
        """Jump forward (tests: "half an hour later" without waiting half a minute)."""
        self._origin += seconds


class ManualClock:
    """A clock that moves only when told to; sleep() advances it (single-threaded tests)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
