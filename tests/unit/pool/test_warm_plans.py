"""The warm pool and the pods for waiting jobs at plan level (pool/warm.py): given a pool's pods, its
waiting jobs and its bank of registration keys, which pods the plan creates, with which keys, and what it
reports wanted but not started for want of a key."""

from __future__ import annotations

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import warm
from elastic_agent.pool.intents import Create, KeysShort, Plan, Reserve, Wait
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.key_lifetime import WARM_POOL
from elastic_agent.pool.state import PoolState
from tests.support.pool_world import START, pod_notes, pool_on_a_cluster, put_pod

NOW = START + 60.0
FINGERPRINT = "v1:warm"
GO = "https://ci.example.test/go"


def spec(min_idle_pods: int) -> JobSpec:
    return JobSpec(FINGERPRINT, {}, True, None, 600.0, min_idle_pods, None, GO)


def job(job_id: int) -> JobIdentifier:
    return JobIdentifier("app", "1", 1, "build", "1", f"compile-{job_id}", job_id)


def warm_recipe(state: PoolState, min_idle_pods: int, banked_keys: int) -> None:
    """The fingerprint's recipe, brought by a create-agent whose job another pod served, and keys banked."""
    state.book.wait(job(1), spec(min_idle_pods), "key-1", NOW)
    state.book.served(FINGERPRINT, 1)
    for n in range(banked_keys):
        state.keys.offer(f"banked-{n}", NOW)


def creations(plan: Plan) -> list[Create]:
    return [intent for intent in plan.intents if isinstance(intent, Create)]


def shortage(plan: Plan) -> KeysShort:
    [short] = [intent for intent in plan.intents if isinstance(intent, KeysShort)]
    return short


def test_a_warm_pool_below_min_idle_pods_with_banked_keys_gets_a_pod_per_missing_one() -> None:
    _, _, state = pool_on_a_cluster()
    warm_recipe(state, min_idle_pods=2, banked_keys=3)
    plan = warm.warm_pool(state, NOW)
    created = creations(plan)
    assert len(created) == 2
    assert all(c.job is None and c.key is None for c in created)  # the newest banked key, when created
    reserved = [i.token for i in plan.intents if isinstance(i, Reserve)]
    assert reserved == [c.token for c in created]  # each counted as supply before it exists
    assert shortage(plan) == KeysShort(WARM_POOL, {FINGERPRINT: 0})


def test_a_warm_pool_without_keys_starts_nothing_and_says_how_many_it_wanted() -> None:
    _, _, state = pool_on_a_cluster()
    warm_recipe(state, min_idle_pods=2, banked_keys=0)
    plan = warm.warm_pool(state, NOW)
    assert creations(plan) == []
    assert shortage(plan) == KeysShort(WARM_POOL, {FINGERPRINT: 2})


def test_a_warm_pool_with_fewer_keys_than_pods_wanted_starts_what_the_keys_allow() -> None:
    _, _, state = pool_on_a_cluster()
    warm_recipe(state, min_idle_pods=3, banked_keys=1)
    plan = warm.warm_pool(state, NOW)
    assert len(creations(plan)) == 1
    assert shortage(plan).pods == {FINGERPRINT: 2}


def test_idle_pods_of_the_fingerprint_count_towards_min_idle_pods() -> None:
    store, _, state = pool_on_a_cluster()
    warm_recipe(state, min_idle_pods=2, banked_keys=3)
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    assert len(creations(warm.warm_pool(state, NOW))) == 1


def test_a_superseded_fingerprint_gets_no_warm_pods() -> None:
    _, _, state = pool_on_a_cluster()
    warm_recipe(state, min_idle_pods=2, banked_keys=3)
    state.book.supersede(FINGERPRINT)
    plan = warm.warm_pool(state, NOW)
    assert creations(plan) == []
    assert shortage(plan).pods == {FINGERPRINT: 0}


def test_max_pods_caps_the_warm_pool_and_the_cap_is_not_counted_as_keys_short() -> None:
    _, _, state = pool_on_a_cluster(max_pods="1")
    warm_recipe(state, min_idle_pods=3, banked_keys=3)
    plan = warm.warm_pool(state, NOW)
    assert len(creations(plan)) == 1
    assert shortage(plan).pods == {FINGERPRINT: 0}


def test_waiting_jobs_get_pods_with_their_own_keys_newest_first() -> None:
    _, _, state = pool_on_a_cluster()
    state.commit_wait(Wait(job(7), spec(0), "key-7"), NOW - 30)
    state.commit_wait(Wait(job(8), spec(0), "key-8"), NOW - 10)
    created = creations(warm.for_waiting_jobs(state, NOW))
    assert [(c.job, c.key) for c in created] == [(job(8), "key-8"), (job(7), "key-7")]
    assert [c.token for c in created] == [("waiting", 8), ("waiting", 7)]


def test_waiting_jobs_already_covered_by_idle_pods_get_no_more() -> None:
    store, _, state = pool_on_a_cluster()
    state.commit_wait(Wait(job(7), spec(0), "key-7"), NOW - 30)
    state.commit_wait(Wait(job(8), spec(0), "key-8"), NOW - 10)
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    [created] = creations(warm.for_waiting_jobs(state, NOW))
    assert created.key == "key-8"  # two jobs wait, one idle pod is there: one more pod
