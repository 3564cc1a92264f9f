"""One contract for the Kubernetes adapter, run against the fake API server and a real kube-apiserver.

Every test runs twice, `[fake]` on elastic_agent/simulation/fake_kube.py and `[real]` on the kube-apiserver
and etcd of tests/support/control_plane.py, each in a namespace of its own. The adapter (KubeCluster, the
product code) connects as a ServiceAccount whose only permissions are those of the project's Role,
docker/kubernetes/rbac/role.yaml; what a scheduler or a kubelet would do (bind a pod, write pods/status,
record events, finish a deletion) is done as the admin. Where the adapter makes a call, the test goes
through the adapter; server facts it relies on without calling for them (set-based selectors, 410 Gone,
the end of a watch, validation, the status subresource, authorization) are asked for with the official
client.

The real server is the reference, and the fake (elastic_agent/simulation/fake_kube*.py) must answer as
it does. Each test's name says the rule it pins down (label and annotation validation on create, patch
and status writes; deletion and its grace periods; compare-and-swap; RBAC); the rules a name cannot
hold, as kube-apiserver applies them:

- Deletion is written first (deletionTimestamp now, deletionGracePeriodSeconds 0: a MODIFIED event),
  then the pod removed (DELETED); a bound pod waits for the grace period asked, else its
  terminationGracePeriodSeconds (defaulted to 30).
- pods/log: a pod without a node has nobody to ask: 204 No Content (the adapter reads ""); a pod bound
  to a node that does not exist is a 404 (whose message, sic, names the node as a pod); a node whose
  kubelet cannot be reached is a 500. Either error is a ClusterError to the adapter, which the agent
  status page shows.
- pods/status writes the status and, unlike a custom resource's status subresource, labels and
  annotations as well, but silently keeps spec, deletionTimestamp and ownerReferences; a resourceVersion
  in it is a compare-and-swap too. pods/binding assigns a node once (409 after, 404 for no pod) and marks
  the pod PodScheduled.
- Authorization: a 403 names the user, verb and resource; discovery (/version) is open to any
  authenticated user. The Role has no `get`: a GET of a pod is refused to the adapter's token (the
  adapter reads its cache).
- A patch of a pod's identity: another uid, deletionTimestamp or deletionGracePeriodSeconds is a 422
  (immutable), another name a 400; creationTimestamp is silently kept.
- Bookmarks: a watch from a resourceVersion gets a bookmark about 2 s before its end, none if it lasts
  3 s or less (and, by the watch cache's code, one a minute on long watches); a watch from "now" (no
  resourceVersion, or "0") gets the pods there as ADDED, then a bookmark marked
  `k8s.io/initial-events-end`. So the version a watch resumes from can expire between two watches, and
  the adapter's 410 path is reached.
- resourceVersions are etcd's revisions, which start at 1: a list never says "0", which a watch would
  take to mean "from now, with the pods there as ADDED".
- 410 Gone: a watch from a compacted version is answered 200, then one ERROR event with code 410, reason
  Expired. The fake compacts with `store.compact()`; the real server, for the contract, runs on a
  control plane of its own that compacts etcd every second and serves pod watches from etcd (the
  session's server's watch cache reaches back to its start).

Where the fake differs on purpose, or where the adapter does not depend on the difference:

- The fake's default grace period is 0 (`default_grace_seconds`; the real default is 30 s), so that the
  suite's deletions need no kubelet to finish them; this contract sets it to 30. The simulations' store
  (SimulationKubeStore) removes a deleted pod in one event, so that their results for a seed stay the
  same.
- The fake's nodes always answer for logs: the 500 of an unreachable kubelet is tested on the real server
  only (test_the_log_from_a_kubelet_that_cannot_be_reached_is_a_cluster_error).
- Field selectors: the fake supports `=` only, the real one `!=` too (the adapter uses
  `involvedObject.name=`).
- Watch timeouts: the real server takes whole seconds (`timeoutSeconds=0.5` is a 400); the fake also
  takes fractions, which its own tests use to stay fast. The adapter sends whole seconds.
- A resourceVersion that is not a number in a merge patch: the real server answers 500, the fake 409.
- The real server fills in defaults (restartPolicy, dnsPolicy, terminationGracePeriodSeconds,
  status.qosClass, ...) and refuses a pod without containers (422); the fake stores the spec as given.
- A list at a resourceVersion (`resourceVersionMatch=Exact`, 410 once compacted): the fake ignores the
  parameters. The adapter lists the current state only.
- Events are listed in name order by the real server (names end in random characters), in creation
  order by the fake. The adapter sorts them by time.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from elastic_agent.kube.port import ClusterError, Conflict, Forbidden, NotFound
from tests.support import kube_contract, real_kube_fixtures
from tests.support.kube_contract import (
    GRACE_S,
    MERGE,
    OURS,
    THEIRS,
    WAIT_S,
    Server,
    _fresh_name,
    plugin_role,
    status_of,
)
from tests.support.kube_fixtures import pod_manifest, wait_for

real_kube = real_kube_fixtures.real_kube  # fixtures
real_kube_binaries = real_kube_fixtures.real_kube_binaries
compacting_kube = real_kube_fixtures.compacting_kube
server = kube_contract.server
expiring = kube_contract.expiring
real = kube_contract.real

ANNOTATIONS_MAX = 256 * 1024


# --- helpers --------------------------------------------------------------------------------------------


def watch(api: client.CoreV1Api, namespace: str, **options: Any) -> list[tuple[str, str]]:
    """One watch request until the server ends it: (type, pod name or error code) per event, without
    bookmarks (where and whether they come depends on the watch, see the module docstring). The read timeout
    is far beyond the watch's own, so a stream that does not end fails the test."""
    stream = api.list_namespaced_pod(namespace, watch=True, _preload_content=False, _request_timeout=(10, 60),
                                     **options)  # fmt: skip
    events = []
    try:
        for line in iter_resp_lines(stream):
            if not line.strip():
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            if event["type"] != "BOOKMARK":
                what = obj.get("code") or (obj.get("metadata") or {}).get("name")
                events.append((event["type"], str(what)))
    finally:
        stream.release_conn()
    return events


