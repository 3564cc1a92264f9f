"""When things happen in the simulated GoCD server: timed queues of (time, subject), and each agent's
poll rhythm. Bookkeeping only; the GoCD rules are in gocd_model.py."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

# Float time sums (origin + n * interval) can land a hair before the instant they were aimed at.
EPSILON_S = 1e-6
_MASK64 = (1 << 64) - 1
Subject = TypeVar("Subject", str, int)


def is_due(at: float, now: float) -> bool:
    return at <= now + EPSILON_S


def mix64(value: int) -> int:
    """SplitMix64's finaliser: a cheap, well-spread hash of an integer (poll jitter is computed per
    poll, millions of times in a long virtual-time run)."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


class TimedQueue(Generic[Subject]):
    """A heap of (time, subject). An entry goes stale when its subject changes (`is_current` then says
    no) and is skipped when it reaches the top, so a change never searches the heap: a step costs what
    is due, not the number of agents or jobs."""

    def __init__(self, is_current: Callable[[float, Subject], bool]) -> None:
        self._heap: list[tuple[float, Subject]] = []
        self._is_current: Callable[[float, Subject], bool] = is_current

    def push(self, at: float, subject: Subject) -> None:
        heapq.heappush(self._heap, (at, subject))

    def first(self) -> float:
        """The time of the earliest current entry (infinity when there is none)."""
        heap, is_current = self._heap, self._is_current
        while heap and not is_current(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def pop_due(self, now: float) -> list[Subject]:
        """Remove and return, in (time, subject) order, the current subjects due at `now`."""
        heap, is_current = self._heap, self._is_current
        due: list[Subject] = []
        while heap and is_due(heap[0][0], now):
            at, subject = heapq.heappop(heap)
            if is_current(at, subject):
                due.append(subject)
        return due


@dataclass(frozen=True)
class PollGrid:
    """When idle agents poll for work. Poll k of an agent comes at registration + (k + offset_k) *
    interval, offset_k a deterministic draw in +/- jitter / 2 from the agent's seed: gaps vary by up to
    `jitter` intervals, and any poll time is computed without replaying the polls before it."""

    interval_s: float
    jitter: float

    @classmethod
    def of(cls, interval_s: float, jitter: float) -> PollGrid:
        return cls(interval_s, min(max(jitter, 0.0), 0.99))  # from 1 on, polls could change order

    def offset(self, seed: int, k: int) -> float:
        return (mix64(seed + k) / 2**64 - 0.5) * self.jitter

    def next_poll(self, registered_at: float, seed: int, after: float, *, inclusive: bool) -> float:
        """The first poll after `after` (or at it, with `inclusive`)."""
        interval = self.interval_s
        # Poll k comes no later than registration + (k + jitter / 2) * interval, so every k below this
        # one is too early: start there (usually the first try is the one).
        k = max(1, math.ceil((after - registered_at) / interval - self.jitter / 2 - 1e-6))
        while True:
            at = registered_at + (k + self.offset(seed, k)) * interval
            if at > after + EPSILON_S or (inclusive and at >= after - EPSILON_S):
                return at
            k += 1
