"""The adapter's calls for the status reports, held to the real kube-apiserver like the rest of the
contract (tests/contracts/test_kube_contract.py, whose servers these are: `[fake]` and `[real]`, the adapter
connecting as a ServiceAccount bound to exactly docker/kubernetes/rbac/role.yaml).

- Nodes (`KubeCluster.nodes`, the cluster report): cluster-scoped, so the Role never grants them (403,
  RBAC's own sentence); the optional ClusterRole (docker/kubernetes/rbac-nodes/clusterrole.yaml) grants
  their list and nothing else.
- A pod whole (`read_pod`, the agent report): a list narrowed by name and by this backend's labels,
  allowed by the Role's `list` (it has no `get`), never a pod of another backend.
- Container logs (`pod_log(container=...)`): kube-apiserver picks the container before it looks for a
  node (pkg/registry/core/pod/strategy.go `validateContainer`): a pod of several containers must name
  one (400, naming them all, init containers first), a name the pod lacks is a 400, and a pod on no
  node has no log of any container (204). What a kubelet answers for a container that has not run yet
  needs a kubelet: tests/real/test_real_node.py.
- Events name the container they are about (`involvedObject.fieldPath`) and keep both timestamps.

Differences found on the way, fixed in the fake: its pods' logs were one per pod, whatever the
container asked for (a pod of two containers answered without a name, where the real server refuses
it); its RBAC knew no ClusterRoles; its nodes had neither capacity, addresses nor node info.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client

from elastic_agent.kube.port import ClusterError, Forbidden
from tests.support.control_plane import ControlPlane
from tests.support.kube_contract import OURS, THEIRS, Server, _fresh_name, server, status_of
from tests.support.kube_fixtures import pod_manifest, wait_for
from tests.support.paths import ROOT
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries", "server"]  # fixtures, used by name

CLUSTER_ROLE = ROOT / "docker" / "kubernetes" / "rbac-nodes" / "clusterrole.yaml"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
NODE_STATUS = {
    "capacity": {"cpu": "2", "memory": "4026532Ki", "pods": "110"},
    "allocatable": {"cpu": "1900m", "memory": "3924132Ki", "pods": "110"},
    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
    "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1.0",
                 "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.6.20",
                 "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "operatingSystem": "linux",
                 "architecture": "amd64"},
}  # fmt: skip


def bind_cluster_role(plane: ControlPlane, server: Server, rules: list[dict[str, Any]]) -> None:
    """A ClusterRole of `rules` and its ClusterRoleBinding to the namespace's ServiceAccount `plugin`;
    deleted when the test ends (cluster-scoped: they would outlive the namespace). Waits until the
    authorizer grants the first rule at the cluster scope."""
    name = _fresh_name("contract-cluster-role")
    rbac = client.RbacAuthorizationV1Api(plane.admin_api_client())
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": "plugin", "namespace": server.namespace}
    rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject], "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}})  # fmt: skip
    server.cleanups.append(lambda: rbac.delete_cluster_role_binding(name))
    server.cleanups.append(lambda: rbac.delete_cluster_role(name))
    attributes = {"verb": rules[0]["verbs"][0], "resource": rules[0]["resources"][0]}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": f"system:serviceaccount:{server.namespace}:plugin",
                       "resourceAttributes": attributes,
                       "groups": ["system:serviceaccounts", "system:authenticated"]}}  # fmt: skip

    def granted() -> bool:
        status, answer = plane.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
        return status == 201 and bool(answer.get("status", {}).get("allowed"))

    assert wait_for(granted, timeout=10, interval=0.05), "the ClusterRole was never granted"


Grant = Callable[[list[dict[str, Any]]], None]


@pytest.fixture
def grant_cluster(server: Server, request: pytest.FixtureRequest) -> Grant:
    """Bind rules cluster-wide to the server's ServiceAccount `plugin`: a ClusterRole on the real server."""
    if server.kind == "fake":
        return server.grant_cluster
    plane = request.getfixturevalue("real_kube")
    return lambda rules: bind_cluster_role(plane, server, rules)


def two_containers(name: str, labels: dict[str, str] = OURS) -> dict[str, Any]:
    manifest = pod_manifest(name, labels)
    manifest["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1"}]
    manifest["spec"]["containers"].append({"name": "dind", "image": "docker:27-dind"})
    return manifest


def a_node(server: Server) -> str:
    """A node the server lists: on the real one a Node made here (deleted with the test), on the fake
    one of its own."""
    if server.kind == "fake":
        return "fake-node-1"
    name = f"contract-node-{server.namespace}"
    server.admin.create_node({"metadata": {"name": name}, "status": NODE_STATUS}, _preload_content=False)
    server.cleanups.append(lambda: server.admin.delete_node(name, _preload_content=False))
    return name