def names(pods: Any) -> list[str]:
    return sorted(pod.metadata.name for pod in pods.items)


def annotations_of(server: Server, name: str) -> dict[str, str]:
    pod = server.read(name)
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


# --- create, get, list ----------------------------------------------------------------------------------


def test_a_created_pod_is_read_back_from_the_cache_at_once(server: Server) -> None:
    cluster = server.adapter()
    created = cluster.create_pod(pod_manifest("agent-1", {"extra": "x"}))
    assert cluster.get("agent-1") == created and [p.name for p in cluster.pods()] == ["agent-1"]
    assert created.labels == {**OURS, "extra": "x"}  # the identity labels are always set
    assert created.phase == "Pending" and created.node_name is None and not created.deleting
    assert created.namespace == server.namespace and created.containers == ("agent",)
    assert created.created_at > 0 and int(created.resource_version) > 0
    stored = server.read("agent-1")
    assert stored is not None and stored["metadata"]["resourceVersion"] == created.resource_version


def test_the_first_sync_lists_only_the_pods_of_the_selector(server: Server) -> None:
    server.create("ours")
    server.create("foreign", THEIRS)
    server.create("unlabelled", {})
    server.create("ours", namespace=server.new_namespace())  # same name and labels, another namespace
    cluster = server.adapter()
    assert [p.name for p in cluster.pods()] == ["ours"] and cluster.sync_problem() is None
    assert cluster.get("foreign") is None


def test_creating_a_pod_whose_name_is_taken_is_refused_with_409(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("taken"))
    with pytest.raises(Conflict) as refused:
        cluster.create_pod(pod_manifest("taken"))
    assert refused.value.status == 409 and server.url in str(refused.value)


def test_a_pod_is_read_by_name_and_a_missing_one_is_404(server: Server) -> None:
    uid = server.create("present")["metadata"]["uid"]
    present = server.read("present")
    assert present is not None and present["metadata"]["uid"] == uid
    assert status_of(lambda: server.admin.read_namespaced_pod("absent", server.namespace)) == 404


def test_set_based_label_selectors_select_as_the_real_server_does(server: Server) -> None:
    server.create("a", {"tier": "web", "env": "prod"})
    server.create("b", {"tier": "db", "env": "dev"})
    server.create("c", {"tier": "cache"})
    server.create("d", {})
    api = server.api(server.token)

    def select(selector: str) -> list[str]:
        return names(api.list_namespaced_pod(server.namespace, label_selector=selector))

    assert select("tier=web") == ["a"]
    assert select("tier==db") == ["b"]
    assert select("tier!=web") == ["b", "c", "d"]  # != and notin also match pods without the label
    assert select("tier in (web, db)") == ["a", "b"]
    assert select("tier notin (web,db)") == ["c", "d"]
    assert select("tier notin (web),env") == ["b"]
    assert select("env") == ["a", "b"]
    assert select("!env") == ["c", "d"]
    assert select("tier in (web,db),env=dev") == ["b"]
    for garbage in ("tier in web", "tier=a b"):
        assert status_of(api.list_namespaced_pod, server.namespace, label_selector=garbage) == 400, garbage


