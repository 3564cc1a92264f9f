"""The real adapter (official client) against the fake API server over HTTP."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from elastic_agent.clock import SystemClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import ConnectError, connect, pem_from_profile
from elastic_agent.kube.port import ClusterError, Conflict, Forbidden, NotFound, PodView
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.fake_kube_store import FakeKubeStore
from tests.support import kube_fixtures
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.kube_fixtures import NS, pod_manifest, wait_for

fake_kube = kube_fixtures.fake_kube  # fixture

OURS = {"reuse.gocd.org/plugin-id": "plugin", "reuse.gocd.org/server-id": "server-1",
        "reuse.gocd.org/cluster": "c1"}  # fmt: skip
THEIRS = {**OURS, "reuse.gocd.org/server-id": "server-2"}
TOKEN = "very-secret-token"


def make_cluster(server: FakeKubeServer, **options: object) -> KubeCluster:
    settings: dict[str, object] = {"watch_timeout": 1, "request_timeout": 2.0, "backoff_initial": 0.05,
                                   "backoff_max": 0.2}  # fmt: skip
    settings.update(options)
    return KubeCluster.connect(NS, OURS, SystemClock(), url=server.url, token=server.api.token,
                               **settings)  # fmt: skip


@pytest.fixture
def cluster(fake_kube: FakeKubeServer) -> Iterator[KubeCluster]:
    fake_kube.store.create_pod(NS, pod_manifest("existing", OURS))
    fake_kube.store.create_pod(NS, pod_manifest("foreign", THEIRS))
    fake_kube.store.create_pod("other-namespace", pod_manifest("elsewhere", OURS))
    adapter = make_cluster(fake_kube)
    adapter.start()
    assert adapter.wait_synced(5)
    yield adapter
    adapter.stop()


def names(cluster: KubeCluster) -> list[str]:
    return [p.name for p in cluster.pods()]


def test_initial_sync_sees_only_our_pods(cluster: KubeCluster) -> None:
    assert names(cluster) == ["existing"]
    pod = cluster.get("existing")
    assert pod is not None and pod.phase == "Pending" and pod.namespace == NS
    assert pod.labels["reuse.gocd.org/server-id"] == "server-1" and pod.containers == ("agent",)
    assert pod.created_at > 0 and cluster.get("foreign") is None


def test_writes_are_read_back_at_once(cluster: KubeCluster) -> None:
    created = cluster.create_pod(pod_manifest("mine", {"extra": "x"}))
    assert created.labels["reuse.gocd.org/cluster"] == "c1"  # identity labels are always set
    assert cluster.get("mine") == created
    patched = cluster.patch_pod_metadata("mine", annotations={"reuse.gocd.org/state": "idle"},
                                         resource_version=created.resource_version)  # fmt: skip
    assert cluster.get("mine") == patched and patched.annotations["reuse.gocd.org/state"] == "idle"
    removed = cluster.patch_pod_metadata("mine", annotations={"reuse.gocd.org/state": None})
    assert "reuse.gocd.org/state" not in removed.annotations
    cluster.delete_pod("mine")
    assert cluster.get("mine") is None
    cluster.delete_pod("mine")  # already gone: not an error
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= 1)
    assert cluster.get("mine") is None  # the watch's older events did not bring it back


def test_compare_and_swap_conflict(cluster: KubeCluster) -> None:
    pod = cluster.get("existing")
    assert pod is not None
    cluster.patch_pod_metadata("existing", annotations={"a": "1"}, resource_version=pod.resource_version)
    with pytest.raises(Conflict) as err:
        cluster.patch_pod_metadata("existing", annotations={"a": "2"}, resource_version=pod.resource_version)
    assert err.value.status == 409
    with pytest.raises(NotFound):
        cluster.patch_pod_metadata("missing", annotations={"a": "1"})
    with pytest.raises(ValueError):
        cluster.create_pod(pod_manifest("bad", THEIRS))


def test_watch_keeps_the_cache_current(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    heard: list[tuple[str, str, str]] = []
    cluster.add_listener(lambda kind, pod: heard.append((kind, pod.name, pod.phase)))
    store = fake_kube.store
    store.create_pod(NS, pod_manifest("from-elsewhere", OURS))
    store.create_pod(NS, pod_manifest("not-ours", THEIRS))
    assert wait_for(lambda: cluster.get("from-elsewhere") is not None)
    pod = store.get_pod(NS, "existing")
    store.update_status(NS, "existing", pod["metadata"]["uid"], {"phase": "Running"})
    assert wait_for(lambda: (p := cluster.get("existing")) is not None and p.phase == "Running")
    store.patch_pod(NS, "existing", {"metadata": {"labels": {"reuse.gocd.org/server-id": "x"}}}, "merge")
    assert wait_for(lambda: cluster.get("existing") is None)  # relabelled away: not ours any more
    store.delete_pod(NS, "from-elsewhere")
    assert wait_for(lambda: names(cluster) == [])
    # (a deletion is seen as deleting first, then gone, as on a real server)
    assert heard == [
        ("ADDED", "from-elsewhere", "Pending"), ("MODIFIED", "existing", "Running"),
        ("DELETED", "existing", "Running"), ("MODIFIED", "from-elsewhere", "Pending"),
        ("DELETED", "from-elsewhere", "Pending"),
    ]  # fmt: skip


def test_relists_after_410_gone(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    store = fake_kube.store
    store.create_pod("other-namespace", pod_manifest("moves-the-version"))
    store.compact()  # the adapter's last version is now older than the history
    store.create_pod(NS, pod_manifest("after-compaction", OURS))
    fake_kube.api.cut_streams()
    assert wait_for(lambda: cluster.api_calls.get("list", 0) == 2)
    assert wait_for(lambda: cluster.get("after-compaction") is not None)


def test_recovers_after_injected_errors(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    faults_of(fake_kube).add(method="GET", path_pattern=r"/pods$", status=500, times=3)
    fake_kube.api.cut_streams()
    fake_kube.store.create_pod(NS, pod_manifest("during-errors", OURS))
    assert wait_for(lambda: cluster.get("during-errors") is not None)
    assert cluster.sync_problem() is None
    faults_of(fake_kube).add(method="POST", status=503, times=1)
    with pytest.raises(ClusterError) as err:
        cluster.create_pod(pod_manifest("x"))
    assert err.value.status == 503 and fake_kube.url in str(err.value)


def test_recovers_after_the_server_was_unreachable(fake_kube: FakeKubeServer) -> None:
    fake_kube.api.token = TOKEN
    cluster = make_cluster(fake_kube)
    cluster.start()
    try:
        assert cluster.wait_synced(5)
        fake_kube.set_unreachable(True)
        assert wait_for(lambda: cluster.sync_problem() is not None)
        message = str(cluster.sync_problem())
        assert fake_kube.url in message and TOKEN not in message
        # Each request thread raises an exception of its own: one shared object's traceback would grow
        # with every raise, and threads would see each other's frames.
        first, second = cluster.sync_problem(), cluster.sync_problem()
        assert first is not second and str(first) == str(second) and type(first) is type(second)
        for problem in (first, second):
            with pytest.raises(ClusterError) as raised:
                raise problem  # type: ignore[misc]
            assert raised.value.__traceback__ is not None and raised.value.__traceback__.tb_next is None
        with pytest.raises(ClusterError) as err:
            cluster.create_pod(pod_manifest("while-down"))
        assert err.value.status is None and TOKEN not in str(err.value)
        fake_kube.store.create_pod(NS, pod_manifest("while-down", OURS))
        fake_kube.set_unreachable(False)
        assert wait_for(lambda: cluster.get("while-down") is not None)
        assert wait_for(lambda: cluster.sync_problem() is None)
    finally:
        cluster.stop()


def test_forbidden_and_timeouts(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    fake_kube.api.forbidden = True
    with pytest.raises(Forbidden):
        cluster.create_pod(pod_manifest("nope"))
    fake_kube.api.forbidden = False
    faults_of(fake_kube).add(method="DELETE", status=None, delay=0.5, times=1)
    cluster.request_timeout = 0.1
    with pytest.raises(ClusterError) as err:
        cluster.delete_pod("existing")
    assert err.value.status is None


def test_idle_cluster_costs_only_watch_calls(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= 1)
    before = dict(cluster.api_calls)
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= before["watch"] + 1, timeout=3)
    for _ in range(100):
        cluster.pods()
        cluster.get("existing")
    after = dict(cluster.api_calls)
    assert {k: v for k, v in after.items() if k != "watch"} == {"list": 1}
    assert after["watch"] <= before["watch"] + 2
    server_lists = [r for r in fake_kube.api.requests if r.method == "GET" and not r.is_watch
                    and r.path.endswith("/pods")]  # fmt: skip
    assert len(server_lists) == 1


def test_events_and_logs(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    fake_kube.store.add_event(NS, "existing", "Scheduled", "assigned to fake-node-1")
    fake_kube.store.bind_pod(NS, "existing", "fake-node-1")  # an unbound pod has no node to ask for logs
    fake_kube.store.update_status(NS, "existing", None, {"containerStatuses": [  # and a container not
        {"name": "agent", "ready": True, "restartCount": 0, "state": {"running": {}}}]})  # run, no log
    fake_kube.store.append_log(NS, "existing", "hello")
    events = cluster.pod_events("existing")
    assert [(e["reason"], e["count"]) for e in events] == [("Scheduled", 1)] and events[0]["last_seen"] > 0
    assert cluster.pod_log("existing", tail_lines=10) == "hello\n"


def test_listener_failures_do_not_stop_the_cache(cluster: KubeCluster) -> None:
    def broken(kind: str, pod: PodView) -> None:
        raise RuntimeError("listener bug")

    cluster.add_listener(broken)
    cluster.create_pod(pod_manifest("still-cached"))
    assert cluster.get("still-cached") is not None


def test_connect_settings() -> None:
    api_client = connect(url="https://kube.example:6443/", token=TOKEN)
    assert api_client.configuration.host == "https://kube.example:6443"
    assert api_client.configuration.verify_ssl
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    import base64

    assert pem_from_profile(base64.b64encode(pem.encode()).decode()) == pem + "\n"
    with_ca = connect(url="https://kube.example", ca_cert=pem)
    assert with_ca.configuration.ssl_ca_cert is None, "no file: the CA is handed to urllib3 as text"
    pool_keywords = with_ca.rest_client.pool_manager.connection_pool_kw
    assert pool_keywords["ca_cert_data"] == pem + "\n" and pool_keywords["ca_certs"] is None
    with pytest.raises(ConnectError):
        pem_from_profile("not a certificate")


def test_graceful_deletion_is_seen_as_deleting(fake_kube: FakeKubeServer) -> None:
    fake_kube.store.default_grace_seconds = 0.3
    cluster = make_cluster(fake_kube)
    cluster.start()
    try:
        assert cluster.wait_synced(5)
        cluster.create_pod(pod_manifest("slow"))
        fake_kube.store.bind_pod(NS, "slow", "fake-node-1")  # an unbound pod would be deleted at once
        cluster.delete_pod("slow")
        pod = cluster.get("slow")
        assert pod is not None and pod.deleting
        assert wait_for(lambda: cluster.get("slow") is None)
    finally:
        cluster.stop()


def test_a_tiny_history_still_converges(fake_kube: FakeKubeServer) -> None:
    # A store with a history so short that a resumed watch always needs a relist still converges.
    fake_kube.store = fake_kube.api.store = FakeKubeStore(history_limit=1)
    cluster = make_cluster(fake_kube)
    cluster.start()
    try:
        assert cluster.wait_synced(5)
        for i in range(5):
            fake_kube.store.create_pod(NS, pod_manifest(f"p{i}", OURS))
        assert wait_for(lambda: len(cluster.pods()) == 5)
    finally:
        cluster.stop()


def test_with_the_simulated_kubelet(fake_kube: FakeKubeServer, cluster: KubeCluster) -> None:
    from elastic_agent.simulation.agents import NoAgents
    from elastic_agent.simulation.kubelet import SimulatedKubelet

    kubelet = SimulatedKubelet(fake_kube.store, fake_kube.store.clock, NoAgents(), boot_delay=0.05)
    kubelet.start()
    try:
        cluster.create_pod(pod_manifest("booting"))
        assert wait_for(lambda: (p := cluster.get("booting")) is not None and p.phase == "Running")
        pod = cluster.get("booting")
        assert pod is not None and pod.node_name is not None
        assert "Started" in [e["reason"] for e in cluster.pod_events("booting")]
        kubelet.evict("booting")
        assert wait_for(lambda: (p := cluster.get("booting")) is not None and p.reason == "Evicted")
    finally:
        kubelet.stop()


def test_stop_does_not_wait_for_a_list_that_the_api_server_never_answers() -> None:
    """A SIGTERM must not be held up to the list's request timeout by an API server that accepted the
    connection and says nothing: stop() returns while the list is still on its way, and the answer,
    should one come, is dropped. (Were stop() to join the thread as it does a watch it has cut short, it
    would return only once the list's request timeout, shorter than the join's, had ended the thread.)"""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
    adapter = KubeCluster.connect(NS, OURS, SystemClock(), url=f"http://127.0.0.1:{silent.getsockname()[1]}",
                                  token=TOKEN, request_timeout=4.0)  # fmt: skip
    try:
        adapter.start()
        wait_for(lambda: accepted, 10)
        adapter.stop()
        thread = adapter._thread
        assert thread is not None and thread.is_alive(), "stop() waited for the list's answer"
        assert not adapter.wait_synced(0)
    finally:
        for connection in accepted:
            connection.close()  # the list fails now, and the thread ends instead of retrying
        silent.close()
    thread.join(10)
    assert not thread.is_alive() and not adapter.wait_synced(0)


def test_the_view_carries_what_the_kubelet_and_the_scheduler_say(fake_kube: FakeKubeServer,
                                                                 cluster: KubeCluster) -> None:  # fmt: skip
    """Through the API and the official client: each container's waiting reason and message, its
    termination and restart count, and the PodScheduled condition (kube/pod_status.py)."""
    from elastic_agent.kube.pod_status import Condition, Termination
    from elastic_agent.simulation.agents import NoAgents
    from elastic_agent.simulation.kubelet import PodFault, SimulatedKubelet

    faults = {"pulling": PodFault("image_pull"), "too-big": PodFault("unschedulable")}
    kubelet = SimulatedKubelet(fake_kube.store, fake_kube.store.clock, NoAgents(), boot_delay=0.05,
                               faults=lambda pod: faults.get(pod["metadata"]["name"]))  # fmt: skip
    kubelet.start()
    try:
        for name in ("pulling", "too-big", "oom"):
            cluster.create_pod(pod_manifest(name))
        assert wait_for(lambda: (p := cluster.get("pulling")) is not None and p.container_statuses != ())
        pulling = cluster.get("pulling")
        assert pulling is not None
        [agent] = pulling.container_statuses
        assert (agent.name, agent.waiting_reason, agent.restart_count) == ("agent", "ErrImagePull", 0)
        assert agent.waiting_message is not None and "not found" in agent.waiting_message
        assert pulling.scheduled == Condition("True")
        assert wait_for(lambda: (p := cluster.get("too-big")) is not None and p.scheduled is not None)
        too_big = cluster.get("too-big")
        assert too_big is not None and too_big.node_name is None
        assert too_big.scheduled is not None and too_big.scheduled.reason == "Unschedulable"
        assert wait_for(lambda: (p := cluster.get("oom")) is not None and p.phase == "Running")
        kubelet.oom_kill("oom")
        restarted = lambda: (p := cluster.get("oom")) is not None and p.container_statuses[0].restart_count  # noqa: E731
        assert wait_for(restarted)
        oom = cluster.get("oom")
        assert oom is not None and oom.container_statuses[0].last_terminated == Termination("OOMKilled", 137)
    finally:
        kubelet.stop()