def test_nodes_are_refused_with_403_under_the_role_alone(server: Server) -> None:
    cluster = server.adapter()
    with pytest.raises(Forbidden) as refused:
        cluster.nodes()
    assert refused.value.status == 403
    user = f"system:serviceaccount:{server.namespace}:plugin"
    refusal = f'User "{user}" cannot list resource "nodes" in API group "" at the cluster scope'
    assert refusal in str(refused.value)


def test_the_shipped_cluster_role_lets_the_adapter_list_nodes_and_nothing_more(
    server: Server, grant_cluster: Grant
) -> None:
    node = a_node(server)
    role = yaml.safe_load(CLUSTER_ROLE.read_text())
    grant_cluster(role["rules"])
    cluster = server.adapter()
    nodes = {view.name: view for view in cluster.nodes()}
    assert node in nodes
    if server.kind == "real":  # what was stored comes back through the adapter's reading of it
        view = nodes[node]
        assert (view.address, view.ready, view.kubelet_version) == ("127.0.0.1", "False", "v1.36.3")
        assert (view.total.cpu, view.allocatable.cpu, view.allocatable.memory) == ("2", "1.9", "3.74 GiB")
        assert (view.total.pods, view.os_image, view.container_runtime) == (
            "110", "Debian GNU/Linux 12 (bookworm)", "containerd://1.6.20")
    api = server.api(server.token)
    assert status_of(api.read_node, node) == 403, "list, not get"
    assert status_of(api.list_node, watch=True, timeout_seconds=1) == 403, "list, not watch"
    assert status_of(api.list_namespaced_pod, server.new_namespace()) == 403, "nodes only"


def test_a_pod_is_read_whole_by_name_with_the_role_and_never_one_of_another_backend(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(pod_manifest("whole", OURS, GREETING="hello"))
    server.create("theirs", THEIRS)
    pod = cluster.read_pod("whole")
    assert pod is not None and pod["metadata"]["name"] == "whole"
    assert pod["spec"]["containers"][0]["env"] == [{"name": "GREETING", "value": "hello"}]
    assert pod["status"]["phase"] == "Pending"
    assert cluster.read_pod("theirs") is None and cluster.read_pod("missing") is None
    assert cluster.api_calls["read"] == 3


def test_a_pod_of_several_containers_must_name_the_one_whose_log_is_read(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(two_containers("pair"))
    with pytest.raises(ClusterError) as unnamed:
        cluster.pod_log("pair")
    assert unnamed.value.status == 400
    assert "a container name must be specified for pod pair, choose one of: [setup agent dind]" in str(
        unnamed.value)  # fmt: skip
    with pytest.raises(ClusterError) as unknown:
        cluster.pod_log("pair", container="sidecar")
    assert unknown.value.status == 400 and "container sidecar is not valid for pod pair" in str(unknown.value)
    for container in ("setup", "agent", "dind"):  # no node yet: nobody to ask, no log (204)
        assert cluster.pod_log("pair", tail_lines=10, container=container) == ""
    assert set(cluster.api_calls) >= {"log"}


def test_the_container_is_checked_before_the_node(server: Server) -> None:
    """A pod bound to a node the cluster does not know: a bad container name is still the 400."""
    cluster = server.adapter()
    cluster.create_pod(two_containers("bound"))
    server.bind("bound", f"no-such-node-{server.namespace}")
    with pytest.raises(ClusterError) as unnamed:
        cluster.pod_log("bound")
    assert unnamed.value.status == 400
    with pytest.raises(ClusterError) as unknown_node:
        cluster.pod_log("bound", container="dind")
    assert unknown_node.value.status == 404


def test_events_name_the_container_they_are_about_and_keep_both_timestamps(server: Server) -> None:
    cluster = server.adapter()
    cluster.create_pod(two_containers("eventful"))
    event = {
        "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "eventful."},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "eventful",
                           "namespace": server.namespace, "fieldPath": "spec.containers{dind}"},
        "reason": "BackOff", "message": "Back-off restarting failed container dind", "type": "Warning",
        "count": 3, "firstTimestamp": "2030-01-01T00:00:00Z", "lastTimestamp": "2030-01-01T00:01:30Z",
        "source": {"component": "kubelet"},
    }  # fmt: skip
    server.admin.create_namespaced_event(server.namespace, event, _preload_content=False)
    [row] = cluster.pod_events("eventful")
    assert (row["field_path"], row["count"], row["type"]) == ("spec.containers{dind}", 3, "Warning")
    assert row["last_seen"] - row["first_seen"] == 90
