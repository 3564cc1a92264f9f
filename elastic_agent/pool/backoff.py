"""When a failed call for one pod may be tried again: exponential backoff with a cap, per pod.

Decisions only, no clock and no thread: the caller passes the time (of its injected clock) and keeps
the object under its own lock. The annotation writer (writer.py) uses it; a failed write of a pod is
not tried again before `Backoff.delay_s(failures)` has passed, a success forgets the pod, and an outage
that ended since the failure (`OutageTracker.recoveries` moved on) makes the pod due at once: the server
answers again, so everything queued is written now instead of at each pod's next slot.

The schedule: 1 s, doubling, capped at 60 s. One second forgives a dropped connection at once; the
cap is reached after six failures (a minute into an outage) and equals GoCD's server-ping interval, at
which the pool re-checks everything anyway. During a long outage a pool of N pods then costs N calls
a minute, not one per pod per change; after it, nothing waits for its slot (the recovery resets it).
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_S = 1.0
CAP_S = 60.0


@dataclass(frozen=True)
class Backoff:
    base_s: float = BASE_S
    cap_s: float = CAP_S

    def delay_s(self, failures: int) -> float:
        """How long to wait after the `failures`-th consecutive failure (1, 2, ...)."""
        return min(self.cap_s, self.base_s * 2.0 ** min(max(failures, 1) - 1, 64))

    def attempts_within(self, seconds: float) -> int:
        """How many attempts a key failing all along makes in `seconds`, the first at 0."""
        attempts, at = 1, 0.0
        while (at := at + self.delay_s(attempts)) <= seconds:
            attempts += 1
        return attempts


@dataclass
class _Retry:
    failures: int
    due_at: float
    epoch: int | None  # the outage count at the failure; None: the failure was not an outage's


class RetryTimes:
    """Per key (a pod's name): consecutive failures, and when the next attempt is due."""

    def __init__(self, schedule: Backoff | None = None) -> None:
        self.schedule = schedule or Backoff()
        self._retries: dict[str, _Retry] = {}

    def failed(self, key: str, now: float, epoch: int | None = None) -> float:
        """Another failure; returns the delay before the next attempt. `epoch`: the outage count, when
        the failure was a call without an answer."""
        retry = self._retries.get(key)
        failures = 1 if retry is None else retry.failures + 1
        delay = self.schedule.delay_s(failures)
        self._retries[key] = _Retry(failures, now + delay, epoch)
        return delay

    def succeeded(self, key: str) -> None:
        self._retries.pop(key, None)

    def failures(self, key: str) -> int:
        retry = self._retries.get(key)
        return 0 if retry is None else retry.failures

    def is_due(self, key: str, now: float, epoch: int) -> bool:
        retry = self._retries.get(key)
        if retry is None:
            return True
        return now >= retry.due_at or (retry.epoch is not None and retry.epoch != epoch)

    def due_at(self, key: str) -> float:
        """When the key's next attempt is due by its delay (0 for a key that has not failed)."""
        retry = self._retries.get(key)
        return 0.0 if retry is None else retry.due_at

    def __len__(self) -> int:
        return len(self._retries)
