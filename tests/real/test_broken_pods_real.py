"""The broken pods' statuses on the real kube-apiserver: the node stand-in
(tests/support/doubles/apiserver_node.py) writes what the simulated kubelet says of a pod that cannot run
through `pods/binding` and `pods/status`, the real server accepts it, and the adapter, with only the project's
Role, reads it into the pod view the pool judges (kube/pod_status.py, pool/broken.py). A real node runs the
real kubelet instead; this keeps the stand-in's statuses of the same shape as the fake's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elastic_agent.clock import ScaledClock, SystemClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.port import PodView
from elastic_agent.pool.broken import diagnose
from elastic_agent.pool.records import PodRecord
from elastic_agent.simulation.agents import NoAgents
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.kubelet import PodFault, SimulatedKubelet
from tests.support import real_kube_fixtures
from tests.support.control_plane import ControlPlane
from tests.support.kube_fixtures import pod_manifest, wait_for
from tests.support.real_cluster import RealCluster

real_kube = real_kube_fixtures.real_kube  # fixtures
real_kube_binaries = real_kube_fixtures.real_kube_binaries

OURS = {"reuse.gocd.org/plugin-id": "plugin", "reuse.gocd.org/server-id": "server-1",
        "reuse.gocd.org/cluster": "c1"}  # fmt: skip
FAULTS = {
    "pulling": PodFault("image_pull"),
    "bad-name": PodFault("invalid_image"),
    "no-secret": PodFault("config_error"),
    "too-big": PodFault("unschedulable"),
    "looping": PodFault("crash_loop", after=0.5),
}


@pytest.fixture
def world(real_kube: ControlPlane) -> Iterator[tuple[KubeCluster, SimulatedKubelet]]:
    cluster = RealCluster(real_kube)
    # The kubelet's back-offs in scaled time: 10 s of them pass in half a second.
    kubelet = SimulatedKubelet(cluster.node, ScaledClock(20.0), NoAgents(), boot_delay=0.0,
                               faults=lambda pod: FAULTS.get(pod["metadata"]["name"]))  # fmt: skip
    kubelet.start()
    adapter = KubeCluster.connect(cluster.namespace, OURS, SystemClock(), url=cluster.url,
                                  token=cluster.token, ca_cert=real_kube.ca_pem, watch_timeout=5)  # fmt: skip
    adapter.start()
    assert adapter.wait_synced(30), adapter.sync_problem()
    try:
        yield adapter, kubelet
    finally:
        adapter.stop()
        kubelet.stop()
        cluster.stop()


def reason_of(adapter: KubeCluster, name: str) -> str | None:
    view = adapter.get(name)
    if view is None:
        return None
    if view.scheduled is not None and view.scheduled.reason:
        return view.scheduled.reason
    return next((c.waiting_reason for c in view.container_statuses if c.waiting_reason), None)


def judged_old(view: PodView) -> str | None:
    record = PodRecord.from_pod(view, first_seen=0.0)
    found = diagnose(view, record, now=3600.0)  # an hour old: past every grace
    return found.reason if found is not None else None


def test_the_real_server_takes_the_broken_statuses_and_the_adapter_reads_them(
    world: tuple[KubeCluster, SimulatedKubelet],
) -> None:
    adapter, _ = world
    for name in FAULTS:
        manifest: Obj = pod_manifest(name)
        adapter.create_pod(manifest)
    wanted = {"pulling": {"ErrImagePull", "ImagePullBackOff"}, "bad-name": {"InvalidImageName"},
              "no-secret": {"CreateContainerConfigError"}, "too-big": {"Unschedulable"},
              "looping": {"CrashLoopBackOff"}}  # fmt: skip
    assert wait_for(lambda: all(reason_of(adapter, n) in r for n, r in wanted.items()), timeout=60), {
        name: reason_of(adapter, name) for name in wanted
    }
    views = {name: adapter.get(name) for name in wanted}
    assert all(view is not None for view in views.values())
    assert {name: judged_old(view) for name, view in views.items() if view is not None} == {
        "pulling": reason_of(adapter, "pulling"), "bad-name": "InvalidImageName",
        "no-secret": "CreateContainerConfigError", "too-big": "Unschedulable", "looping": "CrashLoopBackOff",
    }  # fmt: skip
    too_big = views["too-big"]
    assert too_big is not None and too_big.node_name is None
    assert too_big.scheduled is not None and "Insufficient memory" in (too_big.scheduled.message or "")
    looping = views["looping"]
    assert looping is not None and looping.container_statuses[0].restart_count >= 1
    last = looping.container_statuses[0].last_terminated
    assert last is not None and (last.reason, last.exit_code) == ("Error", 1)
