"""ReuseSchedule: reuse settings that follow the working week.

One setting per profile, day and night, either keeps pods idle all night or makes the morning's first
jobs wait for pods to boot. A schedule is a list of entries, each with cron `periods`, a `timezone` and
the values that hold while one of its periods is in force: `MinIdlePods`, `IdleTimeout`,
`MaxJobsPerPod`. Outside every period the profile's plain values hold; when periods overlap the last
entry wins, as in GitLab Runner's autoscaler policies; a value the winning entry does not set keeps the
plain one.

A period is in force during every minute its crontab expression (`minute hour day month day_of_week`)
matches, in its time zone. The expressions are evaluated by APScheduler 3.x's `CronTrigger` (cron syntax,
time zones and daylight saving are its job, not ours) at times the caller passes in: the injected clock's,
so the simulator's virtual week and a real one behave alike. Day-of-week must be given by name
(`mon-fri`): APScheduler numbers days from Monday, crontab from Sunday, and a `1-5` that silently meant
Tuesday to Saturday would be worse than a message.

The schedule is not part of the fingerprint (it changes how long pods are kept, not what they are), so
editing one retires no pod. Pods carry the schedule's canonical text in an annotation, so that a
restarted backend keeps applying it.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from apscheduler.triggers.cron import CronTrigger

from profiles.quantities import format_duration
from profiles.values import describe, duration, integer

MAX_TEXT = 16_000  # characters: it lives in a pod annotation, next to the others
MAX_ENTRIES = 50
MAX_PERIODS = 20
VALUE_KEYS = ("MinIdlePods", "IdleTimeout", "MaxJobsPerPod")
ENTRY_KEYS = ("periods", "timezone", *VALUE_KEYS)
_MINUTE = 60.0
_QUARTER = 15 * _MINUTE
# A fixed moment to ask "does this expression ever match?" (cron has no year field, so four years from
# any date cover every expression that can match at all; 2000 is a leap year).
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)

_read_min_idle = integer(0, 1000)
_read_max_jobs = integer(1)
_read_idle_timeout = duration(0.0)


class ScheduleError(ValueError):
    """Every problem of a schedule, one sentence per bad entry, joined into the message GoCD shows."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Knobs:
    """The reuse values in force at one moment (or the profile's plain ones)."""

    min_idle_pods: int
    idle_timeout: float
    max_jobs_per_pod: int | None


@dataclass(frozen=True)
class Entry:
    number: int  # 1-based, as the messages and the status page count
    periods: tuple[str, ...]
    timezone: str
    min_idle_pods: int | None = None
    idle_timeout: float | None = None
    max_jobs_per_pod: int | None = None
    triggers: tuple[CronTrigger, ...] = field(default=(), compare=False, repr=False)

    def matches(self, minute: datetime) -> bool:
        return any(t.get_next_fire_time(None, minute) == minute for t in self.triggers)

    def over(self, plain: Knobs) -> Knobs:
        return Knobs(
            self.min_idle_pods if self.min_idle_pods is not None else plain.min_idle_pods,
            self.idle_timeout if self.idle_timeout is not None else plain.idle_timeout,
            self.max_jobs_per_pod if self.max_jobs_per_pod is not None else plain.max_jobs_per_pod,
        )

    def describe(self) -> str:
        return f"entry {self.number} ({', '.join(self.periods)}, {self.timezone})"


