"""The knee of a frontier: which point to recommend when no candidate meets the wait targets.

Falling back to the candidate that waits least recommends the costliest point of the frontier, where
the last seconds of wait are bought with whole pods idle all day. The knee rule stops where more
spending stops paying: the recommendation is the cheapest frontier point from which no costlier frontier
point saves at least `min_gain` seconds of the jobs' waiting, summed over them, per extra pod-hour spent
idle or booting. Per job that is a ratio of the frontier's two axes, `3600 * (wait saved) / (pod-seconds
added)`, the same whatever the profile's jobs per day, so the rule reads in the units an administrator
budgets: each further pod-hour a day must save at least `min_gain` seconds of waiting a day.

Why chords to every costlier point and not only to the next one: a discrete frontier is not convex, and a
small step that buys little may lead to a large one that buys much; stopping at the small step would
miss it. The last point always qualifies (nothing costlier), so a knee always exists. Points of equal
cost and wait are one point (the first given wins); a costlier point that waits no less buys nothing.

Pure: points in, an index out.
"""

from __future__ import annotations

from collections.abc import Sequence

POD_HOUR_S = 3600.0
DEFAULT_MIN_GAIN_S = 60.0  # a pod-hour must save at least a minute of the jobs' waiting


def gain(cheap: tuple[float, float], dear: tuple[float, float]) -> float:
    """Seconds of waiting saved per extra pod-hour, going from `cheap` to `dear` (cost per job in
    pod-seconds, mean wait in seconds): infinite when the wait falls at no cost, 0 when nothing is
    saved."""
    saved = cheap[1] - dear[1]
    added = dear[0] - cheap[0]
    if saved <= 0:
        return 0.0
    if added <= 0:
        return float("inf")
    return POD_HOUR_S * saved / added


def knee(points: Sequence[tuple[float, float]], min_gain: float = DEFAULT_MIN_GAIN_S) -> int:
    """The index, in `points`, of the knee: `points` are (cost per job in pod-seconds, mean wait in
    seconds), a frontier in any order."""
    if not points:
        raise ValueError("a frontier with no points has no knee")
    if min_gain < 0:
        raise ValueError(f"the knee's gain must be 0 or more seconds per pod-hour, not {min_gain:g}")
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1], i))
    for place, index in enumerate(order):
        here = points[index]
        if all(gain(here, points[later]) < min_gain for later in order[place + 1 :]):
            return index
    raise AssertionError("unreachable: the costliest point always qualifies")


def rule_text(min_gain: float) -> str:
    """The rule, to follow "the recommendation is" in the report's sentence."""
    return (
        "the cheapest point of the frontier "
        f"from which no costlier point saves at least {min_gain:g} s of the jobs' waiting (summed over "
        "them) per extra pod-hour idle or booting (`--knee-gain`)"
    )