def test_a_field_selector_on_a_field_that_cannot_be_selected_is_refused_with_400(server: Server) -> None:
    server.create("by-name")
    server.create("other")
    api, namespace = server.api(server.token), server.namespace
    assert names(api.list_namespaced_pod(namespace, field_selector="metadata.name=by-name")) == ["by-name"]
    assert status_of(lambda: api.list_namespaced_pod(namespace, field_selector="metadata.labels=x")) == 400
    assert status_of(lambda: api.list_namespaced_event(namespace, field_selector="bogus.field=x")) == 400


# --- watch ----------------------------------------------------------------------------------------------


def test_a_watch_from_a_resource_version_replays_added_modified_and_deleted(server: Server) -> None:
    api = server.api(server.token)
    start = api.list_namespaced_pod(server.namespace).metadata.resource_version
    server.create("w1", {"app": "a"})
    middle = server.create("w2", {"app": "a"})["metadata"]["resourceVersion"]
    server.patch("w1", {"metadata": {"annotations": {"k": "v"}}})
    server.create("not-selected", {"app": "b"})
    server.delete("w2")  # unbound: at once, the deletion written first (MODIFIED), then DELETED
    everything = watch(api, server.namespace, resource_version=start, timeout_seconds=1,
                       label_selector="app=a", allow_watch_bookmarks=True)  # fmt: skip
    assert everything == [("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"), ("MODIFIED", "w2"),
                          ("DELETED", "w2")]  # fmt: skip
    resumed = watch(api, server.namespace, resource_version=middle, timeout_seconds=1, label_selector="app=a")
    assert resumed == [("MODIFIED", "w1"), ("MODIFIED", "w2"), ("DELETED", "w2")]


def test_a_watch_without_a_resource_version_starts_with_the_pods_there_as_added(server: Server) -> None:
    server.create("here-1")
    server.create("here-2")
    events = watch(server.api(server.token), server.namespace, timeout_seconds=1)
    assert sorted(events) == [("ADDED", "here-1"), ("ADDED", "here-2")]


def test_a_pod_relabelled_out_of_the_selector_is_deleted_for_the_watch(server: Server) -> None:
    start = server.create("moving", {"app": "a"})["metadata"]["resourceVersion"]
    server.patch("moving", {"metadata": {"labels": {"app": "b"}}})
    server.patch("moving", {"metadata": {"labels": {"app": "a"}}})
    events = watch(server.api(server.token), server.namespace, resource_version=start, timeout_seconds=1,
                   label_selector="app=a")  # fmt: skip
    assert events == [("DELETED", "moving"), ("ADDED", "moving")]


def test_a_watch_ends_at_its_timeout_and_is_resumed_from_the_last_version(server: Server) -> None:
    """The adapter's watches time out every second here: it resumes from the last version it saw, without
    listing again, and misses nothing written in between."""
    api = server.api(server.token)
    start = api.list_namespaced_pod(server.namespace).metadata.resource_version
    assert watch(api, server.namespace, resource_version=start, timeout_seconds=1) == []  # and it ended
    cluster = server.adapter()
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= 3, timeout=WAIT_S)
    server.create("between-watches")
    assert wait_for(lambda: cluster.get("between-watches") is not None, timeout=WAIT_S)
    assert cluster.api_calls["list"] == 1 and cluster.sync_problem() is None


def test_the_adapter_follows_what_others_do_to_its_pods(server: Server) -> None:
    cluster = server.adapter()
    heard: list[tuple[str, str, str, bool]] = []
    cluster.add_listener(lambda kind, pod: heard.append((kind, pod.name, pod.phase, pod.deleting)))
    server.create("made-elsewhere")
    server.create("not-ours", THEIRS)
    assert wait_for(lambda: cluster.get("made-elsewhere") is not None, timeout=WAIT_S)
    server.bind("made-elsewhere")
    server.write_status("made-elsewhere", {"status": {"phase": "Running"}})
    assert wait_for(lambda: (p := cluster.get("made-elsewhere")) is not None and p.phase == "Running",
                    timeout=WAIT_S)  # fmt: skip
    pod = cluster.get("made-elsewhere")
    assert pod is not None and pod.node_name == "contract-node"
    server.patch("made-elsewhere", {"metadata": {"labels": {"reuse.gocd.org/server-id": "x"}}})
    assert wait_for(lambda: cluster.get("made-elsewhere") is None, timeout=WAIT_S)  # relabelled away
    server.create("short-lived")
    server.delete("short-lived")
    assert wait_for(lambda: len(heard) == 7, timeout=WAIT_S)
    assert heard == [
        ("ADDED", "made-elsewhere", "Pending", False), ("MODIFIED", "made-elsewhere", "Pending", False),
        ("MODIFIED", "made-elsewhere", "Running", False), ("DELETED", "made-elsewhere", "Running", False),
        ("ADDED", "short-lived", "Pending", False), ("MODIFIED", "short-lived", "Pending", True),
        ("DELETED", "short-lived", "Pending", True),
    ]  # fmt: skip
    assert cluster.get("not-ours") is None and cluster.sync_problem() is None


