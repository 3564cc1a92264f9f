"""The fake Kubernetes API server, driven through the official client over HTTP."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, watch

from elastic_agent.clock import ManualClock
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.fake_kube_store import FakeKubeStore, StoreError, parse_label_selector
from tests.support import kube_fixtures
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.kube_fixtures import NS, core_api_for, pod_manifest, wait_for

fake_kube = kube_fixtures.fake_kube  # fixtures
core_api = kube_fixtures.core_api

MERGE = "application/merge-patch+json"


def status_of(err: client.ApiException) -> dict[str, Any]:
    body = json.loads(err.body)
    assert body["kind"] == "Status"
    return body


def names(pods: Any) -> list[str]:
    return sorted(p.metadata.name for p in pods.items)


def test_create_get_list_and_already_exists(core_api: client.CoreV1Api) -> None:
    created = core_api.create_namespaced_pod(NS, pod_manifest("p1", {"app": "a"}))
    assert created.status.phase == "Pending"
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    fetched = core_api.read_namespaced_pod("p1", NS)
    assert fetched.metadata.resource_version == created.metadata.resource_version
    listed = core_api.list_namespaced_pod(NS)
    assert names(listed) == ["p1"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    with pytest.raises(client.ApiException) as err:
        core_api.create_namespaced_pod(NS, pod_manifest("p1"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"
    with pytest.raises(client.ApiException) as missing:
        core_api.read_namespaced_pod("nope", NS)
    assert missing.value.status == 404 and status_of(missing.value)["reason"] == "NotFound"


def test_generate_name_and_resource_versions_increase(core_api: client.CoreV1Api) -> None:
    body = pod_manifest("")
    body["metadata"] = {"generateName": "gocd-agent-"}
    first = core_api.create_namespaced_pod(NS, body)
    second = core_api.create_namespaced_pod(NS, body)
    assert first.metadata.name.startswith("gocd-agent-") and first.metadata.name != second.metadata.name
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)


def test_label_selectors(core_api: client.CoreV1Api) -> None:
    core_api.create_namespaced_pod(NS, pod_manifest("a", {"tier": "web", "env": "prod"}))
    core_api.create_namespaced_pod(NS, pod_manifest("b", {"tier": "db", "env": "dev"}))
    core_api.create_namespaced_pod(NS, pod_manifest("c", {"tier": "cache"}))
    core_api.create_namespaced_pod("elsewhere", pod_manifest("d", {"tier": "web"}))

    def select(selector: str, field: str | None = None) -> list[str]:
        return names(core_api.list_namespaced_pod(NS, label_selector=selector, field_selector=field))

    assert select("tier=web") == ["a"]
    assert select("tier==db") == ["b"]
    assert select("tier!=web") == ["b", "c"]
    assert select("tier in (web, db)") == ["a", "b"]
    assert select("tier notin (web),env") == ["b"]
    assert select("env") == ["a", "b"]
    assert select("!env") == ["c"]
    assert select("tier in (web,db),env=dev") == ["b"]
    assert select("", "metadata.name=c") == ["c"]
    assert sorted(p.metadata.name for p in core_api.list_pod_for_all_namespaces().items) == list("abcd")
    with pytest.raises(client.ApiException) as err:
        select("tier in web")
    assert err.value.status == 400


def test_selector_parser_rejects_garbage() -> None:
    with pytest.raises(StoreError):
        parse_label_selector("a b c")
    assert [r.op for r in parse_label_selector("a=1, b!=2, c in (x), d notin (y), e, !f")] == [
        "=", "!=", "in", "notin", "exists", "!exists",
    ]  # fmt: skip


def test_merge_patch_with_resource_version_is_compare_and_swap(core_api: client.CoreV1Api) -> None:
    pod = core_api.create_namespaced_pod(NS, pod_manifest("p", {"app": "a"}))
    rv = pod.metadata.resource_version
    body = {"metadata": {"annotations": {"state": "busy"}, "resourceVersion": rv}}
    patched = core_api.patch_namespaced_pod("p", NS, body, _content_type=MERGE)
    assert patched.metadata.annotations == {"state": "busy"}
    assert int(patched.metadata.resource_version) > int(rv)
    stale = {"metadata": {"annotations": {"state": "idle"}, "resourceVersion": rv}}
    with pytest.raises(client.ApiException) as err:
        core_api.patch_namespaced_pod("p", NS, stale, _content_type=MERGE)
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    assert core_api.read_namespaced_pod("p", NS).metadata.annotations == {"state": "busy"}
    # null removes a key; without a resourceVersion the patch is unconditional
    removed = core_api.patch_namespaced_pod("p", NS, {"metadata": {"annotations": {"state": None}}},
                                            _content_type=MERGE)  # fmt: skip
    assert not removed.metadata.annotations
    # the client's default for a dict body (strategic merge) works the same on metadata
    strategic = core_api.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"x": "1"}}})
    assert strategic.metadata.labels == {"app": "a", "x": "1"}
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]
    assert core_api.patch_namespaced_pod("p", NS, ops).metadata.annotations == {"k": "v"}
    with pytest.raises(client.ApiException) as spec_err:
        core_api.patch_namespaced_pod("p", NS, {"spec": {"nodeName": "x"}}, _content_type=MERGE)
    assert spec_err.value.status == 422


def collect(api: client.CoreV1Api, **kwargs: Any) -> list[tuple[str, str, str]]:
    events = []
    stream = api.list_namespaced_pod(NS, watch=True, _preload_content=False, **kwargs)
    for line in watch.watch.iter_resp_lines(stream):
        if line:
            event = json.loads(line)
            meta = event["object"].get("metadata", {})
            events.append((event["type"], meta.get("name", ""), event["object"].get("code", "")))
    return events


def test_watch_replays_from_resource_version_and_ends_at_timeout(core_api: client.CoreV1Api) -> None:
    # resourceVersion "0" would mean "any": start from a real version
    start = core_api.create_namespaced_pod(NS, pod_manifest("first")).metadata.resource_version
    core_api.create_namespaced_pod(NS, pod_manifest("w1", {"app": "a"}))
    middle = core_api.create_namespaced_pod(NS, pod_manifest("w2", {"app": "a"})).metadata.resource_version
    core_api.patch_namespaced_pod("w1", NS, {"metadata": {"annotations": {"k": "v"}}}, _content_type=MERGE)
    core_api.create_namespaced_pod(NS, pod_manifest("other", {"app": "b"}))
    core_api.delete_namespaced_pod("w2", NS)
    everything = collect(core_api, resource_version=start, timeout_seconds=1, label_selector="app=a")
    # (real servers take whole seconds; the fake also takes fractions, to keep the tests fast)
    # A deletion is written first (deletionTimestamp, MODIFIED), then the pod removed, as on a real server.
    assert [e[:2] for e in everything] == [
        ("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"), ("MODIFIED", "w2"), ("DELETED", "w2"),
    ]  # fmt: skip
    resumed = collect(core_api, resource_version=middle, timeout_seconds=0.2, label_selector="app=a")
    assert [e[:2] for e in resumed] == [("MODIFIED", "w1"), ("MODIFIED", "w2"), ("DELETED", "w2")]
    # no resourceVersion: the current state first, as synthetic ADDED events; bookmarks when asked
    current = collect(core_api, timeout_seconds=0.2, allow_watch_bookmarks=True)
    assert [e[:2] for e in current] == [("ADDED", "first"), ("ADDED", "other"), ("ADDED", "w1"),
                                        ("BOOKMARK", "")]  # fmt: skip


def test_watch_sees_relabelling_out_of_the_selector_as_deleted(core_api: client.CoreV1Api) -> None:
    rv = core_api.create_namespaced_pod(NS, pod_manifest("r", {"app": "a"})).metadata.resource_version
    core_api.patch_namespaced_pod("r", NS, {"metadata": {"labels": {"app": "b"}}}, _content_type=MERGE)
    assert [e[:2] for e in collect(core_api, resource_version=rv, timeout_seconds=0.2,
                                   label_selector="app=a")] == [("DELETED", "r")]  # fmt: skip


def test_a_watch_whose_client_went_away_ends_without_waiting_for_a_change(fake_kube: FakeKubeServer) -> None:
    """As kube-apiserver does: the watch's request thread ends once the client has closed the
    connection, not at the watch's timeout nor at the next event it would write."""
    # The threads themselves, not their count: a thread an earlier test left ending must not pass for it.
    before = set(threading.enumerate())
    address = urlsplit(fake_kube.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=5)
    connection.request("GET", f"/api/v1/namespaces/{NS}/pods?watch=true&timeoutSeconds=600")
    answer = connection.getresponse()  # the headers come at once; then nothing, as nothing changes
    assert answer.status == 200
    started = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert len(started) == 1, started  # the request thread holding the watch
    [watching] = started
    answer.close()
    connection.close()
    assert wait_for(lambda: not watching.is_alive()), "the watch still holds its thread"


