"""The warm pool's shortfall: for each fingerprint with MinIdlePods in force, how many idle or booting
pods it lacks beyond its waiting jobs, and when that may next change with time alone.

The warm pool is asked at every create-agent and every ping, and nearly always lacks nothing. What it
lacks depends only on the pool's state (the records, the book, the reservations: `PoolState.revision`)
and on the ReuseSchedule periods and holds in force, which change with time only at the plan's `due`.
So a shortfall derived once holds for every later decision at the same revision, until that time; then,
and at every change of the state, it is derived again (`derive`, which is what the warm pool computed at
every call before). What the warm pool then does about it (the caps' room, the keys the bank may give,
a held fingerprint's one try) is decided at each call, for the fingerprints that lack pods only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.job_spec import JobSpec
from profiles.schedule import held_until

if TYPE_CHECKING:
    from elastic_agent.pool.state import PoolState


@dataclass(frozen=True)
class Shortfall:
    """What the warm pool lacks, derived at `revision` of the state and at time `since`, holding for
    every time from `since` until `until` (excluded)."""

    fingerprints: tuple[str, ...]  # every recipe's, in the book's order (the decision reports each)
    lacking: tuple[tuple[str, JobSpec, int], ...]  # (fingerprint, its recipe, pods lacking), same order
    due: float  # when the decision is next due with time alone (Plan.due)
    revision: tuple[int, int, int]
    since: float
    until: float


def derive(state: PoolState, view: RecordIndex, now: float) -> Shortfall:
    """The shortfall at `now`, from scratch: MinIdlePods in force less the idle and booting pods beyond the
    waiting jobs, for each fingerprint that is not superseded."""
    fingerprints: list[str] = []
    lacking: list[tuple[str, JobSpec, int]] = []
    due = math.inf
    scheduled = False
    for fingerprint, spec in state.book.recipes():
        fingerprints.append(fingerprint)
        if state.book.is_superseded(fingerprint):
            continue
        wanted = spec.knobs(now).min_idle_pods
        due = min(due, spec.knobs_change(now))
        scheduled = scheduled or spec.schedule is not None
        if not wanted:
            continue
        waiting, ready = state.demand(fingerprint, view)
        due = min(due, state.book.holds.next_try(fingerprint, now))
        more = max(0, wanted - (ready - waiting))
        if more:
            lacking.append((fingerprint, spec, more))
    until = held_until(due, now, scheduled)
    return Shortfall(tuple(fingerprints), tuple(lacking), due, state.revision(), now, until)


class ShortfallCache:
    """The latest shortfall of one pool, kept while it holds. The pool's lock guards it."""

    def __init__(self) -> None:
        self._last: Shortfall | None = None

    def at(self, state: PoolState, view: RecordIndex, now: float) -> Shortfall:
        """The shortfall at `now` of `state`, whose records `view` shows (`state.indexed()`)."""
        last = self._last
        if last is not None and last.revision == state.revision() and last.since <= now < last.until:
            return last
        last = self._last = derive(state, view, now)
        return last