# --- 410 Gone -------------------------------------------------------------------------------------------


def test_a_watch_from_a_compacted_resource_version_gets_410_gone(expiring: Server) -> None:
    api = expiring.api(expiring.token)
    old = expiring.create("old")["metadata"]["resourceVersion"]
    expiring.create("new")
    expiring.expire(old)
    assert watch(api, expiring.namespace, resource_version=old, timeout_seconds=1) == [("ERROR", "410")]


def test_the_adapter_lists_again_after_410_gone_and_carries_on(
    expiring: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """The adapter's version (that of its list: nothing of ours changes) is compacted away while it
    watches; the next watch from it gets 410, and the adapter lists again at once: not a failure (none
    logged, no sync problem, no backoff)."""
    caplog.set_level(logging.WARNING, logger="elastic_agent.kube.adapter")
    expiring.create("before")
    cluster = expiring.adapter()
    assert [p.name for p in cluster.pods()] == ["before"]
    # At least the version the adapter listed at and watches from (nothing of ours changes after).
    version = expiring.api(expiring.token).list_namespaced_pod(expiring.namespace).metadata.resource_version
    expiring.create("unseen", THEIRS)  # moves the revision on without an event for the adapter
    expiring.expire(version)
    assert wait_for(lambda: cluster.api_calls.get("list", 0) >= 2, timeout=WAIT_S)
    expiring.create("after")
    assert wait_for(lambda: [p.name for p in cluster.pods()] == ["after", "before"], timeout=WAIT_S)
    assert cluster.sync_problem() is None and caplog.records == []


# --- compare-and-swap merge patches ---------------------------------------------------------------------


def test_a_merge_patch_with_the_current_resource_version_is_applied(server: Server) -> None:
    cluster = server.adapter()
    created = cluster.create_pod(pod_manifest("cas"))
    patched = cluster.patch_pod_metadata("cas", annotations={"reuse.gocd.org/state": "idle"},
                                         labels={"reuse.gocd.org/job-id": "j1"},
                                         resource_version=created.resource_version)  # fmt: skip
    assert int(patched.resource_version) > int(created.resource_version)
    assert patched.annotations["reuse.gocd.org/state"] == "idle"
    assert patched.labels["reuse.gocd.org/job-id"] == "j1"
    assert cluster.get("cas") == patched and annotations_of(server, "cas") == {"reuse.gocd.org/state": "idle"}


def test_a_merge_patch_with_a_stale_resource_version_is_refused_with_409(server: Server) -> None:
    cluster = server.adapter()
    created = cluster.create_pod(pod_manifest("cas"))
    cluster.patch_pod_metadata("cas", annotations={"a": "1"}, resource_version=created.resource_version)
    with pytest.raises(Conflict) as refused:
        cluster.patch_pod_metadata("cas", annotations={"a": "2"}, resource_version=created.resource_version)
    assert refused.value.status == 409
    assert annotations_of(server, "cas") == {"a": "1"}
    pod = cluster.get("cas")
    assert pod is not None and pod.annotations == {"a": "1"}


def test_a_merge_patch_without_a_resource_version_is_unconditional_and_null_removes(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("plain"))
    server.patch("plain", {"metadata": {"annotations": {"theirs": "x"}}})  # a write the adapter did not see
    cluster.patch_pod_metadata("plain", annotations={"a": "1", "b": "2"})
    removed = cluster.patch_pod_metadata("plain", annotations={"a": None})
    assert removed.annotations == {"theirs": "x", "b": "2"}


def test_patching_a_missing_pod_is_404(server: Server) -> None:
    cluster = server.adapter()
    with pytest.raises(NotFound) as missing:
        cluster.patch_pod_metadata("missing", annotations={"a": "1"})
    assert missing.value.status == 404


def test_a_patch_may_not_change_a_pods_identity_or_spec(server: Server) -> None:
    server.create("fixed")
    for body, status in (({"metadata": {"uid": "another"}}, 422), ({"metadata": {"name": "renamed"}}, 400),
                         ({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}, 422),
                         ({"spec": {"nodeName": "elsewhere"}}, 422)):  # fmt: skip
        assert status_of(server.patch, "fixed", body) == status, body
    pod = server.read("fixed")
    assert pod is not None and not pod["spec"].get("nodeName") and "deletionTimestamp" not in pod["metadata"]


# --- deletion -------------------------------------------------------------------------------------------


def test_deleting_a_pod_no_node_runs_removes_it_at_once(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("unbound"))
    cluster.delete_pod("unbound")
    assert cluster.get("unbound") is None and server.read("unbound") is None
    cluster.delete_pod("unbound")  # gone already: not an error
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= 2, timeout=WAIT_S)
    assert cluster.get("unbound") is None  # the watch's older events did not bring it back


