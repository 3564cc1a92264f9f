"""The in-process cluster's cache shows each pod as `pod_view` reads the stored pod, also where it takes
the unchanged spec and status of a pod from its previous view (the simulator's store shares them between
versions): after metadata patches, status writes, a binding and a deletion, in any order."""

from __future__ import annotations

from elastic_agent.clock import ManualClock
from elastic_agent.kube.pod_cache import pod_view
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, SimulationKubeStore

NS = "ci"
SELECTOR = {"app": "agents"}


def manifest(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": dict(SELECTOR), "annotations": {"state": "booting"}},
        "spec": {"containers": [{"name": "agent", "image": "gocd/agent:v1"}]},
    }


def running(restarts: int, reason: str | None = None) -> dict[str, object]:
    state = {"terminated": {"reason": reason, "exitCode": 137}} if reason else {"running": {}}
    return {
        "phase": "Running",
        "containerStatuses": [{"name": "agent", "restartCount": restarts, "state": state}],
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    }


def test_every_cached_view_is_what_the_stored_pod_reads_as() -> None:
    store = SimulationKubeStore(clock=ManualClock())
    cluster = InProcessCluster(store, NS, SELECTOR, rename=False)
    cluster.start()
    cluster.create_pod(manifest("a"))
    cluster.create_pod(manifest("b"))

    def same_as_stored() -> None:
        stored = {pod["metadata"]["name"]: pod for pod in store.list_pods(NS)[0]}
        for name in ("a", "b"):
            assert cluster.get(name) == (pod_view(stored[name]) if name in stored else None)

    steps = [
        lambda: cluster.patch_pod_metadata("a", annotations={"state": "idle"}),
        lambda: store.update_status(NS, "a", None, {"nodeName": "node-1", **running(0)}),
        lambda: cluster.patch_pod_metadata("a", annotations={"state": "busy", "job": "1"}),
        lambda: cluster.patch_pod_metadata("b", labels={"extra": "x"}),
        lambda: store.update_status(NS, "a", None, running(1, "OOMKilled")),
        lambda: cluster.patch_pod_metadata("a", annotations={"job": None}),
        lambda: store.bind_pod(NS, "b", "node-2"),
        lambda: cluster.patch_pod_metadata("b", annotations={"state": "idle"}),
        lambda: cluster.delete_pod("a"),
    ]
    for step in steps:
        step()
        same_as_stored()
    b_view = cluster.get("b")
    assert b_view is not None and b_view.node_name == "node-2" and b_view.annotations["state"] == "idle"
    assert cluster.get("a") is None
