"""From a profile's jobs, when demand is high and what `ReuseSchedule` would meet it.

Demand is read by hour of the week in the schedule's time zone, from the trace's absolute times (its
origin plus each job's `at`). With a week of history or more, days are first sorted into working days
and quiet days by their volume (a day with less than `quiet_day_share` of the busiest day's jobs is
quiet), and each kind of day gets the mean of its days' hourly arrivals: five Mondays-to-Fridays averaged
are less noisy than five separate days, and give one cron expression (`mon-fri`) instead of five that
differ by an hour. With less than a week, every day is taken to be alike (`mon-sun`).

An hour is busy when its arrivals reach `busy_share` of the busiest hour's; the hour before each busy
run is added, so that warm pods have booted by the time the ramp arrives. During busy hours a job waits
for a pod to boot when more jobs of its fingerprint arrived within one refill window (a ping, when the
warm pool refills, plus a boot) than idle pods were kept; so the warm pool a candidate keeps
(`MinIdlePods`) is a quantile of that count over the busy hours' jobs, and its IdleTimeout is longer
(idle pods are soon wanted again). Outside the busy hours the cheap plain values hold. Which candidate
is worth its idle pods is left to the simulation (advise.py): these are proposals, not answers. Pure
arithmetic over the trace: it imports nothing of the simulator, which only `advise.py` runs.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from elastic_agent.traces.workload import TraceJob
from profiles.quantities import format_duration, parse_duration

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HOURS = 24


@dataclass(frozen=True)
class DayKind:
    """Days alike (working days, quiet days, or every day) and their mean arrivals per hour."""

    name: str
    days: tuple[int, ...]  # 0 is Monday
    arrivals_per_hour: tuple[float, ...]  # 24 values, hours in the schedule's time zone
    running_per_hour: tuple[float, ...]  # mean jobs running (as if none waited), the concurrency
    busy_hours: tuple[int, ...] = ()
    rising_hours: tuple[int, ...] = ()  # the busy hours where demand is not falling yet


@dataclass(frozen=True)
class Demand:
    timezone: str
    weekly: bool  # the trace covers every day of the week (else every day is taken to be alike)
    kinds: tuple[DayKind, ...]
    refill_window_s: float
    busy_jobs: int  # jobs arriving in busy hours
    jobs: int
    # Per busy-hour job, how many jobs of its fingerprint arrived within one refill window up to it.
    arrivals_in_window: tuple[int, ...] = field(repr=False)

    @property
    def periods(self) -> list[str]:
        """The busy hours as crontab expressions, one per kind of day that has any."""
        return _expressions((kind.days, kind.busy_hours) for kind in self.kinds)

    @property
    def rising_periods(self) -> list[str]:
        """The busy hours where demand rises or holds (not those where it falls)."""
        return _expressions((kind.days, kind.rising_hours) for kind in self.kinds)

    def warm_pods(self, quantile: float) -> int:
        """Idle pods that would have served this share of the busy hours' jobs without a boot."""
        values = self.arrivals_in_window
        if not values:
            return 0
        return values[min(len(values) - 1, max(0, math.ceil(quantile * len(values)) - 1))]

    def summary(self) -> str:
        lines = []
        for kind in self.kinds:
            busy = f"busy {_ranges(kind.busy_hours)}h" if kind.busy_hours else "never busy"
            if kind.busy_hours and kind.rising_hours != kind.busy_hours:
                busy += f" (rising or holding {_ranges(kind.rising_hours)}h)"
            peak = max(kind.arrivals_per_hour)
            hour = kind.arrivals_per_hour.index(peak)
            lines.append(
                f"- {kind.name} ({_day_names(kind.days)}, {self.timezone}): {busy}; up to {peak:.0f} "
                f"jobs per hour ({hour}h), {max(kind.running_per_hour):.1f} running at most "
                f"(hourly mean), {min(kind.running_per_hour):.1f} at least"
            )
        share = self.busy_jobs / max(1, self.jobs)
        lines.append(
            f"- busy hours hold {share:.0%} of the jobs; jobs of one fingerprint arriving within a refill "
            f"window ({self.refill_window_s:g} s) up to a busy-hour job: median {self.warm_pods(0.5)}, "
            f"p80 {self.warm_pods(0.8)}, p90 {self.warm_pods(0.9)}, p95 {self.warm_pods(0.95)}"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class ScheduleProposal:
    """One schedule candidate: plain values outside the busy periods, entries during them (the last
    matching entry wins, as in the product)."""

    label: str
    plain: dict[str, str]
    entries: tuple[dict[str, Any], ...]

    def schedule_text(self) -> str:
        return json.dumps(list(self.entries), separators=(", ", ": "))

    def properties(self) -> dict[str, str]:
        """Elastic-profile properties, as a user would set them."""
        return {"Reuse": "true", **self.plain, "ReuseSchedule": self.schedule_text()}


def analyse(
    jobs: Sequence[TraceJob],
    origin: datetime,
    tz_name: str = "UTC",
    *,
    refill_window_s: float = 85.0,
    busy_share: float = 0.25,
    quiet_day_share: float = 0.3,
    lead_h: int = 1,
) -> Demand:
    """The demand of one profile's jobs (sorted by arrival), by hour in `tz_name`."""
    zone = ZoneInfo(tz_name)
    if not jobs:
        return Demand(tz_name, False, (), refill_window_s, 0, 0, ())
    start = origin.astimezone(UTC)  # a zone with daylight saving would add wall-clock seconds
    local = [(start + timedelta(seconds=job.at)).astimezone(zone) for job in jobs]
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for moment in local:
        counts[(moment.weekday(), moment.hour)] += 1
    running = _running(jobs, local)
    seen_days = _days_covered(local[0], local[-1])
    days_of_week = {day.weekday() for day in seen_days}
    weekly = len(days_of_week) == 7
    per_day: dict[datetime, int] = defaultdict(int)
    for moment in local:
        per_day[moment.replace(hour=0, minute=0, second=0, microsecond=0)] += 1
    if weekly:
        busiest = max(per_day.values())
        totals: dict[int, list[int]] = defaultdict(list)
        for day in seen_days:
            totals[day.weekday()].append(per_day.get(day, 0))
        mean_total = {weekday: sum(v) / len(v) for weekday, v in totals.items()}
        working = tuple(d for d in range(7) if mean_total[d] >= quiet_day_share * busiest)
        quiet = tuple(d for d in range(7) if d not in working)
        groups = [("working days", working), ("quiet days", quiet)]
    else:
        groups = [("every day", tuple(range(7)))]
    occurrences: dict[int, int] = defaultdict(int)  # how many times each weekday was observed
    for day in seen_days:
        occurrences[day.weekday()] += 1
    kinds = []
    for name, days in groups:
        if not days:
            continue
        observed = sum(occurrences[d] for d in days) or 1
        hourly = tuple(sum(counts[(d, h)] for d in days) / observed for h in range(HOURS))
        load = tuple(sum(running[(d, h)] for d in days) / observed / 3600.0 for h in range(HOURS))
        kinds.append(DayKind(name, days, hourly, load))
    peak = max(max(kind.arrivals_per_hour) for kind in kinds)
    for index, k in enumerate(kinds):
        busy = _busy(k.arrivals_per_hour, busy_share * peak, lead_h)
        rising = _rising(k.arrivals_per_hour, busy)
        kinds[index] = DayKind(k.name, k.days, k.arrivals_per_hour, k.running_per_hour, busy, rising)
    busy_slots = {(d, h) for kind in kinds for d in kind.days for h in kind.busy_hours}
    in_window = _arrivals_in_window(jobs, refill_window_s)
    busy_values = sorted(
        count
        for count, moment in zip(in_window, local, strict=True)
        if (moment.weekday(), moment.hour) in busy_slots
    )
    return Demand(
        tz_name, weekly, tuple(kinds), refill_window_s, len(busy_values), len(jobs), tuple(busy_values)
    )


def propose(
    demand: Demand,
    *,
    quantiles: Sequence[float] = (0.5,),
    busy_idle_timeouts: Sequence[str] = ("30m", "60m"),
    plain_idle_timeouts: Sequence[str] = ("2m", "10m"),
) -> list[ScheduleProposal]:
    """Schedule candidates: every busy IdleTimeout with every warm pool quantile (0: no warm pool) and
    every plain IdleTimeout outside the busy hours. Where demand falls within the busy hours the
    IdleTimeout is halved: pods that go idle then are less likely to be wanted again soon."""
    busy, rising = demand.periods, demand.rising_periods
    if not busy:
        return []
    proposals = []
    for plain_timeout in plain_idle_timeouts:
        plain = {"IdleTimeout": plain_timeout, "MinIdlePods": "0"}
        for timeout in busy_idle_timeouts:
            falling = format_duration(parse_duration(timeout) / 2)
            for quantile in quantiles:
                warm = demand.warm_pods(quantile) if quantile > 0 else 0
                entry: dict[str, Any] = {"periods": busy, "timezone": demand.timezone, "MinIdlePods": warm}
                entries: tuple[dict[str, Any], ...]
                if rising and rising != busy:
                    entries = (
                        entry | {"IdleTimeout": falling},
                        entry | {"periods": rising, "IdleTimeout": timeout},
                    )
                    how = f"IdleTimeout={timeout} ({falling} as demand falls)"
                else:
                    entries = (entry | {"IdleTimeout": timeout},)
                    how = f"IdleTimeout={timeout}"
                label = f"schedule: busy {how} MinIdlePods={warm}, else IdleTimeout={plain_timeout}"
                proposals.append(ScheduleProposal(label, plain, entries))
    return _distinct(proposals)


def _distinct(proposals: list[ScheduleProposal]) -> list[ScheduleProposal]:
    """Two quantiles can give the same count: simulate each schedule once."""
    seen: set[str] = set()
    kept = []
    for proposal in proposals:
        key = json.dumps(proposal.properties(), sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(proposal)
    return kept


def _days_covered(first: datetime, last: datetime) -> list[datetime]:
    day = first.replace(hour=0, minute=0, second=0, microsecond=0)
    end = last.replace(hour=0, minute=0, second=0, microsecond=0)
    days = []
    while day <= end:
        days.append(day)
        # Aware datetimes in one zone add wall-clock time: the next calendar day's midnight, even
        # across a daylight-saving change.
        day += timedelta(days=1)
    return days


def _rising(hourly: Sequence[float], busy: Sequence[int]) -> tuple[int, ...]:
    """Busy hours whose coming three hours (itself included) bring at least 90 % of the arrivals of the
    three before: the ramp and the plateau, not the decline."""
    n = len(hourly)
    rising = []
    for h in busy:
        ahead = sum(hourly[(h + k) % n] for k in range(3))
        behind = sum(hourly[(h - k) % n] for k in range(1, 4))
        if ahead >= 0.9 * behind:
            rising.append(h)
    return tuple(rising)


def _expressions(hours_by_days: Iterable[tuple[Sequence[int], Sequence[int]]]) -> list[str]:
    return [f"* {_ranges(hours)} * * {_day_names(days)}" for days, hours in hours_by_days if hours]


def _running(jobs: Sequence[TraceJob], local: Sequence[datetime]) -> dict[tuple[int, int], float]:
    """Job-seconds running in each (weekday, hour), each job from its arrival for its duration."""
    seconds: dict[tuple[int, int], float] = defaultdict(float)
    for job, moment in zip(jobs, local, strict=True):
        hour_start = moment.replace(minute=0, second=0, microsecond=0)
        begin, left = (moment - hour_start).total_seconds(), job.duration
        while left > 0:
            part = min(left, 3600.0 - begin)
            seconds[(hour_start.weekday(), hour_start.hour)] += part
            left -= part
            begin = 0.0
            hour_start += timedelta(hours=1)
    return seconds


def _busy(hourly: Sequence[float], threshold: float, lead_h: int) -> tuple[int, ...]:
    busy = {h for h in range(HOURS) if hourly[h] >= threshold and threshold > 0}
    for h in sorted(busy):
        for back in range(1, lead_h + 1):
            busy.add((h - back) % HOURS)
    return tuple(sorted(busy))


def _arrivals_in_window(jobs: Sequence[TraceJob], window_s: float) -> list[int]:
    """For each job, the jobs of its fingerprint (profile and environment here: one profile's jobs)
    arriving in (at - window, at], itself and those before it in the trace's order included: the idle
    pods it would have taken to serve it without a boot."""
    times: dict[str | None, list[float]] = defaultdict(list)
    result = []
    for job in jobs:
        seen = times[job.environment]
        seen.append(job.at)
        result.append(len(seen) - bisect.bisect_right(seen, job.at - window_s))
    return result


def _ranges(values: Sequence[int]) -> str:
    """Integers as crontab ranges: 7,8,9,12 -> 7-9,12."""
    runs: list[list[int]] = []
    for value in sorted(set(values)):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ",".join(f"{low}-{high}" if high > low else f"{low}" for low, high in runs)


def _day_names(days: Sequence[int]) -> str:
    """Weekday numbers (0 is Monday) as crontab day names: 0-4 -> mon-fri; 5,6 -> sat-sun."""
    pieces = _ranges(days).split(",")
    return ",".join("-".join(DAY_NAMES[int(n)] for n in piece.split("-")) for piece in pieces)
