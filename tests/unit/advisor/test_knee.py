"""The knee rule (elastic_agent/advisor/knee.py) on frontiers built by hand, and `choose` recommending
the knee, not the costliest candidate, when no candidate meets the targets.

Points are (cost per job in pod-seconds, mean wait in seconds); a gain is seconds of the jobs' waiting
saved per extra pod-hour: 3600 * wait saved / pod-seconds added.
"""

from __future__ import annotations

import pytest

from elastic_agent.advisor.advise import Candidate, choose, frontier
from elastic_agent.advisor.knee import gain, knee
from elastic_agent.traces.measures import PolicyResult


def test_a_clear_knee_is_where_the_next_pod_hours_stop_paying() -> None:
    # 100 -> 200 saves 10 s for 100 pod-s (360 s per pod-hour); past 200, 1 s per 400 pod-s (9).
    points = [(100.0, 30.0), (200.0, 20.0), (600.0, 19.0), (1000.0, 18.0)]
    assert knee(points, 60.0) == 1


def test_a_flat_frontier_recommends_its_cheapest_point() -> None:
    points = [(100.0, 20.0), (1000.0, 19.9), (3000.0, 19.8)]
    assert knee(points, 60.0) == 0


def test_a_single_point_is_its_own_knee() -> None:
    assert knee([(250.0, 12.0)], 60.0) == 0


def test_a_small_step_before_a_large_drop_does_not_stop_the_rule() -> None:
    # The next point alone buys little (0.5 s for 100 pod-s: 18 s per pod-hour), the one after it much
    # (from the first: 10.5 s for 200 pod-s, 189 s per pod-hour): a chord to it is worth taking.
    points = [(100.0, 20.0), (200.0, 19.5), (300.0, 9.5), (3000.0, 9.0)]
    assert knee(points, 60.0) == 2


def test_points_of_equal_cost_and_wait_are_one_point_and_the_first_given_wins() -> None:
    points = [(100.0, 30.0), (200.0, 20.0), (200.0, 20.0), (900.0, 19.0)]
    assert knee(points, 60.0) == 1


def test_a_gain_exactly_at_the_threshold_is_still_worth_taking() -> None:
    # 1 s for 60 pod-s is exactly 60 s per pod-hour.
    assert gain((100.0, 21.0), (160.0, 20.0)) == pytest.approx(60.0)
    assert knee([(100.0, 21.0), (160.0, 20.0)], 60.0) == 1
    assert knee([(100.0, 21.0), (160.0, 20.0)], 60.001) == 0


def test_the_points_may_come_in_any_order_and_the_index_is_in_the_order_given() -> None:
    points = [(600.0, 19.0), (200.0, 20.0), (1000.0, 18.0), (100.0, 30.0)]
    assert knee(points, 60.0) == 1


def test_a_gain_of_zero_recommends_the_point_that_waits_least() -> None:
    points = [(100.0, 30.0), (200.0, 20.0), (600.0, 19.0), (1000.0, 18.0)]
    assert knee(points, 0.0) == 3


def test_a_higher_gain_asked_stops_earlier_on_the_frontier() -> None:
    points = [(100.0, 30.0), (200.0, 20.0), (600.0, 19.0), (1000.0, 18.0)]
    assert [knee(points, g) for g in (5.0, 60.0, 1000.0)] == [3, 1, 0]


def test_a_costlier_point_that_waits_no_less_buys_nothing() -> None:
    assert gain((100.0, 20.0), (500.0, 20.0)) == 0.0
    assert gain((100.0, 20.0), (100.0, 15.0)) == float("inf")


def test_no_points_or_a_negative_gain_is_refused() -> None:
    with pytest.raises(ValueError, match="no points"):
        knee([], 60.0)
    with pytest.raises(ValueError, match="0 or more"):
        knee([(1.0, 1.0)], -1.0)


def _result(mean: float, p95: float, idle: float, boot: float = 0.0) -> PolicyResult:
    jobs = 100
    return PolicyResult(
        "x", jobs, jobs, jobs, 10, mean, mean, p95, p95, p95, 0, idle * jobs, boot * jobs, 0.0, 1, 0, 0.0,
        0.0, 0, 0, 0,
    )  # fmt: skip


def _candidate(label: str, mean: float, idle: float) -> Candidate:
    return Candidate(label, {"Reuse": "true"}, _result(mean, mean * 2, idle))


def test_when_no_candidate_meets_the_targets_choose_recommends_the_knee_not_the_costliest() -> None:
    baseline = _result(30.0, 40.0, 0.0, 25.0)
    candidates = [
        _candidate("cheap", 26.0, 150.0),
        _candidate("knee", 20.0, 350.0),  # 6 s for 200 pod-s: 108 s per pod-hour
        _candidate("dominated", 24.0, 900.0),
        _candidate("costliest", 10.0, 2700.0),  # 10 s more for 2350 pod-s: 15 s per pod-hour
    ]
    chosen, verdict = choose(candidates, baseline, 0.2, 5.0, knee_gain=60.0)
    assert (chosen.label, verdict) == ("knee", "missed")
    assert [c.label for c in frontier(candidates)] == ["cheap", "knee", "costliest"]
    # Asking for no gain at all gives the old fallback: the candidate that waits least.
    assert choose(candidates, baseline, 0.2, 5.0, knee_gain=0.0)[0].label == "costliest"


def test_a_candidate_meeting_the_targets_is_chosen_as_before_whatever_the_knee() -> None:
    baseline = _result(30.0, 40.0, 0.0, 25.0)
    candidates = [_candidate("cheap", 26.0, 150.0), _candidate("meets", 5.0, 4000.0)]
    chosen, verdict = choose(candidates, baseline, 0.2, None, knee_gain=60.0)
    assert (chosen.label, verdict) == ("meets", "met")