def test_watch_from_a_compacted_version_answers_410(fake_kube: FakeKubeServer,
                                                     core_api: client.CoreV1Api) -> None:  # fmt: skip
    rv = core_api.create_namespaced_pod(NS, pod_manifest("old")).metadata.resource_version
    core_api.create_namespaced_pod(NS, pod_manifest("new"))
    fake_kube.store.compact()
    assert collect(core_api, resource_version=rv, timeout_seconds=1) == [("ERROR", "", 410)]
    # the official Watch helper turns it into an ApiException once it stops retrying
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(core_api.list_namespaced_pod, NS, resource_version=rv,
                                      timeout_seconds=1):  # fmt: skip
            pass
    assert err.value.status == 410


def test_history_is_bounded() -> None:
    store = FakeKubeStore(history_limit=3)
    versions = [int(store.create_pod(NS, pod_manifest(f"p{i}"))["metadata"]["resourceVersion"])
                for i in range(5)]  # fmt: skip
    assert store.changes_since(versions[0]) is None
    assert [c.obj["metadata"]["name"] for c in store.changes_since(versions[1]) or []] == ["p2", "p3", "p4"]


def test_graceful_delete_keeps_the_pod_until_its_grace_period_has_passed() -> None:
    clock = ManualClock()
    server = FakeKubeServer(FakeKubeStore(clock=clock, default_grace_seconds=30))
    api = core_api_for(server.start())
    try:
        api.create_namespaced_pod(NS, pod_manifest("g"))
        # Only a pod bound to a node is deleted gracefully (an unbound one at once), as on a real server.
        binding = {"metadata": {"name": "g"}, "target": {"kind": "Node", "name": "fake-node-1"}}
        api.create_namespaced_pod_binding("g", NS, binding, _preload_content=False)
        api.delete_namespaced_pod("g", NS)
        terminating = api.read_namespaced_pod("g", NS)
        assert terminating.metadata.deletion_timestamp is not None
        assert terminating.status.phase == "Pending"
        api.delete_namespaced_pod("g", NS)  # deleting again is harmless
        clock.advance(31)
        with pytest.raises(client.ApiException) as err:
            api.read_namespaced_pod("g", NS)
        assert err.value.status == 404
        api.create_namespaced_pod(NS, pod_manifest("now"))
        api.delete_namespaced_pod("now", NS, grace_period_seconds=0)
        assert names(api.list_namespaced_pod(NS)) == []
    finally:
        server.stop()


