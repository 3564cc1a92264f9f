"""The pool's view of its pods: every read of all records sees every change, whoever made it."""

from __future__ import annotations

from elastic_agent.clock import ManualClock
from elastic_agent.pool import labels
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.records import PodState
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, SimulationKubeStore
from profiles.cluster import ClusterProfile

NAMESPACE = "ci"


def pod_manifest(name: str, identity: PodIdentity, state: str = "idle") -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "labels": identity.selector(),
            "annotations": {labels.ANN_STATE: state, labels.ANN_STATE_SINCE: "1700000000.000"},
        },
        "spec": {"containers": [{"name": "agent", "image": "gocd/agent"}]},
    }


def pool_on_a_cluster() -> tuple[SimulationKubeStore, PodIdentity, PoolState]:
    """A pool over an in-process cluster; pods are made and removed through the returned store."""
    clock = ManualClock(1_700_000_000.0)
    store = SimulationKubeStore(clock=clock)
    identity = PodIdentity(server_id="server", cluster="cluster")
    port = InProcessCluster(store, NAMESPACE, identity.selector())
    port.start()
    settings = ClusterProfile.from_properties({"go_server_url": "https://ci.example.test/go"})
    return store, identity, PoolState(port, identity, settings, clock, RegistrationKeys(clock))


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
