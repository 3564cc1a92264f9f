"""The real node (tests/real_node.py) runs pods as Kubernetes does: a kubelet, containerd and runc, and
kube-scheduler, on the real control plane. What the plugin's real-pod tests (tests/test_real_pods_e2e.py)
rely on: a pod that runs and fails with its exit code and log, an image that cannot be pulled, a pod too
big for the node; and a node that leaves nothing behind on the machine, also after it was killed."""

from __future__ import annotations

import uuid

from kubernetes import client

from tests import node_cleanup
from tests.real_node import NOT_READY_TAINT, RealNode
from tests.real_node_fixtures import condition_of, pod_log, pod_manifest, wait_for_pod, waiting_reason


def fresh_namespace(node: RealNode) -> str:
    name = f"n-{uuid.uuid4().hex[:8]}"
    node.plane.create_namespace(name)
    return name


def sleeping_pod(node: RealNode, core: client.CoreV1Api, namespace: str) -> client.V1Pod:
    assert node.test_image is not None
    core.create_namespaced_pod(namespace, pod_manifest("sleeper", node.test_image.name, ["sleep", "3600"]))
    return wait_for_pod(core, namespace, "sleeper", lambda pod: pod.status.phase == "Running", "Running")


def test_the_node_is_ready_schedulable_and_runs_the_pinned_versions(real_node: RealNode) -> None:
    node = real_node.core().read_node(real_node.name)
    ready = [condition for condition in node.status.conditions if condition.type == "Ready"]
    assert ready and ready[0].status == "True", ready
    assert NOT_READY_TAINT not in {taint.key for taint in node.spec.taints or []}
    assert node.status.node_info.kubelet_version == real_node.binaries.kubernetes_version
    assert node.status.node_info.container_runtime_version.startswith("containerd://1.6.")
    assert {(address.type, address.address) for address in node.status.addresses} >= {
        ("InternalIP", "127.0.0.1")
    }


def test_a_pod_that_prints_hi_and_exits_3_fails_with_exit_code_3_and_its_log_reads_hi(
    real_node: RealNode,
) -> None:
    core, namespace = real_node.core(), fresh_namespace(real_node)
    assert real_node.test_image is not None
    core.create_namespaced_pod(
        namespace, pod_manifest("hi", real_node.test_image.name, ["/bin/sh", "-c", "echo hi; exit 3"])
    )
    pod = wait_for_pod(
        core, namespace, "hi", lambda pod: pod.status.phase in ("Succeeded", "Failed"), "ended"
    )
    assert pod.status.phase == "Failed"
    assert pod.spec.node_name == real_node.name  # bound by the scheduler
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated is not None and terminated.exit_code == 3, pod.status.container_statuses
    assert pod_log(core, namespace, "hi") == "hi\n"


def test_a_pod_whose_image_does_not_exist_waits_in_err_image_pull(real_node: RealNode) -> None:
    """A registry on localhost that does not listen: the pull fails at once, and stays on loopback."""
    core, namespace = real_node.core(), fresh_namespace(real_node)
    missing = f"localhost/gocd-reuse-no-such-image:{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod(
        namespace, pod_manifest("nothing", missing, ["true"], imagePullPolicy="IfNotPresent")
    )
    pull_failed = ("ErrImagePull", "ImagePullBackOff")  # the first failure, then the wait before a retry
    pod = wait_for_pod(
        core,
        namespace,
        "nothing",
        lambda pod: waiting_reason(pod) in pull_failed,
        "waiting in ErrImagePull or ImagePullBackOff",
    )
    assert missing in pod.status.container_statuses[0].state.waiting.message
    assert pod.status.phase == "Pending"


def test_a_pod_asking_for_1000_cpus_is_pending_and_unschedulable(real_node: RealNode) -> None:
    core, namespace = real_node.core(), fresh_namespace(real_node)
    assert real_node.test_image is not None
    core.create_namespaced_pod(
        namespace,
        pod_manifest("huge", real_node.test_image.name, ["true"], resources={"requests": {"cpu": "1000"}}),
    )
    pod = wait_for_pod(
        core,
        namespace,
        "huge",
        lambda pod: condition_of(pod, "PodScheduled") is not None,
        "considered by the scheduler",
    )
    scheduled = condition_of(pod, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert "Insufficient cpu" in scheduled["message"]
    assert pod.status.phase == "Pending" and pod.spec.node_name is None


def test_stopping_the_node_leaves_no_process_mount_cgroup_or_file_behind(real_node: RealNode) -> None:
    core, namespace = real_node.core(), fresh_namespace(real_node)
    sleeping_pod(real_node, core, namespace)
    pids = node_cleanup.pod_processes() | set(real_node.daemon_pids().values())
    sockets = node_cleanup.shim_sockets(real_node.layout)
    assert node_cleanup.pod_processes(), "the running pod's processes are in the kubepods cgroups"
    assert sockets, "the pod's shim listens on a socket in /run/containerd/s"
    try:
        real_node.stop()
        assert node_cleanup.leftovers(real_node.layout, pids) == []
        assert not real_node.layout.root.exists()
        assert not any(socket.exists() for socket in sockets)
    finally:
        core.delete_namespaced_pod("sleeper", namespace, grace_period_seconds=0)  # else the next node runs it
        real_node.start_again()


def test_a_node_killed_with_sigkill_leaves_its_pods_running_and_the_next_start_removes_them(
    real_node: RealNode,
) -> None:
    core, namespace = real_node.core(), fresh_namespace(real_node)
    sleeping_pod(real_node, core, namespace)
    containers = node_cleanup.pod_processes()
    daemons = set(real_node.daemon_pids().values())
    real_node.kill()
    try:
        assert not any(node_cleanup.is_alive(pid) for pid in daemons)
        assert containers and all(node_cleanup.is_alive(pid) for pid in containers), "a crash leaves pods"
        assert any(entry.startswith("mount ") for entry in node_cleanup.leftovers(real_node.layout))
    finally:
        core.delete_namespaced_pod("sleeper", namespace, grace_period_seconds=0)
        real_node.start_again()
    assert not any(node_cleanup.is_alive(pid) for pid in containers)
    assert node_cleanup.pod_processes().isdisjoint(containers)
