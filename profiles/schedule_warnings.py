"""Warnings about a ReuseSchedule that is valid but probably not what its author meant.

Two kinds, both about an entry and the entries before it that it overrides where their periods overlap
(the last matching entry wins, and a value it does not set is the profile's plain one, not the value of
the entry it overrides):
- an entry that changes nothing: wherever it is in force, the values it puts in force (its own, and the
  plain ones for the keys it leaves out) are those that would hold without it;
- an entry that leaves out a key which an entry it overlaps sets to something else than the plain value:
  where it wins, the plain value comes back (docs/profiles.md's Monday-morning entry once set MinIdlePods
  only, so office hours' IdleTimeout of 30m fell back to the plain 2m on Monday mornings).

They are warnings, not validation errors: GoCD's validate-elastic-agent-profile answer has errors only,
and an error blocks the save, while either entry may be meant (a placeholder period, or a period that
really wants the plain values back). The backend sends them as server-health warnings while a profile
in use has them, and the status page shows them beside the schedule.

Whether two periods overlap is decided from the cron fields APScheduler parsed (its CronTrigger fields
and their expressions, apscheduler/triggers/cron/expressions.py: AllExpression with a step,
RangeExpression with first, last and step): a period matches the minutes whose month, day, weekday, hour
and minute each lie in their field's set, so two periods in one time zone overlap when every field's
sets meet, and one lies within another when every field's set lies within the other's. Expressions
whose sets are not plain ranges (`last`, `2nd mon`) and periods in different time zones are not
compared: for "changes nothing" they are taken to overlap and never to contain (so it is said only when
sure), for "leaves out a key" they are taken not to overlap (the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.cron.expressions import AllExpression, RangeExpression
from apscheduler.triggers.cron.fields import MAX_VALUES, MIN_VALUES

from profiles.quantities import format_duration
from profiles.schedule import Entry, Knobs, Schedule

FIELDS = ("month", "day", "day_of_week", "hour", "minute")
_Sets = dict[str, frozenset[int] | None]  # None: not a plain set of values (compared as "unknown")


def schedule_warnings(schedule: Schedule, plain: Knobs) -> tuple[str, ...]:
    """One sentence per doubtful entry, in entry order (none for a schedule that is as meant)."""
    return _warnings(schedule, plain)


@lru_cache(maxsize=256)  # asked at every server-ping for every scheduled profile in use
def _warnings(schedule: Schedule, plain: Knobs) -> tuple[str, ...]:
    found: list[str] = []
    for index, entry in enumerate(schedule.entries):
        earlier = schedule.entries[:index]
        if _changes_nothing(entry, earlier, plain):
            found.append(
                f"{entry.describe()} changes nothing: while it is in force the values are those that "
                f"hold without it ({_values(entry.over(plain))})"
            )
            continue
        found += _left_out(entry, earlier, plain)
    return tuple(found)


def _changes_nothing(entry: Entry, earlier: Sequence[Entry], plain: Knobs) -> bool:
    mine = entry.over(plain)
    for trigger in entry.triggers:
        overridden = [e for e in earlier if any(_may_meet(trigger, entry, t, e) for t in e.triggers)]
        covered = any(_within(trigger, entry, t, e) for e in earlier for t in e.triggers)
        if not covered and mine != plain:
            return False
        if any(e.over(plain) != mine for e in overridden):
            return False
    return True


def _left_out(entry: Entry, earlier: Sequence[Entry], plain: Knobs) -> list[str]:
    problems = []
    for key, attribute in (
        ("MinIdlePods", "min_idle_pods"),
        ("IdleTimeout", "idle_timeout"),
        ("MaxJobsPerPod", "max_jobs_per_pod"),
    ):
        if getattr(entry, attribute) is not None:
            continue
        for other in reversed(earlier):  # the nearest one it overrides
            value = getattr(other, attribute)
            if value is None or value == getattr(plain, attribute) or not _meet(entry, other):
                continue
            problems.append(
                f"{entry.describe()} sets no {key}: where it overrides entry {other.number}, the plain "
                f"{_value(attribute, getattr(plain, attribute))} holds, not entry {other.number}'s "
                f"{_value(attribute, value)}"
            )
            break
    return problems


def _meet(entry: Entry, other: Entry) -> bool:
    """Some period of each surely shares a minute."""
    return any(
        entry.timezone == other.timezone and _fields_meet(_sets(a), _sets(b), unknown=False)
        for a in entry.triggers
        for b in other.triggers
    )


def _may_meet(trigger: CronTrigger, entry: Entry, other_trigger: CronTrigger, other: Entry) -> bool:
    if entry.timezone != other.timezone:
        return True
    return _fields_meet(_sets(trigger), _sets(other_trigger), unknown=True)


def _fields_meet(a: _Sets, b: _Sets, *, unknown: bool) -> bool:
    for name in FIELDS:
        first, second = a[name], b[name]
        if first is None or second is None:
            if not unknown:
                return False
            continue
        if not first & second:
            return False
    return True


def _within(trigger: CronTrigger, entry: Entry, other_trigger: CronTrigger, other: Entry) -> bool:
    """Every minute `trigger` matches, `other_trigger` matches too (when that is sure)."""
    if entry.timezone != other.timezone:
        return False
    inner, outer = _sets(trigger), _sets(other_trigger)
    for name in FIELDS:
        small, large = inner[name], outer[name]
        if small is None or large is None or not small <= large:
            return False
    return True


def _sets(trigger: CronTrigger) -> _Sets:
    return {field.name: _values_of(field.name, field.expressions) for field in trigger.fields
            if field.name in FIELDS}  # fmt: skip


def _values_of(name: str, expressions: Sequence[AllExpression]) -> frozenset[int] | None:
    low, high = MIN_VALUES[name], MAX_VALUES[name]
    values: set[int] = set()
    for expression in expressions:
        if isinstance(expression, RangeExpression):
            last = expression.last if expression.last is not None else high
            values.update(range(expression.first, last + 1, expression.step or 1))
        elif type(expression) is AllExpression:  # exactly: the position and last-day ones derive from it
            values.update(range(low, high + 1, expression.step or 1))
        else:
            return None
    return frozenset(values)


def _values(knobs: Knobs) -> str:
    limit = str(knobs.max_jobs_per_pod) if knobs.max_jobs_per_pod else "no limit"
    return (
        f"MinIdlePods {knobs.min_idle_pods}, IdleTimeout {format_duration(knobs.idle_timeout)}, "
        f"MaxJobsPerPod {limit}"
    )


def _value(attribute: str, value: object) -> str:
    if value is None:
        return "no limit"
    if attribute == "idle_timeout" and isinstance(value, float | int):
        return format_duration(float(value))
    return str(value)
