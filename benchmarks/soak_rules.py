"""The soak's verdict (benchmarks/soak.py): least-squares slopes of the sampled series after a warm-up,
and the rule that calls a series "flat". Pure functions of the samples, so that
tests/unit/benchmarks/test_soak.py can prove the rule on synthetic series (a flat one, a leaking one) without
a half-hour run.

Why two rules. A structure that leaks grows with the work done, so over a steady load its whole level
keeps rising; a bounded one (records of live pods, waiting jobs) goes up and down with the load around a
level, with spikes when the load bunches up. Counts are therefore judged by where they are at the end
against how high they already went at the start: the median of the last third of the window after the
warm-up may exceed the peak of the first third only by an allowance. The median, not the peak, of the
last third: on a shared machine the simulated GoCD stalls now and then, pods pile up and retire together,
and one such spike in the last third, even in the very last sample, is not growth (RESULTS.md section 8
has a run that ended on one). A least-squares slope
would not do for counts on a short run: a bounded series that swings by ten entries has a slope of
hundreds per hour over two minutes.

Resident memory is judged by its slope, but only on a window long enough for it to mean something.
Over the first minutes CPython's allocator takes arenas it keeps, and the parse caches (4,096
should-assign-work bodies, 512 job specs) fill towards their capacity: RSS climbs for reasons that stop.
On a window of `LONG_WINDOW_S` or more, RSS is flat when its slope, projected over 24 h, stays under
`RSS_DAY_GROWTH` of the RSS at the start of the window. On a shorter window (the two-minute CI run) the
slope is reported but the peak rule applies, with a tolerant allowance (`RSS_SHORT_ALLOWANCE_KIB`, or
`RSS_SHORT_ALLOWANCE_FRACTION` of the start): CI catches a gross leak; the half-hour run measures.

A structure with a fixed capacity (the parse caches, the banked keys, the console-line queue; /metrics
says which, `gocd_elastic_agent_retained_entries_limit`) fills towards it for as long as new keys come,
which at the soak's rate takes minutes: it is flat when it never exceeds that capacity.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
LONG_WINDOW_S = 10 * 60.0
WARMUP_FRACTION = 1 / 3  # of the run, at most MAX_WARMUP_S
MAX_WARMUP_S = 10 * 60.0
RSS_DAY_GROWTH = 0.5
RSS_SHORT_ALLOWANCE_KIB = 24 * 1024
RSS_SHORT_ALLOWANCE_FRACTION = 0.25
COUNT_ALLOWANCE = 8  # entries, file descriptors
COUNT_ALLOWANCE_FRACTION = 0.25
THREAD_ALLOWANCE = 4


@dataclass(frozen=True)
class SeriesVerdict:
    name: str
    unit: str
    samples: int
    start: float  # the first value after the warm-up
    end: float
    peak_first_third: float
    peak_last_third: float
    median_last_third: float
    slope_per_hour: float
    rule: str  # the rule applied, in words
    flat: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def warmup_s(run_s: float) -> float:
    return min(MAX_WARMUP_S, run_s * WARMUP_FRACTION)


def slope_per_hour(times_s: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of `values` over `times_s` (seconds), per hour; 0 with fewer than two
    distinct times."""
    if len(times_s) < 2 or len(set(times_s)) < 2:
        return 0.0
    return statistics.linear_regression(times_s, values).slope * HOUR_S


def _after(
    times_s: Sequence[float], values: Sequence[float], from_s: float
) -> tuple[list[float], list[float]]:
    kept = [(t, v) for t, v in zip(times_s, values, strict=True) if t >= from_s]
    return [t for t, _ in kept], [v for _, v in kept]


def judge(
    name: str,
    times_s: Sequence[float],
    values: Sequence[float],
    warmup_until_s: float,
    *,
    kind: str = "count",
    unit: str = "entries",
    limit: float | None = None,
) -> SeriesVerdict:
    """`kind`: "count" (structures, fds), "threads" or "rss" (KiB); `limit`: the structure's fixed
    capacity, if it has one. See the module's docstring."""
    times, kept = _after(times_s, values, warmup_until_s)
    if len(kept) < 3:
        raise ValueError(f"{name}: {len(kept)} samples after the warm-up; the rule needs at least 3")
    third = max(1, len(kept) // 3)
    first_peak, last_peak = max(kept[:third]), max(kept[-third:])
    last_median = statistics.median(kept[-third:])
    slope = slope_per_hour(times, kept)
    window = times[-1] - times[0]
    if limit is not None:
        flat = max(values) <= limit
        rule = f"never above its capacity {limit:g}"
    elif kind == "rss" and window >= LONG_WINDOW_S:
        limit = RSS_DAY_GROWTH * kept[0]
        flat = slope * DAY_S / HOUR_S < limit
        rule = f"slope x 24 h < {RSS_DAY_GROWTH:.0%} of start ({limit / 1024:.1f} MiB)"
    else:
        if kind == "rss":
            allowance = max(RSS_SHORT_ALLOWANCE_KIB, RSS_SHORT_ALLOWANCE_FRACTION * first_peak)
        elif kind == "threads":
            allowance = float(THREAD_ALLOWANCE)
        else:
            allowance = max(float(COUNT_ALLOWANCE), COUNT_ALLOWANCE_FRACTION * first_peak)
        flat = last_median <= first_peak + allowance
        rule = f"median of last third <= peak of first third + {allowance:g}"
    return SeriesVerdict(
        name, unit, len(kept), kept[0], kept[-1], first_peak, last_peak, last_median, slope, rule, flat
    )


def verdicts(samples: Sequence[Mapping[str, Any]], run_s: float) -> list[SeriesVerdict]:
    """One verdict per sampled series: `rss_kib`, `fds`, `threads` and every `structures` entry."""
    if not samples:
        return []
    warm = warmup_s(run_s)
    times = [float(s["t"]) for s in samples]
    judged = [
        judge("rss", times, [float(s["rss_kib"]) for s in samples], warm, kind="rss", unit="KiB"),
        judge("open fds", times, [float(s["fds"]) for s in samples], warm, unit="fds"),
        judge("threads", times, [float(s["threads"]) for s in samples], warm, kind="threads", unit="threads"),
    ]
    names = sorted({name for s in samples for name in s["structures"]})
    limits: Mapping[str, float] = samples[-1].get("limits", {})
    for name in names:
        values = [float(s["structures"].get(name, 0)) for s in samples]
        judged.append(judge(name, times, values, warm, limit=limits.get(name)))
    return judged


def latency_slopes(windows: Sequence[Mapping[str, Any]], warmup_until_s: float) -> dict[str, float]:
    """Slopes per hour (ms/h) of the per-window p50 and p99 after the warm-up; reported, never judged:
    the machine is shared and noisy."""
    kept = [w for w in windows if w["t"] >= warmup_until_s and w["count"]]
    times = [float(w["t"]) for w in kept]
    return {
        "p50_ms_per_hour": slope_per_hour(times, [float(w["p50_ms"]) for w in kept]),
        "p99_ms_per_hour": slope_per_hour(times, [float(w["p99_ms"]) for w in kept]),
    }


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]
