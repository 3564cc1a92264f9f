"""The pool's view of its pods: every read of all records sees every change, whoever made it."""

from __future__ import annotations

from elastic_agent.pool import labels
from elastic_agent.pool.records import PodState
from tests.support.pool_world import NAMESPACE, pod_manifest, pool_on_a_cluster


def test_records_follow_pods_changed_outside_the_pool_and_the_pools_own_changes() -> None:
    store, identity, pool = pool_on_a_cluster()

    store.create_pod(NAMESPACE, pod_manifest("agent-1", identity))
    first = pool.records()
    assert [(r.name, r.state) for r in first] == [("agent-1", PodState.IDLE)]
    first.clear()  # a caller's list is its own
    assert [r.name for r in pool.records()] == ["agent-1"]

    store.create_pod(NAMESPACE, pod_manifest("agent-2", identity, state="busy"))
    assert {r.name: r.state for r in pool.records()} == {"agent-1": PodState.IDLE, "agent-2": PodState.BUSY}

    pool.commit_mark("agent-1", {labels.ANN_STATE: PodState.BUSY.value}, {})  # in memory, not yet written
    assert {r.name: r.state for r in pool.records()}["agent-1"] is PodState.BUSY

    store.delete_pod(NAMESPACE, "agent-2", grace_seconds=0)  # as `kubectl delete --now` would
    assert [r.name for r in pool.records() if not r.deleting] == ["agent-1"]


def test_a_pod_gone_from_the_cluster_leaves_nothing_behind_in_the_pool() -> None:
    store, identity, pool = pool_on_a_cluster()
    for index in range(50):  # pods come, change and go, as they do all day
        name = f"agent-{index}"
        store.create_pod(NAMESPACE, pod_manifest(name, identity))
        pool.commit_mark(name, {labels.ANN_STATE: PodState.BUSY.value}, {})
        assert [r.name for r in pool.records()] == [name]
        store.delete_pod(NAMESPACE, name, grace_seconds=0)
        assert pool.records() == []
    # What the pool keeps per pod: nothing for pods that are gone.
    sizes = pool.sizes()
    assert sizes["records_cached"] == sizes["generations"] == sizes["first_seen"] == sizes["changed_at"] == 0
