"""Learning days and judged days: a trace cut in two at a midnight, schedules learned on the first part
and every candidate judged on the second.

A schedule is proposed from a trace's demand by hour; judged on the same trace, a schedule of many
entries could fit the very minutes its bursts came in and look better than it would on any other week.
So the advisor proposes from the first days only and reports every candidate (flat settings, schedules,
one pod per job) on the remaining days, all on the same days so that they compare.

The cut is at a midnight in the schedules' time zone, because schedules speak of days and hours there.
By default the first 4/7 of the calendar days learn (rounded up; a week starting on Monday learns Monday
to Thursday and is judged on Friday to Sunday), keeping at least one day on each side. A trace whose
arrivals span one day or less cannot be cut into whole days: it is learned and judged whole, and the
report says so.

Judging needs the pods that would be alive at the cut. Every candidate is simulated on the whole trace,
the learning days included, and only the jobs arriving from the cut on and the pod-seconds from the cut
on are counted (SimSettings.judged_from_s). The alternative, a run from the cut after a warm-up, would
need a warm-up length that suits every candidate (an IdleTimeout of 60m keeps pods an hour; a warm pool
fills within a ping), and whatever was chosen would start some candidates with pods they would not have
had; the whole run starts each with exactly the pods its own settings left. It costs the learning days'
simulation, which the warm-up would partly pay too.

Pure arithmetic over the trace: it imports nothing of the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from elastic_agent.traces.workload import TraceJob

DAY_S = 86_400.0
LEARN_SHARE = 4 / 7


@dataclass(frozen=True)
class Split:
    """Which calendar days learn and which are judged; `at` is the cut in seconds from the trace's time 0
    (0.0 when the trace is not split: every job and every calendar day judged)."""

    learned: tuple[date, ...]
    judged: tuple[date, ...]
    at: float
    timezone: str
    reason: str = ""  # why the trace is not split, when it is not

    @property
    def split(self) -> bool:
        return bool(self.learned)

    @property
    def days_judged(self) -> float:
        """The calendar days the figures cover: what pod-seconds are divided by for pod-hours a day."""
        return float(max(1, len(self.judged)))

    def learning(self, jobs: Sequence[TraceJob]) -> list[TraceJob]:
        """The jobs the proposals may see: those arriving before the cut (all of them when not split)."""
        return [job for job in jobs if job.at < self.at] if self.split else list(jobs)

    def judged_jobs(self, jobs: Sequence[TraceJob]) -> int:
        return sum(1 for job in jobs if job.at >= self.at)

    def describe(self, jobs: Sequence[TraceJob]) -> str:
        """The report's line saying which days learned and which were judged."""
        if not self.split:
            return (
                f"Learned and judged on the whole trace ({len(jobs)} jobs): {self.reason}, so the "
                "schedules are judged on the days they were learned from and may fit them better than "
                "other days."
            )
        learned, judged = len(self.learning(jobs)), self.judged_jobs(jobs)
        return (
            f"Schedules learned on {_days(self.learned)} ({learned} jobs); every candidate judged on "
            f"{_days(self.judged)} ({judged} jobs, the waits and pod-seconds from "
            f"{_midnight(self.judged[0], self.timezone).isoformat()} on), {self.timezone}."
        )


def split_trace(
    jobs: Sequence[TraceJob], origin: datetime, timezone: str = "UTC", learn_days: int | None = None
) -> Split:
    """Cut `jobs` (sorted by arrival; `at` in seconds from `origin`) at a midnight in `timezone`:
    `learn_days` calendar days learn (None: the default share; 0: no cut)."""
    if learn_days is not None and learn_days < 0:
        raise ValueError(f"learning days must be 0 or more, not {learn_days}")
    if not jobs:
        return Split((), (), 0.0, timezone, "the trace has no jobs")
    zone = ZoneInfo(timezone)
    start = origin.astimezone(UTC)
    first = (start + timedelta(seconds=jobs[0].at)).astimezone(zone).date()
    last = (start + timedelta(seconds=jobs[-1].at)).astimezone(zone).date()
    days = tuple(first + timedelta(days=n) for n in range((last - first).days + 1))
    # Not cut, every day is judged.
    if learn_days == 0:
        return Split((), days, 0.0, timezone, "no learning days were asked for")
    if jobs[-1].at - jobs[0].at <= DAY_S or len(days) < 2:
        return Split((), days, 0.0, timezone, "the trace's arrivals span one day or less")
    wanted = min(math.ceil(LEARN_SHARE * len(days)), len(days) - 1) if learn_days is None else learn_days
    if wanted >= len(days):
        reason = f"{wanted} learning days leave none of its {len(days)} to judge"
        return Split((), days, 0.0, timezone, reason)
    learned, judged = days[:wanted], days[wanted:]
    at = (_midnight(judged[0], timezone).astimezone(UTC) - start).total_seconds()
    return Split(learned, judged, at, timezone)


def _midnight(day: date, timezone: str) -> datetime:
    return datetime.combine(day, time(0), ZoneInfo(timezone))


def _days(days: Sequence[date]) -> str:
    def name(day: date) -> str:
        return f"{day:%a} {day.isoformat()}"

    return name(days[0]) if len(days) == 1 else f"{name(days[0])} to {name(days[-1])}"