def test_events_and_logs(fake_kube: FakeKubeServer, core_api: client.CoreV1Api) -> None:
    core_api.create_namespaced_pod(NS, pod_manifest("e"))
    store = fake_kube.store
    store.add_event(NS, "e", "Scheduled", "assigned")
    store.add_event(NS, "e", "BackOff", "back-off", "Warning")
    store.add_event(NS, "e", "BackOff", "back-off", "Warning")
    store.add_event(NS, "someone-else", "Scheduled", "assigned")
    events = core_api.list_namespaced_event(NS, field_selector="involvedObject.name=e").items
    assert [(e.reason, e.count) for e in events] == [("Scheduled", 1), ("BackOff", 2)]
    store.bind_pod(NS, "e", "fake-node-1")  # logs come from the pod's node; an unbound pod has none
    with pytest.raises(client.ApiException) as waiting:  # as the kubelet says (tests/real/test_real_node.py)
        core_api.read_namespaced_pod_log("e", NS, _preload_content=False)
    assert waiting.value.status == 400
    assert 'container \\"agent\\" in pod \\"e\\" is waiting to start: ContainerCreating' in waiting.value.body
    store.update_status(NS, "e", None, {"containerStatuses": [
        {"name": "agent", "ready": True, "restartCount": 0, "state": {"running": {}}}]})  # fmt: skip
    for i in range(5):
        store.append_log(NS, "e", f"line {i}")
    # (the classic client mangles a preloaded text answer into "b'...'": read the raw bytes)
    tail = core_api.read_namespaced_pod_log("e", NS, tail_lines=2, _preload_content=False)
    assert tail.data == b"line 3\nline 4\n"
    assert core_api.read_namespaced_pod_log("e", NS, _preload_content=False).data.count(b"\n") == 5


