"""The simulated server's timing: poll times found directly equal those found by walking every wait of
the agent's back-off, and timed queues skip what went stale."""

from __future__ import annotations

import random

import pytest

from elastic_agent.simulation.gocd_timing import EPSILON_S, PollBackOff, TimedQueue
from tests.support.doubles.standin_agent import WorkBackOff


def walked_next_poll(walker: WorkBackOff, since: float, after: float, inclusive: bool) -> float:
    """The definition, wait by wait from the first poll, with the stand-in agent's own back-off."""
    walker.restart()
    at = since
    while not (at > after + EPSILON_S or (inclusive and at >= after - EPSILON_S)):
        at += walker.next_s()
    return at


# (delay, multiplier, interval): GoCD's, the tests' short ones, a doubling, fixed intervals, a delay past the
# interval (Spring takes the interval).
BACK_OFFS = [
    (1.0, 1.5, 10.0),
    (0.05, 1.5, 0.2),
    (2.0, 2.0, 7.0),
    (5.0, 1.0, 5.0),
    (30.0, 30.0, 30.0),
    (3.0, 1.5, 1.0),
]


@pytest.mark.parametrize("delay_s, multiplier, interval_s", BACK_OFFS)
def test_next_poll_is_the_first_poll_after_the_instant_as_walking_every_wait_finds_it(
    delay_s: float, multiplier: float, interval_s: float
) -> None:
    rng = random.Random(7)
    backoff = PollBackOff.of(delay_s, multiplier, interval_s)
    walker = WorkBackOff(delay_s, multiplier, interval_s)
    for _ in range(300):
        since = rng.uniform(0, 1000)
        after = since + rng.choice([rng.uniform(-10, 30), rng.uniform(0, 600), float(rng.randint(0, 60))])
        for inclusive in (False, True):
            expected = walked_next_poll(walker, since, after, inclusive)
            assert backoff.next_poll(since, after, inclusive=inclusive) == pytest.approx(expected, abs=1e-6)


def test_a_poll_time_is_its_own_next_poll_only_when_inclusive() -> None:
    backoff = PollBackOff.of(1.0, 1.5, 10.0)
    for after in (100.0, 101.2, 130.0, 1000.0):
        at = backoff.next_poll(100.0, after, inclusive=False)
        assert backoff.next_poll(100.0, at, inclusive=True) == at
        assert backoff.next_poll(100.0, at, inclusive=False) > at + EPSILON_S


def test_settings_that_would_poll_without_pause_are_refused_with_a_sentence() -> None:
    for delay_s, multiplier, interval_s in ((0.0, 1.5, 10.0), (1.0, 0.5, 10.0), (1.0, 1.5, 0.0)):
        with pytest.raises(ValueError, match="get-work"):
            PollBackOff.of(delay_s, multiplier, interval_s)


def test_a_timed_queue_gives_current_subjects_in_time_order_and_skips_stale_ones() -> None:
    current = {"a": 3.0, "b": 1.0, "c": 2.0}
    queue: TimedQueue[str] = TimedQueue(lambda at, name: current.get(name) == at)
    for name, at in current.items():
        queue.push(at, name)
    queue.push(0.5, "c")  # an earlier entry for c that a change made stale
    assert queue.first() == 1.0
    current["b"] = 9.0  # b moved: its entry at 1.0 is stale now
    queue.push(9.0, "b")
    assert queue.pop_due(2.0) == ["c"]
    assert queue.pop_due(5.0) == ["a"]
    assert queue.first() == 9.0 and queue.pop_due(9.0) == ["b"]
    assert queue.first() == float("inf")
