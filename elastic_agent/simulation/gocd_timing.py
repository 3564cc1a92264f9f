"""When things happen in the simulated GoCD server: timed queues of (time, subject), and when each idle
agent asks for work (its get-work back-off). Bookkeeping only; the GoCD rules are in gocd_model.py."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

# Float time sums (origin + n * interval) can land a hair before the instant they were aimed at.
EPSILON_S = 1e-6
Subject = TypeVar("Subject", str, int)


def is_due(at: float, now: float) -> bool:
    return at <= now + EPSILON_S


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
class PollBackOff:
    """When an idle agent asks the server for work, as gocd/gocd's agent does it.

    The loop modelled is GoCD 25.4.0's and later's (gocd/gocd commit 5ff027acc5: "Don't back-off after
    successfully completing work"). `AgentWorkRetrievalScheduler.run`
    (agent/src/main/java/com/thoughtworks/go/agent) loops: get work; if the attempt was a job
    (`WorkAttempt.OK`: `BuildWork`, whatever its result) it restarts its `BackOffExecution` and asks again at
    once; otherwise (`NOTHING_TO_DO`: no work or denied work; `FAILED`: unregistered, or an exception) it
    sleeps the execution's `nextBackOff()` and asks again, the back-off going on growing. The first get-work
    comes at once: the loop starts with it, and the registration before it
    (`SslInfrastructureService.registerIfNecessary`) returns only once registered. The back-off is Spring's
    `ExponentialBackOff` (spring-core 4.3.30, gocd/gocd build.gradle; wired in
    agent/src/main/resources/applicationContext.xml from agent.properties: `agent.get.work.delay` 1000 ms
    initial, `agent.get.work.backOffMultiplier` 1.5, `agent.get.work.interval` 10000 ms at most). Its
    execution works in whole milliseconds: the first delay is min(initial, max), each next one `(long)
    (previous * multiplier)` capped at max (so 1000, 1500, 2250, 3375, 5062, 7593, 10000, 10000 ... ms). No
    jitter (Spring's `jitter` came in 7.0, and is 0 by default there too), and the default maximum elapsed
    time is unlimited, so it never stops. Any setting is a system property first
    (`systemPropertiesMode` 2 in that file).

    So an agent's polls are a pure function of the instant its back-off last began (`since`: its
    registration, or the end of its last job): since + 0, + 1, + 2.5, + 4.75, ... s, then every 10 s. Any
    poll time is computed without replaying the polls before it, and skipping the polls that would ask
    nothing (gocd_inprocess.py) cannot move the later ones. The time an agent spends in the get-work request
    itself is not added (the model's polls take no virtual time).

    `waits_first` is the loop of GoCD 23.1.0 to 25.3.0 (from commit 2fc317a23f, which brought the
    back-off): it slept the execution's `nextBackOff()` before every get-work and restarted the execution
    after a job, so an agent waited one back-off step, the initial delay, before its first get-work and
    before the one after each job: polls at since + 1, + 2.5, + 4.75, ... s. Older agents polled on a
    fixed `agent.get.work.interval` after a once-off `agent.get.work.delay` (get_work_delay_s =
    get_work_interval_s, with `waits_first`, comes closest)."""

    offsets_s: tuple[float, ...]  # from `since`, the polls before the delays reach the maximum
    max_s: float

    @classmethod
    def of(
        cls, delay_s: float, multiplier: float, interval_s: float, *, waits_first: bool = False
    ) -> PollBackOff:
        """`agent.get.work.delay`, `agent.get.work.backOffMultiplier`, `agent.get.work.interval`, and
        whether the agent sleeps a step before each get-work (GoCD before 25.4.0) or after one without a
        job."""
        delay_ms, max_ms = round(delay_s * 1000), round(interval_s * 1000)
        if delay_ms < 1 or max_ms < 1:
            raise ValueError(
                f"the get-work delay ({delay_s} s) and interval ({interval_s} s) must be at least 1 ms"
            )
        if multiplier < 1:
            raise ValueError(f"the get-work back-off multiplier ({multiplier}) must be at least 1")
        offsets_ms = [0]
        delay = min(delay_ms, max_ms)
        while delay < max_ms:
            offsets_ms.append(offsets_ms[-1] + delay)
            grown = min(int(delay * multiplier), max_ms)
            if grown == delay:  # a multiplier too close to 1 to grow a whole millisecond: fixed from here
                break
            delay = grown
        offsets_ms.append(offsets_ms[-1] + delay)
        if waits_first:  # the same sleeps, each before its get-work: no poll at `since` itself
            offsets_ms.pop(0)
        return cls(tuple(ms / 1000 for ms in offsets_ms), delay / 1000)

    def delays_s(self, count: int) -> list[float]:
        """The first `count` sleeps between polls (for tests and documents)."""
        times = [self.offsets_s[k] if k < len(self.offsets_s) else self._tail(k) for k in range(count + 1)]
        return [round(later - earlier, 6) for earlier, later in itertools.pairwise(times)]

    def _tail(self, k: int) -> float:
        last = len(self.offsets_s) - 1
        return self.offsets_s[last] + (k - last) * self.max_s

    def next_poll(self, since: float, after: float, *, inclusive: bool) -> float:
        """The first poll after `after` (or at it, with `inclusive`) of an agent whose back-off began at
        `since`."""
        offsets = self.offsets_s
        for offset in offsets:
            at = since + offset
            if at > after + EPSILON_S or (inclusive and at >= after - EPSILON_S):
                return at
        # Every 10 s from the last offset on: start at the first step that can be late enough.
        last = offsets[-1]
        k = max(1, math.floor((after - since - last) / self.max_s))
        while True:
            at = since + last + k * self.max_s
            if at > after + EPSILON_S or (inclusive and at >= after - EPSILON_S):
                return at
            k += 1