class Schedule:
    """A parsed schedule. Which entry is in force is asked many times a minute (every reaper pass, every
    warm-pool decision), so the answer for the current minute is kept: one minute, one answer."""

    def __init__(self, entries: tuple[Entry, ...], text: str) -> None:
        self.entries = entries
        self.text = text  # canonical JSON: the pod annotation, and equality
        self._lock = threading.Lock()
        self._minute: float | None = None
        self._in_force: Entry | None = None
        self._change_minute: float | None = None
        self._change: float | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Schedule({self.text})"

    @property
    def wants_warm_pods(self) -> bool:
        """Some period wants idle pods kept (so registration keys are worth banking)."""
        return any(entry.min_idle_pods for entry in self.entries)

    def loosest_max_jobs(self, plain: int | None) -> int | None:
        """The highest MaxJobsPerPod any moment may have (None: no limit at some moment)."""
        limits = [plain, *(e.max_jobs_per_pod for e in self.entries if e.max_jobs_per_pod is not None)]
        return None if None in limits else max(limit for limit in limits if limit is not None)

    def in_force(self, at: float) -> Entry | None:
        """The entry in force at `at` (clock seconds), None outside every period."""
        minute = at - at % _MINUTE
        with self._lock:
            if self._minute == minute:
                return self._in_force
        found = self._entry_at(minute)
        with self._lock:
            self._minute, self._in_force = minute, found
        return found

    def _entry_at(self, minute: float) -> Entry | None:
        for entry in reversed(self.entries):  # the last one that matches wins
            if entry.matches(_local(minute, entry.timezone)):
                return entry
        return None

    def transition(self, at: float, within_s: float = 2 * 86_400.0) -> tuple[float, Entry | None] | None:
        """When the entry in force next changes, and to which (None: the plain values), looking at most
        `within_s` ahead; None when it does not change in that time. For the status pages: it walks
        the minutes while a period holds, so it is not for the request path."""
        current = self.in_force(at)
        moment: float | None = at
        limit = at + within_s
        while moment is not None and moment <= limit:
            moment = self.next_change(moment)
            if moment is None or moment > limit:
                return None
            entry = self._entry_at(moment)
            if entry != current:
                return moment, entry
        return None

    def knobs(self, at: float, plain: Knobs) -> Knobs:
        entry = self.in_force(at)
        return plain if entry is None else entry.over(plain)

    def next_change(self, at: float) -> float | None:
        """A time after `at` no later than the next change of the entry in force (a wake-up that finds no
        change is harmless; a late one is not). Each period bounds it: one that does not match now, by
        its next match; one that matches every minute of its hours, by the next quarter hour (every time
        zone's hours begin on a quarter hour of UTC, so its hour cannot end sooner); any other match, by
        the next minute."""
        minute = at - at % _MINUTE
        with self._lock:
            if self._change_minute == minute:
                return self._change
        following = minute + _MINUTE
        quarter = at - at % _QUARTER + _QUARTER
        bounds: list[float] = []
        for entry in self.entries:
            local = _local(minute, entry.timezone)
            for trigger in entry.triggers:
                if trigger.get_next_fire_time(None, local) == local:
                    bounds.append(quarter if _every_minute(trigger) else following)
                else:
                    start = trigger.get_next_fire_time(None, _local(following, entry.timezone))
                    if start is not None:
                        bounds.append(start.timestamp())
        change = min(bounds) if bounds else None
        with self._lock:
            self._change_minute, self._change = minute, change
        return change


def change_after(schedule: Schedule | None, at: float) -> float:
    """`schedule.next_change(at)`, infinity when there is no schedule or no change ahead: a time a
    decision that read the values in force at `at` is next due (pool/intents.py, `Plan.due`)."""
    change = None if schedule is None else schedule.next_change(at)
    return math.inf if change is None else change


def _every_minute(trigger: CronTrigger) -> bool:
    return any(f.name == "minute" and str(f) == "*" for f in trigger.fields)


def _local(seconds: float, zone: str) -> datetime:
    return datetime.fromtimestamp(seconds, _zone(zone))


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


# ---- reading ----------------------------------------------------------------------------------------


def parse_schedule(text: str) -> Schedule:
    """The schedule in `text` (YAML or JSON), or ScheduleError naming every bad entry."""
    return _parse_cached(text)


@lru_cache(maxsize=128)  # profiles come with every request, pods' annotations with every pod update
def _parse_cached(text: str) -> Schedule:
    if len(text) > MAX_TEXT:
        raise ScheduleError([f"is {len(text)} characters long; at most {MAX_TEXT} are allowed"])
    try:
        document = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as error:  # ValueError: a number too long for Python's int()
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        hint = " (quote cron expressions: YAML reads a leading * as an alias)" if "*" in text else ""
        raise ScheduleError([f"is not valid YAML or JSON{at}{hint}"]) from None
    if isinstance(document, Mapping):
        document = [document]  # one entry without the list around it
    if not isinstance(document, list):
        raise ScheduleError([f"must be a list of entries with periods, not {describe(document)}"])
    if not document:
        raise ScheduleError(["has no entries: give at least one, or leave it blank"])
    if len(document) > MAX_ENTRIES:
        raise ScheduleError([f"has {len(document)} entries; at most {MAX_ENTRIES} are allowed"])
    entries: list[Entry] = []
    problems: list[str] = []
    for number, raw in enumerate(document, start=1):
        entry, entry_problems = _entry(number, raw)
        if entry_problems:
            problems.append(f"entry {number}: {', '.join(entry_problems)}")
        elif entry is not None:
            entries.append(entry)
    if problems:
        raise ScheduleError(problems)
    return Schedule(tuple(entries), _canonical(entries))


