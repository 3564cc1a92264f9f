"""A pool over an in-process cluster, and pods made on it as another writer would make them.

The tests of the pool's records, of its plans and of its credentials build the same small world: one
PoolState over an InProcessCluster, whose store the test changes behind the pool's back. A pod put there
with the pool's annotations is what the pool reads back after a restart, so a test can give a decision
any state of pods without going through the decisions that would have made it."""

from __future__ import annotations

from collections.abc import Mapping

from elastic_agent.clock import ManualClock
from elastic_agent.pool import labels
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, SimulationKubeStore
from profiles.cluster import ClusterProfile

NAMESPACE = "ci"
START = 1_700_000_000.0  # the pool's ManualClock starts here


def pod_manifest(name: str, identity: PodIdentity, state: str = "idle") -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "labels": identity.selector(),
            "annotations": {labels.ANN_STATE: state, labels.ANN_STATE_SINCE: "1700000000.000"},
        },
        "spec": {"containers": [{"name": "agent", "image": "gocd/agent"}]},
    }


def pool_on_a_cluster(**properties: str) -> tuple[SimulationKubeStore, PodIdentity, PoolState]:
    """A pool over an in-process cluster; pods are made and removed through the returned store.
    `properties`: the cluster profile's settings beyond its GoCD URL (max_pods="2", ...)."""
    clock = ManualClock(START)
    store = SimulationKubeStore(clock=clock)
    identity = PodIdentity(server_id="server", cluster="cluster")
    port = InProcessCluster(store, NAMESPACE, identity.selector())
    port.start()
    settings = ClusterProfile.from_properties({"go_server_url": "https://ci.example.test/go", **properties})
    return store, identity, PoolState(port, identity, settings, clock, RegistrationKeys(clock))


def put_pod(
    store: SimulationKubeStore, state: PoolState, name: str, annotations: Mapping[str, str]
) -> None:
    """A pod of the pool with these annotations (labels.ANN_*) beyond the default idle state, taken in by
    the pool's records as the watch would bring it."""
    manifest = pod_manifest(name, state.identity)
    manifest["metadata"]["annotations"].update(annotations)  # type: ignore[index]
    store.create_pod(NAMESPACE, manifest)
    state.records()


def pod_notes(
    state_name: str,
    since: float,
    fingerprint: str,
    *,
    reuse: bool = True,
    registered: bool = True,
    created_at: float | None = None,
) -> dict[str, str]:
    """The annotations the pool writes on a pod of `fingerprint` in `state_name` since `since`."""
    return {
        labels.ANN_STATE: state_name,
        labels.ANN_STATE_SINCE: f"{since:.3f}",
        labels.ANN_FINGERPRINT: fingerprint,
        labels.ANN_REUSE: "true" if reuse else "false",
        labels.ANN_REGISTERED: "true" if registered else "false",
        labels.ANN_CREATED_AT: f"{since if created_at is None else created_at:.3f}",
    }
