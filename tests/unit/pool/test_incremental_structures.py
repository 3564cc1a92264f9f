"""The pool's incremental structures against their from-scratch computation, after any sequence of
changes Hypothesis chooses (pods made, changed by the pool and written back, changed behind its back,
failed, deleted; jobs waiting and served; reservations; pods deleted by us; holds; superseded marks;
time passing; keys banked and taken).

- each record as kept (state.py: derived again only when what it reads changed) equals the record
  derived from the pod as it is now;
- `PoolState.demand` (kept per revision of the state) equals the count made from the records;
- the warm pool's shortfall (shortfall.py: kept while the state and time allow) equals the one derived
  at that moment, and the warm pool's plan is the plan the decision made before it was kept;
- the bank of registration keys (keys.py: ordered, with a set beside it) hands out, counts and drops
  exactly what a plain list searched in full does.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_agent.clock import ManualClock
from elastic_agent.pool import shortfall, warm
from elastic_agent.pool.broken_pods import creatable
from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.intents import Create, Intent, KeysShort, Plan, Reserve
from elastic_agent.pool.key_lifetime import WARM_POOL, usable_keys
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.records import PodRecord
from elastic_agent.pool.state import PoolState
from tests.support.pool_changes import FINGERPRINTS, World, changes
from tests.support.pool_world import START

# -- the from-scratch computations ------------------------------------------------------------------


def records_from_scratch(state: PoolState) -> dict[str, PodRecord]:
    """Every record derived again from the pod as the port shows it, with the pool's unwritten changes."""
    derived = {}
    for pod in state.port.pods():
        if state.identity.owns(pod.labels):
            overlay = state._annotations.get(pod.name)
            derived[pod.name] = PodRecord.from_pod(pod, overlay, state._first_seen[pod.name])
    return derived


def demand_from_scratch(state: PoolState, fingerprint: str, view: RecordIndex) -> tuple[int, int]:
    creating = sum(1 for fp in state.in_flight(view) if fp == fingerprint)
    return state.book.waiting_count(fingerprint), len(state.ready(fingerprint, view)) + creating


def warm_pool_from_scratch(state: PoolState, now: float) -> Plan:
    """The warm pool's decision as it was made at every call before its shortfall was kept."""
    view = state.indexed()
    room, keys = state.room(view), usable_keys(state)
    intents: list[Intent] = []
    short: dict[str, int] = {}
    due = math.inf
    for fingerprint, recipe in state.book.recipes():
        wanted = recipe.knobs(now).min_idle_pods
        short[fingerprint] = 0
        if state.book.is_superseded(fingerprint):
            continue
        due = min(due, recipe.knobs_change(now))
        if not wanted:
            continue
        waiting, ready = demand_from_scratch(state, fingerprint, view)
        more = max(0, wanted - (ready - waiting))
        held = creatable(state, fingerprint, view, now)
        due = min(due, state.book.holds.next_try(fingerprint, now))
        allowed = min(more if held is None else min(more, held), room)
        short[fingerprint] = max(0, allowed - keys)
        for _ in range(max(0, min(allowed, keys))):
            token = object()
            intents += [Reserve(token, fingerprint), Create(token, None, recipe, None, "")]
            room, keys = room - 1, keys - 1
    return Plan((*intents, KeysShort(WARM_POOL, short)), due=due)


def shape(plan: Plan) -> tuple[object, ...]:
    """A plan with its reservation tokens (fresh objects at every call) left out."""
    parts: list[object] = []
    for intent in plan.intents:
        if isinstance(intent, Reserve):
            parts.append(("reserve", intent.fingerprint))
        elif isinstance(intent, Create):
            parts.append(("create", intent.spec.fingerprint))
        else:
            parts.append(intent)
    return (*parts, plan.due)


def check(world: World) -> None:
    state, now = world.state, world.clock.now()
    with state.lock:
        view = state.indexed()
        assert dict(view.by_name) == records_from_scratch(state)
        for fingerprint in FINGERPRINTS:
            assert state.demand(fingerprint, view) == demand_from_scratch(state, fingerprint, view)
        kept = state.shortfalls.at(state, view, now)
        fresh = shortfall.derive(state, view, now)
        assert (kept.fingerprints, kept.lacking, kept.due) == (fresh.fingerprints, fresh.lacking, fresh.due)
        before = state.keys.usable(state.key_lifetime.window_s(state.settings, now))
        assert shape(warm.warm_pool(state, now)) == shape(warm_pool_from_scratch(state, now))
        assert state.keys.usable(state.key_lifetime.window_s(state.settings, now)) == before