def _entry(number: int, raw: Any) -> tuple[Entry | None, list[str]]:
    if not isinstance(raw, Mapping):
        return None, [f"must be an object with periods and values, not {describe(raw)}"]
    problems = [f"{str(key)!r} is not a schedule setting (use {', '.join(ENTRY_KEYS)})"
                for key in raw if key not in ENTRY_KEYS]  # fmt: skip
    zone_name = raw.get("timezone", "UTC")
    zone_ok = _check_zone(zone_name, problems)
    periods = raw.get("periods")
    if isinstance(periods, str):
        periods = [periods]
    triggers: list[CronTrigger] = []
    if not isinstance(periods, list) or not periods:
        problems.append("periods must be a list of cron expressions like '* 7-18 * * mon-fri'")
    elif len(periods) > MAX_PERIODS:
        problems.append(f"has {len(periods)} periods; at most {MAX_PERIODS} are allowed")
    else:
        for period in periods:
            trigger = _trigger(period, zone_name if zone_ok else "UTC", problems)
            if trigger is not None:
                triggers.append(trigger)
    values = {key: _value(key, raw[key], problems) for key in VALUE_KEYS if raw.get(key) is not None}
    if problems:
        return None, problems
    return Entry(number, tuple(str(p).strip() for p in periods), str(zone_name),  # type: ignore[union-attr]
                 values.get("MinIdlePods"), values.get("IdleTimeout"), values.get("MaxJobsPerPod"),
                 tuple(triggers)), []  # fmt: skip


def _check_zone(name: Any, problems: list[str]) -> bool:
    if not isinstance(name, str) or not name.strip():
        problems.append(f"timezone must be a time zone name like Europe/Berlin, not {describe(name)}")
        return False
    try:
        _zone(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        problems.append(f"unknown time zone {name!r} (use an IANA name like Europe/Berlin or UTC)")
        return False
    return True


def _trigger(period: Any, zone: str, problems: list[str]) -> CronTrigger | None:
    if not isinstance(period, str):
        problems.append(f"a period must be a cron expression, not {describe(period)}")
        return None
    fields = period.split()
    if len(fields) != 5:
        problems.append(f"period {period!r} has {len(fields)} fields; cron needs 5 "
                        "(minute hour day month day-of-week)")  # fmt: skip
        return None
    if any(character.isdigit() for character in fields[4]):
        problems.append(f"period {period!r}: give days of the week by name (mon-fri), not by number")
        return None
    try:
        trigger = CronTrigger.from_crontab(period, timezone=_zone(zone))
    except ValueError as error:
        problems.append(f"period {period!r}: {error}")
        return None
    if trigger.get_next_fire_time(None, _REFERENCE) is None:
        problems.append(f"period {period!r} never matches any minute")
        return None
    return trigger


def _value(key: str, raw: Any, problems: list[str]) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        problems.append(f"{key} must be a number or text, not {describe(raw)}")
        return None
    if not isinstance(raw, str) and raw < 0:
        problems.append(f"{key} must not be negative")
        return None
    reader = {
        "MinIdlePods": _read_min_idle,
        "MaxJobsPerPod": _read_max_jobs,
        "IdleTimeout": _read_idle_timeout,
    }
    try:
        return reader[key](str(raw))
    except ValueError as error:
        problems.append(f"{key} {error}")
        return None


def _canonical(entries: Sequence[Entry]) -> str:
    document = []
    for entry in entries:
        item: dict[str, Any] = {"periods": list(entry.periods), "timezone": entry.timezone}
        if entry.min_idle_pods is not None:
            item["MinIdlePods"] = entry.min_idle_pods
        if entry.idle_timeout is not None:
            item["IdleTimeout"] = format_duration(entry.idle_timeout)
        if entry.max_jobs_per_pod is not None:
            item["MaxJobsPerPod"] = entry.max_jobs_per_pod
        document.append(item)
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def held_until(due: float, now: float, scheduled: bool) -> float:
    """Until when a decision made at `now` and next due with time alone at `due` holds: `due`, and under a
    ReuseSchedule not past the current minute, since a schedule is read (and tells its next change) per
    minute."""
    return min(due, now - now % _MINUTE + _MINUTE) if scheduled else due
