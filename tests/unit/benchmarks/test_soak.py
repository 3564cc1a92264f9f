"""The soak's verdict (benchmarks/soak_rules.py) on synthetic series: what it calls flat and what it calls
growing, without running the soak itself (scripts/test.sh runs its two-minute version)."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks import soak_rules
from benchmarks.soak_rules import judge, slope_per_hour, verdicts

MIB = 1024.0


def times(minutes: float, interval_s: float = 5.0) -> list[float]:
    return [i * interval_s for i in range(int(minutes * 60 / interval_s) + 1)]


def test_slope_is_the_least_squares_slope_per_hour() -> None:
    t = times(10)
    assert slope_per_hour(t, [3.0 + 0.01 * x for x in t]) == pytest.approx(36.0)
    assert slope_per_hour(t, [7.0] * len(t)) == pytest.approx(0.0)
    assert slope_per_hour([1.0], [5.0]) == 0.0


def test_a_bounded_structure_that_swings_with_the_load_is_flat() -> None:
    rng = random.Random(3)
    t = times(2)
    values = [20 + 8 * math.sin(x / 7) + rng.randint(-3, 3) for x in t]
    verdict = judge("records", t, values, warmup_until_s=40)
    assert verdict.flat, verdict


def test_a_structure_that_grows_with_the_work_done_is_not_flat() -> None:
    rng = random.Random(3)
    t = times(2)
    values = [20 + x * 0.5 + rng.randint(-3, 3) for x in t]  # one entry per two seconds: a leak per job
    verdict = judge("records", t, values, warmup_until_s=40)
    assert not verdict.flat
    assert verdict.median_last_third > verdict.peak_first_third + 8
    assert verdict.slope_per_hour > 1000


def test_a_spike_at_the_end_of_a_bounded_series_is_not_growth() -> None:
    t = times(30)
    values = [30.0 + (x % 60) / 10 for x in t]
    values[-1] = 56.0  # the load bunched up once: pods piled up and retired together
    verdict = judge("records", t, values, warmup_until_s=600)
    assert verdict.flat and verdict.peak_last_third == 56.0 and verdict.median_last_third < 40


def test_growth_during_the_warm_up_alone_is_not_held_against_a_series() -> None:
    t = times(2)
    values = [min(x, 40.0) for x in t]  # fills during the first 40 s, then stays
    assert judge("banked keys", t, values, warmup_until_s=40).flat


def test_a_cache_filling_towards_its_capacity_is_flat_and_one_past_it_is_not() -> None:
    t = times(2)
    filling = [10.0 * x for x in t]  # still filling at the end of a short run
    assert judge("parsed bodies", t, filling, warmup_until_s=40, limit=4096).flat
    assert not judge("parsed bodies", t, filling, warmup_until_s=40, limit=1000).flat


def test_rss_on_a_long_run_is_judged_by_its_slope_projected_over_a_day() -> None:
    rng = random.Random(5)
    t = times(30)
    start = 90 * MIB
    noisy = [start + rng.uniform(-1, 1) * MIB for _ in t]
    leaking = [start + x / 3600 * 5 * MIB + rng.uniform(-1, 1) * MIB for x in t]  # 5 MiB an hour
    warm = soak_rules.warmup_s(30 * 60)
    flat = judge("rss", t, noisy, warm, kind="rss", unit="KiB")
    leak = judge("rss", t, leaking, warm, kind="rss", unit="KiB")
    assert flat.flat and "24 h" in flat.rule
    assert not leak.flat  # 120 MiB a day against a limit of half of 90 MiB
    assert leak.slope_per_hour == pytest.approx(5 * MIB, rel=0.3)


def test_rss_on_a_short_run_tolerates_allocator_warm_up_but_not_a_gross_leak() -> None:
    t = times(2)
    start = 85 * MIB
    warming = [start + x / 120 * 8 * MIB for x in t]  # 8 MiB in two minutes: caches filling
    gross = [start + x / 120 * 80 * MIB for x in t]  # 80 MiB in two minutes
    assert judge("rss", t, warming, 40, kind="rss", unit="KiB").flat
    assert not judge("rss", t, gross, 40, kind="rss", unit="KiB").flat


def test_verdicts_judge_every_sampled_series_and_too_few_samples_are_refused() -> None:
    t = times(2)
    samples = [
        {"t": x, "rss_kib": 80 * MIB, "fds": 11, "threads": 21, "structures": {"records": 20, "leak": x},
         "limits": {}}
        for x in t
    ]  # fmt: skip
    judged = {v.name: v.flat for v in verdicts(samples, run_s=120)}
    assert judged == {"rss": True, "open fds": True, "threads": True, "records": True, "leak": False}
    with pytest.raises(ValueError, match="at least 3"):
        judge("records", [0.0, 50.0], [1.0, 1.0], warmup_until_s=40)


def test_latency_slopes_are_per_hour_after_the_warm_up() -> None:
    windows = [{"t": x, "count": 10, "p50_ms": 2.0 + x / 3600, "p99_ms": 9.0} for x in times(30)]
    slopes = soak_rules.latency_slopes(windows, warmup_until_s=600)
    assert slopes["p50_ms_per_hour"] == pytest.approx(1.0)
    assert slopes["p99_ms_per_hour"] == pytest.approx(0.0)
