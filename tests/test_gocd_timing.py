"""The simulated server's timing: poll times found directly equal those found by walking every poll,
and timed queues skip what went stale."""

from __future__ import annotations

import random

from elastic_agent.simulation.gocd_timing import EPSILON_S, PollGrid, TimedQueue


def walked_next_poll(grid: PollGrid, registered_at: float, seed: int, after: float, inclusive: bool) -> float:
    """The definition, poll by poll from the first."""
    k = 1
    while True:
        at = registered_at + (k + grid.offset(seed, k)) * grid.interval_s
        if at > after + EPSILON_S or (inclusive and at >= after - EPSILON_S):
            return at
        k += 1


def test_next_poll_is_the_first_poll_after_the_instant_as_walking_every_poll_finds_it() -> None:
    rng = random.Random(7)
    for jitter in (0.0, 0.2, 0.5, 0.99, 3.0):
        grid = PollGrid.of(5.0, jitter)
        for _ in range(400):
            registered_at, seed = rng.uniform(0, 1000), rng.getrandbits(64)
            after = registered_at + rng.uniform(-10, 300)
            for inclusive in (False, True):
                expected = walked_next_poll(grid, registered_at, seed, after, inclusive)
                assert grid.next_poll(registered_at, seed, after, inclusive=inclusive) == expected


def test_a_poll_time_is_its_own_next_poll_only_when_inclusive() -> None:
    grid = PollGrid.of(5.0, 0.2)
    at = grid.next_poll(100.0, 42, 130.0, inclusive=False)
    assert grid.next_poll(100.0, 42, at, inclusive=True) == at
    later = grid.next_poll(100.0, 42, at, inclusive=False)
    assert 5.0 * 0.8 - EPSILON_S <= later - at <= 5.0 * 1.2 + EPSILON_S


def test_jitter_is_clamped_so_polls_keep_their_order() -> None:
    assert PollGrid.of(5.0, 3.0).jitter == 0.99 and PollGrid.of(5.0, -1.0).jitter == 0.0


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