def test_a_pod_bound_to_a_node_is_deleted_gracefully_and_gone_after_a_grace_0_delete(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("bound"))
    server.bind("bound")
    assert wait_for(lambda: (p := cluster.get("bound")) is not None and p.node_name is not None,
                    timeout=WAIT_S)  # fmt: skip
    cluster.delete_pod("bound")
    pod = cluster.get("bound")
    assert pod is not None and pod.deleting  # at once, from the answer to the delete
    stored = server.read("bound")
    assert stored is not None and stored["metadata"]["deletionGracePeriodSeconds"] == GRACE_S
    assert stored["metadata"]["deletionTimestamp"]
    cluster.delete_pod("bound")  # again: changes nothing
    again = server.read("bound")
    assert again is not None and again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    retired = cluster.patch_pod_metadata("bound", annotations={"reuse.gocd.org/state": "retired"})
    assert retired.deleting  # a terminating pod's metadata can still be written
    server.finish_deletion("bound")  # the kubelet, once the containers stopped
    assert wait_for(lambda: cluster.get("bound") is None, timeout=WAIT_S)
    assert server.read("bound") is None and cluster.sync_problem() is None


def test_a_shorter_grace_period_replaces_a_longer_one_and_a_longer_one_does_not(server: Server) -> None:
    server.create("terminating")
    server.bind("terminating")
    assert server.delete("terminating", gracePeriodSeconds=20)["metadata"]["deletionGracePeriodSeconds"] == 20
    assert server.delete("terminating", gracePeriodSeconds=25)["metadata"]["deletionGracePeriodSeconds"] == 20
    assert server.delete("terminating", gracePeriodSeconds=5)["metadata"]["deletionGracePeriodSeconds"] == 5
    gone = server.delete("terminating", gracePeriodSeconds=0)
    assert gone["metadata"]["deletionGracePeriodSeconds"] == 0 and server.read("terminating") is None


def test_the_grace_period_is_the_pods_own_unless_one_is_asked_for(server: Server) -> None:
    server.create("own-grace", terminationGracePeriodSeconds=7)
    server.bind("own-grace")
    assert server.delete("own-grace")["metadata"]["deletionGracePeriodSeconds"] == 7


def test_a_finished_pod_is_deleted_at_once_even_on_a_node(server: Server) -> None:
    server.create("finished")
    server.bind("finished")
    server.write_status("finished", {"status": {"phase": "Failed", "reason": "Evicted"}})
    server.delete("finished")
    assert server.read("finished") is None


def test_a_delete_whose_uid_precondition_names_another_pod_is_refused_with_409(server: Server) -> None:
    server.create("reborn")
    precondition = {"preconditions": {"uid": str(uuid.uuid4())}}
    assert status_of(lambda: server.delete("reborn", **precondition)) == 409
    assert server.read("reborn") is not None


# --- events and logs ------------------------------------------------------------------------------------


def test_the_events_of_a_pod_are_listed_by_field_selector(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("eventful"))
    server.record_event("eventful", "Scheduled", "assigned", when="2030-01-01T00:00:00Z")
    server.record_event("eventful", "BackOff", "back-off", "Warning", when="2030-01-01T00:00:05Z")
    server.record_event("someone-else", "Scheduled", "assigned")
    events = cluster.pod_events("eventful")
    assert [(e["type"], e["reason"], e["message"], e["count"]) for e in events] == [
        ("Normal", "Scheduled", "assigned", 1), ("Warning", "BackOff", "back-off", 1)]  # fmt: skip
    assert events[1]["last_seen"] - events[0]["last_seen"] == 5
    assert cluster.pod_events("nobody") == []


def test_the_log_of_a_pod_without_a_node_is_empty(server: Server) -> None:
    """No node, no kubelet to ask: the real server answers 204 No Content, which the adapter reads as ""."""
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("unscheduled"))
    assert cluster.pod_log("unscheduled", tail_lines=10) == ""


def test_the_log_of_a_pod_on_a_node_the_cluster_does_not_know_is_a_cluster_error(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("on-no-node"))
    server.bind("on-no-node", _fresh_name("no-such-node"))
    with pytest.raises(ClusterError) as failed:
        cluster.pod_log("on-no-node")
    assert failed.value.status == 404 and server.url in str(failed.value)
    assert server.token not in str(failed.value)


