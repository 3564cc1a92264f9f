"""New credentials are taken over without losing pod state: the new connection lists the pods in the
background while the pool goes on with the one it has, and what is kept for a pod (its changes not yet
written above all) goes only once a cache has seen the pod deleted, never because the new connection
has not listed it yet. In process, on the injected clock."""

from __future__ import annotations

from elastic_agent.clock import ManualClock
from elastic_agent.gocd.narrator import Narrator
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.records import PodState
from elastic_agent.simulation.inprocess import DeferredWork, DeferredWriters, SyncNarrator
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, SimulationKubeStore
from profiles.cluster import ClusterProfile
from tests.support.pool_world import NAMESPACE, pod_manifest

IDENTITY = PodIdentity(server_id="server", cluster="cluster")


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(1_700_000_000.0)
        self.store = SimulationKubeStore(clock=self.clock)
        self.writers, self.work = DeferredWriters(), DeferredWork()
        narrator: Narrator = SyncNarrator()
        settings = ClusterProfile.from_properties({"go_server_url": "https://ci.example.test/go"})
        self.old = self.port()
        keys = RegistrationKeys(self.clock)
        self.pool = ClusterPool(
            self.old, IDENTITY, settings, self.clock, narrator, keys, self.writers, self.work
        )
        self.pool.start()
        self.settle()

    def port(self) -> InProcessCluster:
        return InProcessCluster(self.store, NAMESPACE, IDENTITY.selector(), rename=False, clock=self.clock)

    def settle(self) -> None:
        while self.work.drain() or self.writers.drain():
            pass

    def state_on_the_pod(self, name: str) -> str | None:
        annotations = self.store.get_pod(NAMESPACE, name)["metadata"].get("annotations") or {}
        return annotations.get(labels.ANN_STATE)


def test_a_change_not_yet_written_survives_new_credentials_whose_first_list_is_late() -> None:
    world = World()
    world.store.create_pod(NAMESPACE, pod_manifest("agent-1", IDENTITY))
    world.old.unreachable = True  # the old token was revoked: writes through it fail
    with world.pool.state.lock:
        world.pool.state.commit_mark("agent-1", {labels.ANN_STATE: PodState.BUSY.value}, {})
    world.pool.applier.writer.enqueue("agent-1")
    world.settle()
    assert world.state_on_the_pod("agent-1") == "idle", "not written: the cluster refused"

    new = world.port()
    new.unreachable = True  # its first list does not come yet
    world.pool.replace_port(new)
    world.settle()
    record = world.pool.record("agent-1")
    assert record is not None and record.state is PodState.BUSY, "the pool goes on with the port it has"

    new.unreachable = False  # the list arrives: the pool takes the new port over and writes
    world.settle()
    assert world.pool.port is new
    assert world.state_on_the_pod("agent-1") == "busy"