@settings(max_examples=300, deadline=None)
@given(st.lists(changes, min_size=10, max_size=60))
def test_records_demand_and_the_warm_pool_kept_incrementally_equal_their_from_scratch_values(
    steps: list[tuple[Any, ...]],
) -> None:
    world = World()
    check(world)
    for step in steps:
        world.apply(step)
        check(world)


def test_a_pods_write_back_of_the_pools_own_change_keeps_its_record() -> None:
    world = World()
    world.apply(("make", "agent-0", "v1:a", "idle", True))
    world.apply(("mark", "agent-0", "busy"))
    marked = world.state.record("agent-0")
    world.apply(("write back", "agent-0"))
    assert world.state.record("agent-0") is marked  # the same inputs: not derived again
    assert world.state.take_unwritten("agent-0") is None  # the pod shows the change: the overlay goes
    assert world.state.record("agent-0") is marked
    world.apply(("behind", "agent-0", "idle"))
    changed = world.state.record("agent-0")
    assert changed is not None and changed is not marked and changed.state.value == "idle"


def test_the_warm_pools_shortfall_is_derived_again_only_when_the_state_or_its_time_changes() -> None:
    world = World()
    world.apply(("wait", "v1:a", 1, 2, False))
    state, now = world.state, world.clock.now()
    with state.lock:
        first = state.shortfalls.at(state, state.indexed(), now)
        assert state.shortfalls.at(state, state.indexed(), now + 30.0) is first  # nothing changed
        world.apply(("make", "agent-0", "v1:a", "idle", True))
        again = state.shortfalls.at(state, state.indexed(), now + 30.0)
    assert again is not first and again.lacking != first.lacking


# -- the key bank ----------------------------------------------------------------------------------


class PlainBank:
    """The bank as a list searched in full at every offer (keys.py before its set)."""

    def __init__(self, clock: ManualClock, max_age_s: float, capacity: int) -> None:
        self.clock, self.max_age_s, self.capacity = clock, max_age_s, capacity
        self.keys: list[tuple[float, str]] = []

    def drop_old(self) -> None:
        limit = self.clock.now() - self.max_age_s
        self.keys = [(since, key) for since, key in self.keys if (since, key) >= (limit, "")]

    def offer(self, key: str, since: float) -> None:
        if any(existing == key for _, existing in self.keys):
            return
        bisect.insort(self.keys, (since, key))
        self.drop_old()
        del self.keys[: max(0, len(self.keys) - self.capacity)]

    def take(self, max_age_s: float) -> tuple[float, str] | None:
        self.drop_old()
        oldest = self.clock.now() - min(self.max_age_s, max_age_s)
        usable = [entry for entry in self.keys if entry >= (oldest, "")]
        if not usable:
            return None
        self.keys.remove(usable[0])
        return usable[0]

    def drop_issued_until(self, since: float) -> int:
        older = [entry for entry in self.keys if entry[0] <= since]
        self.keys = [entry for entry in self.keys if entry[0] > since]
        return len(older)


bank_steps = st.one_of(
    st.tuples(st.just("offer"), st.integers(0, 12), st.integers(0, 40)),  # a key (re-offered too), its age
    st.tuples(st.just("take"), st.sampled_from([60.0, 600.0, 1200.0, 1500.0])),
    st.tuples(st.just("drop"), st.integers(0, 40)),
    st.tuples(st.just("time"), st.sampled_from([1.0, 60.0, 600.0])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(bank_steps, max_size=60))
def test_the_ordered_bank_hands_out_counts_and_drops_what_a_full_search_would(
    steps: list[tuple[Any, ...]],
) -> None:
    clock = ManualClock(START)
    bank, plain = RegistrationKeys(clock, max_age_s=1500.0, capacity=8), PlainBank(clock, 1500.0, 8)
    for step in steps:
        if step[0] == "offer":
            since = clock.now() - step[2] * 60.0
            bank.offer(f"key-{step[1]}", since)
            plain.offer(f"key-{step[1]}", since)
        elif step[0] == "take":
            taken = bank.take(step[1])
            assert (None if taken is None else (taken.since, taken.key)) == plain.take(step[1])
        elif step[0] == "drop":
            since = clock.now() - step[1] * 60.0
            assert bank.drop_issued_until(since) == plain.drop_issued_until(since)
        else:
            clock.advance(step[1])
        plain.drop_old()
        assert len(bank) == len(plain.keys)
        assert bank.usable(600.0) == sum(1 for e in plain.keys if e >= (clock.now() - 600.0, ""))


def test_a_key_offered_again_is_banked_once_and_again_after_it_was_taken() -> None:
    clock = ManualClock(START)
    bank = RegistrationKeys(clock)
    bank.offer("key-1", START)
    bank.offer("key-1", START - 60.0)
    assert len(bank) == 1
    assert bank.take() is not None
    bank.offer("key-1", START)
    assert len(bank) == 1