def test_the_log_of_a_missing_pod_is_404(server: Server) -> None:
    cluster = server.adapter()
    with pytest.raises(NotFound):
        cluster.pod_log("missing")


def test_the_log_from_a_kubelet_that_cannot_be_reached_is_a_cluster_error(real: Server) -> None:
    """Real only: the fake's nodes always answer. A Node whose kubelet port is closed: kube-apiserver
    cannot proxy the log and answers 500, which the adapter reports as a ClusterError."""
    node = _fresh_name("no-kubelet")
    real.admin.create_node({"metadata": {"name": node}, "status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}}, _preload_content=False)  # fmt: skip
    try:
        cluster = real.adapter()
        cluster.create_pod(pod_manifest("on-a-silent-node"))
        real.bind("on-a-silent-node", node)
        with pytest.raises(ClusterError) as failed:
            cluster.pod_log("on-a-silent-node")
        assert failed.value.status == 500 and not isinstance(failed.value, NotFound | Forbidden)
    finally:
        real.admin.delete_node(node, _preload_content=False)


# --- validation -----------------------------------------------------------------------------------------


def test_a_label_value_longer_than_63_characters_is_refused_with_422(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("longest", {"long": "x" * 63}))
    with pytest.raises(ClusterError) as refused:
        cluster.create_pod(pod_manifest("too-long", {"long": "x" * 64}))
    assert refused.value.status == 422 and "63" in str(refused.value)
    with pytest.raises(ClusterError) as patch_refused:
        cluster.patch_pod_metadata("longest", labels={"long": "y" * 64})
    assert patch_refused.value.status == 422
    pod = cluster.get("longest")
    assert pod is not None and pod.labels["long"] == "x" * 63


@pytest.mark.parametrize("value", ["bad value", "-leading", "trailing_", "sla/sh", "ünïcode", "a:b"])
def test_a_label_value_with_invalid_characters_is_refused_with_422(server: Server, value: str) -> None:
    cluster = server.adapter()
    with pytest.raises(ClusterError) as refused:
        cluster.create_pod(pod_manifest("invalid", {"k": value}))
    assert refused.value.status == 422
    assert cluster.get("invalid") is None and server.read("invalid") is None


def test_valid_label_values_include_the_empty_one_and_inner_punctuation(server: Server) -> None:
    cluster = server.adapter()
    created = cluster.create_pod(pod_manifest("fine", {"empty": "", "dotted": "a.b-c_d", "digits": "0"}))
    assert created.labels["empty"] == "" and created.labels["dotted"] == "a.b-c_d"


QUALIFIED_NAME_BREAKERS = ["x" * 64, "a/b/c", ("d" * 250) + ".com/k", "/k", "k/", "bad key", "-k", "k_"]


@pytest.mark.parametrize("key", QUALIFIED_NAME_BREAKERS)
def test_a_label_or_annotation_key_that_is_not_a_qualified_name_is_refused_with_422(
    server: Server, key: str
) -> None:
    cluster = server.adapter()
    with pytest.raises(ClusterError) as label_refused:
        cluster.create_pod(pod_manifest("bad-label-key", {key: "v"}))
    assert label_refused.value.status == 422
    cluster.create_pod(pod_manifest("annotated"))
    with pytest.raises(ClusterError) as annotation_refused:
        cluster.patch_pod_metadata("annotated", annotations={key: "v"})
    assert annotation_refused.value.status == 422


def test_capitals_in_a_key_prefix_are_refused_in_labels_but_allowed_in_annotations(server: Server) -> None:
    """kube-apiserver checks annotation keys lowercased, label keys as they are."""
    cluster = server.adapter()
    with pytest.raises(ClusterError) as refused:
        cluster.create_pod(pod_manifest("capitals", {"Example.COM/k": "v"}))
    assert refused.value.status == 422
    created = cluster.create_pod(pod_manifest("capitals"))
    patched = cluster.patch_pod_metadata("capitals", annotations={"Example.COM/k": "v"},
                                         resource_version=created.resource_version)  # fmt: skip
    assert patched.annotations == {"Example.COM/k": "v"}


def test_annotations_over_256_kib_in_total_are_refused_with_422(server: Server) -> None:
    """Keys and values together: 262144 bytes are allowed, one more is not, however they are spread."""
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("annotated"))
    half = ANNOTATIONS_MAX // 2
    cluster.patch_pod_metadata("annotated", annotations={"a": "x" * (half - 1)})
    cluster.patch_pod_metadata("annotated", annotations={"b": "y" * (half - 1)})  # exactly the limit
    with pytest.raises(ClusterError) as refused:
        cluster.patch_pod_metadata("annotated", annotations={"c": ""})  # one byte more
    assert refused.value.status == 422
    with pytest.raises(ClusterError) as create_refused:
        big = pod_manifest("big")
        big["metadata"]["annotations"] = {"k": "x" * ANNOTATIONS_MAX}
        cluster.create_pod(big)
    assert create_refused.value.status == 422
    assert sorted(annotations_of(server, "annotated")) == ["a", "b"]


# --- the status subresource and bindings ----------------------------------------------------------------


def test_the_status_subresource_writes_the_status_but_never_the_spec(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("kubelet-written"))
    written = server.write_status("kubelet-written", {
        "status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"},
        "spec": {"nodeName": "sneaked-in"},
        "metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})  # fmt: skip
    assert written["status"]["phase"] == "Failed" and not written["spec"].get("nodeName")
    assert "deletionTimestamp" not in written["metadata"]
    assert wait_for(lambda: (p := cluster.get("kubelet-written")) is not None and p.phase == "Failed",
                    timeout=WAIT_S)  # fmt: skip
    pod = cluster.get("kubelet-written")
    assert pod is not None and pod.reason == "Evicted" and pod.message == "low on memory"
    assert pod.node_name is None and not pod.deleting


def test_the_status_subresource_also_writes_labels_and_annotations(server: Server) -> None:
    """Unlike a custom resource's status subresource, a pod's applies metadata changes too."""
    server.create("relabelled-by-status")
    written = server.write_status("relabelled-by-status", {"metadata": {
        "labels": {"via": "status"}, "annotations": {"via": "status"}}})  # fmt: skip
    assert written["metadata"]["labels"]["via"] == "status"
    assert written["metadata"]["annotations"] == {"via": "status"}
    assert status_of(lambda: server.write_status("relabelled-by-status", {
        "metadata": {"labels": {"via": "x" * 64}}})) == 422  # fmt: skip


def test_a_status_write_with_a_stale_resource_version_is_refused_with_409(server: Server) -> None:
    version = server.create("raced")["metadata"]["resourceVersion"]
    server.write_status("raced", {"status": {"phase": "Running"}, "metadata": {"resourceVersion": version}})
    stale = {"status": {"phase": "Failed"}, "metadata": {"resourceVersion": version}}
    assert status_of(lambda: server.write_status("raced", stale)) == 409
    pod = server.read("raced")
    assert pod is not None and pod["status"]["phase"] == "Running"


def test_a_status_in_a_patch_of_the_pod_itself_is_ignored(server: Server) -> None:
    server.create("not-by-patch")
    patched = server.patch("not-by-patch", {"status": {"phase": "Failed"},
                                            "metadata": {"labels": {"k": "v"}}})  # fmt: skip
    assert patched["status"]["phase"] == "Pending" and patched["metadata"]["labels"]["k"] == "v"


def test_a_pod_is_bound_to_a_node_once(server: Server) -> None:
    server.create("scheduled")
    server.bind("scheduled", "node-a")
    assert status_of(lambda: server.bind("scheduled", "node-b")) == 409
    pod = server.read("scheduled")
    assert pod is not None and pod["spec"]["nodeName"] == "node-a"
    assert status_of(lambda: server.bind("unknown-pod")) == 404


# --- bearer tokens, 401 and 403 -------------------------------------------------------------------------


def test_an_unknown_bearer_token_is_refused_with_401(server: Server) -> None:
    bad = "not-a-token"
    assert status_of(lambda: server.api(bad).list_namespaced_pod(server.namespace)) == 401
    cluster = server.adapter(bad, synced=False)
    assert wait_for(lambda: cluster.sync_problem() is not None, timeout=WAIT_S)
    problem = cluster.sync_problem()
    assert isinstance(problem, Forbidden) and problem.status == 401 and not cluster.wait_synced(0)
    with pytest.raises(Forbidden) as refused:
        cluster.create_pod(pod_manifest("never"))
    assert refused.value.status == 401 and bad not in str(refused.value) and server.url in str(refused.value)


def test_a_token_without_the_role_is_refused_with_403(server: Server) -> None:
    token = server.token_for("nobody", [])
    assert status_of(lambda: server.api(token).list_namespaced_pod(server.namespace)) == 403
    cluster = server.adapter(token, synced=False)
    assert wait_for(lambda: cluster.sync_problem() is not None, timeout=WAIT_S)
    problem = cluster.sync_problem()
    assert isinstance(problem, Forbidden) and problem.status == 403
    assert f"system:serviceaccount:{server.namespace}:nobody" in str(problem)
    with pytest.raises(Forbidden) as refused:
        cluster.create_pod(pod_manifest("never"))
    assert refused.value.status == 403 and token not in str(refused.value)
    assert server.read("never") is None


def test_the_role_grants_what_the_adapter_does_in_its_namespace_only(server: Server) -> None:
    """docker/kubernetes/rbac/role.yaml has no `get` (the adapter reads its cache), no status writes, and
    binds in its own namespace only."""
    server.create("someone")
    api = server.api(server.token)
    assert names(api.list_namespaced_pod(server.namespace)) == ["someone"]
    assert status_of(lambda: api.read_namespaced_pod("someone", server.namespace)) == 403
    assert status_of(lambda: api.patch_namespaced_pod_status("someone", server.namespace, {
        "status": {"phase": "Running"}}, _content_type=MERGE)) == 403  # fmt: skip
    elsewhere = server.new_namespace()
    assert status_of(lambda: api.list_namespaced_pod(elsewhere)) == 403
    assert status_of(lambda: api.list_namespaced_pod(elsewhere, watch=True, timeout_seconds=1)) == 403
    assert status_of(lambda: api.list_pod_for_all_namespaces()) == 403
    assert client.VersionApi(api.api_client).get_code().major == "1"  # discovery: any authenticated user


def test_every_call_of_the_adapter_is_allowed_by_the_role(server: Server) -> None:
    """One of each call the adapter makes, with exactly docker/kubernetes/rbac/role.yaml."""
    cluster = server.adapter()
    created = cluster.create_pod(pod_manifest("every-call"))
    cluster.patch_pod_metadata("every-call", annotations={"a": "1"},
                               resource_version=created.resource_version)  # fmt: skip
    assert cluster.pod_events("every-call") == [] and cluster.pod_log("every-call") == ""
    cluster.delete_pod("every-call")
    assert wait_for(lambda: cluster.api_calls.get("watch", 0) >= 2, timeout=WAIT_S)
    assert cluster.sync_problem() is None and cluster.get("every-call") is None
    assert set(cluster.api_calls) == {"list", "watch", "create", "patch", "events", "log", "delete"}


def test_a_role_with_resource_names_grants_the_named_pods_only(server: Server) -> None:
    """How RBAC matches a rule (the fake decides as the real server does): verbs, resources with their
    subresource, and resourceNames when a rule lists them."""
    server.create("named")
    server.create("unnamed")
    token = server.token_for("narrow", [  # (apply_role waits for the first rule: one without names)
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"], "resourceNames": ["named"]},
    ])  # fmt: skip
    api, namespace, relabel = server.api(token), server.namespace, {"metadata": {"labels": {"k": "v"}}}
    assert api.read_namespaced_pod("named", namespace).metadata.name == "named"
    assert status_of(api.read_namespaced_pod, "unnamed", namespace) == 403
    api.patch_namespaced_pod("named", namespace, relabel, _content_type=MERGE)
    assert status_of(api.patch_namespaced_pod, "unnamed", namespace, relabel, _content_type=MERGE) == 403
    assert status_of(api.list_namespaced_pod, namespace) == 403  # a list names no pod
    assert status_of(api.delete_namespaced_pod, "named", namespace) == 403
    log = api.read_namespaced_pod_log("unnamed", namespace, _preload_content=False)
    assert log.data == b""


# --- ConfigMaps (what Predict learned: elastic_agent/forecast/store.py) --------------------------------


def test_a_config_map_is_none_until_written_then_created_replaced_and_read_back_with_the_role(
    server: Server,
) -> None:
    cluster = server.adapter()
    assert cluster.read_config_map("gocd-reuse-predictions-test") is None
    cluster.write_config_map("gocd-reuse-predictions-test", {"shape.json": '{"version": 1}'})
    assert cluster.read_config_map("gocd-reuse-predictions-test") == {"shape.json": '{"version": 1}'}
    cluster.write_config_map("gocd-reuse-predictions-test", {"shape.json": '{"version": 1, "stages": []}'})
    stored = server.admin.read_namespaced_config_map("gocd-reuse-predictions-test", server.namespace)
    assert stored.data == {"shape.json": '{"version": 1, "stages": []}'}


def test_without_configmaps_update_a_write_is_refused_with_403_before_the_server_looks_for_it(
    server: Server,
) -> None:
    # RBAC decides before the object is looked up: the replace is refused, not answered 404, so the
    # adapter never falls back to a create; reading still works.
    rules = [
        {**rule, "verbs": [verb for verb in rule["verbs"] if verb != "update"]}
        if "configmaps" in rule["resources"]
        else rule
        for rule in plugin_role()["rules"]
    ]
    cluster = server.adapter(server.token_for("no-update", rules))
    with pytest.raises(Forbidden):
        cluster.write_config_map("gocd-reuse-predictions-test", {"shape.json": "{}"})
    assert cluster.read_config_map("gocd-reuse-predictions-test") is None