def test_nodes_and_discovery(core_api: client.CoreV1Api) -> None:
    assert len(core_api.list_node().items) == 3
    assert client.VersionApi(core_api.api_client).get_code().major == "1"
    assert "pods" in [r.name for r in core_api.get_api_resources().resources]


def test_injected_status_and_delay(fake_kube: FakeKubeServer, core_api: client.CoreV1Api) -> None:
    fault = faults_of(fake_kube).add(method="POST", path_pattern=r"/pods$", status=500, times=1)
    with pytest.raises(client.ApiException) as err:
        core_api.create_namespaced_pod(NS, pod_manifest("f"))
    assert err.value.status == 500 and fault.hits == 1
    core_api.create_namespaced_pod(NS, pod_manifest("f"))  # only once
    faults_of(fake_kube).add(method="GET", path_pattern=r"/pods/f$", status=None, delay=0.5, times=1)
    with pytest.raises(Exception, match=r"[Tt]imeout|timed out"):
        core_api.read_namespaced_pod("f", NS, _request_timeout=0.1)
    assert core_api.read_namespaced_pod("f", NS).metadata.name == "f"


def test_token_forbidden_and_unreachable(fake_kube: FakeKubeServer, core_api: client.CoreV1Api) -> None:
    fake_kube.api.token = "s3cret"
    with pytest.raises(client.ApiException) as unauthorized:
        core_api.list_namespaced_pod(NS)
    assert unauthorized.value.status == 401
    authorized = core_api_for(fake_kube.url, token="s3cret")
    assert authorized.list_namespaced_pod(NS).items == []
    fake_kube.api.forbidden = True
    with pytest.raises(client.ApiException) as forbidden:
        authorized.list_namespaced_pod(NS)
    assert forbidden.value.status == 403
    fake_kube.api.forbidden = False
    fake_kube.set_unreachable(True)
    with pytest.raises(Exception) as unreachable:  # urllib3 picks the exact class
        authorized.list_namespaced_pod(NS, _request_timeout=2)
    assert not isinstance(unreachable.value, client.ApiException)
    fake_kube.set_unreachable(False)
    assert authorized.list_namespaced_pod(NS).items == []


def test_module_entry_point_prints_one_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_agent.simulation.fake_kube", "--bind", "127.0.0.1:0", "--kubelet",
         "--boot-delay", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        api = core_api_for(line.removeprefix("listening on "))
        api.create_namespaced_pod(NS, pod_manifest("m"))
        assert wait_for(lambda: api.read_namespaced_pod("m", NS).status.phase == "Running")
    finally:
        proc.terminate()
        proc.wait(timeout=5)
