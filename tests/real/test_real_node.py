"""The real node (tests/support/real_node.py) runs pods as Kubernetes does: a kubelet, containerd and runc,
and kube-scheduler, on the real control plane. What the plugin's real-pod tests
(tests/real/test_real_pods_e2e.py) rely on: a pod that runs and fails with its exit code and log, an image
that cannot be pulled, a pod too big for the node; and a node that leaves nothing behind on the machine, also
after it was killed. Then the plugin's status reports of a pod of two containers that the node runs, and the
kubelet's refusal of a log that the fake's kubelet must match."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from elastic_agent.kube.nodes import readable_bytes, readable_cpu
from elastic_agent.simulation.fake_kube_logs import kubelet_refusal
from elastic_agent.simulation.fake_kube_nodes import node_object
from elastic_agent.simulation.fake_kube_objects import StoreError
from elastic_agent.simulation.gocd_model import ENV_KEY
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from elastic_agent.simulation.stack import Stack
from tests.support import node_cleanup
from tests.support.agent_image import AgentImage
from tests.support.live_stack import wait_until
from tests.support.node_stack import agent_image_on_node, agent_profile, node_stack
from tests.support.paths import ROOT
from tests.support.real_cluster import SERVICE_ACCOUNT
from tests.support.real_node import NOT_READY_TAINT, RealNode
from tests.support.real_node_fixtures import condition_of, pod_log, pod_manifest, wait_for_pod, waiting_reason
from tests.support.stack_helpers import pod, schedule
from tests.support.status_scene import parse, text_of

__all__ = ["agent_image_on_node"]  # a fixture, used by name


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


# ----- the plugin's status reports of a pod of two containers on the real node ---------------------

SIDECAR_SAYS = "dind sidecar listening on 2375"


def two_container_profile(stack: Stack, agent_image: str, sidecar_image: str) -> dict[str, str]:
    """A reusing profile whose pods run the stand-in agent and a sidecar, as Docker-in-Docker would sit
    beside it (a shell that says one line and waits, ending at once on SIGTERM)."""
    profile = agent_profile(stack, agent_image)
    pod = yaml.safe_load(profile["PodConfiguration"])
    pod["spec"]["containers"].append({
        "name": "dind", "image": sidecar_image, "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", f"echo {SIDECAR_SAYS}; trap 'exit 0' TERM; sleep 3600 & wait"],
    })  # fmt: skip
    profile["PodConfiguration"] = yaml.safe_dump(pod, sort_keys=False)
    return profile


def found(stack: Stack, name: str) -> dict[str, Any]:
    the_pod = pod(stack, name)
    assert the_pod is not None, f"pod {name} is gone"
    return the_pod


def report(stack: Stack, request: str, **body: Any) -> str:
    body = {"cluster_profile_properties": stack.cluster_profile(), **body}
    answer = stack.transport.send(REQUEST_PREFIX + request, encode(body))
    assert answer[0] == 200, answer
    view: str = json.loads(answer[1])["view"]
    return view


def bind_nodes_cluster_role(node: RealNode, namespace: str) -> Callable[[], None]:
    """docker/kubernetes/rbac-nodes as shipped, bound to the stack's ServiceAccount; returns its undoing."""
    rbac = client.RbacAuthorizationV1Api(node.plane.admin_api_client())
    folder = ROOT / "docker" / "kubernetes" / "rbac-nodes"
    role = yaml.safe_load((folder / "clusterrole.yaml").read_text())
    binding = yaml.safe_load((folder / "clusterrolebinding.yaml").read_text())
    binding["subjects"] = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding(binding)

    def undo() -> None:
        rbac.delete_cluster_role_binding(binding["metadata"]["name"])
        rbac.delete_cluster_role(role["metadata"]["name"])

    return undo


def container_log(node: RealNode, namespace: str, pod: str, container: str) -> str:
    """The container's log; "" while it has not started (the kubelet refuses it: 400)."""
    try:
        answer = node.core().read_namespaced_pod_log(pod, namespace, container=container,
                                                     _preload_content=False)  # fmt: skip
    except ApiException as error:
        if error.status != 400:
            raise
        return ""
    return str(answer.data.decode())


def test_the_status_reports_of_a_pod_of_two_containers_on_the_real_node(
    real_node: RealNode, agent_image_on_node: AgentImage
) -> None:
    """The agent report shows both containers as the kubelet runs them (images, pull policies, ready,
    restarts, state, command), each one's log and the kubelet's events about each, the pod's IPs,
    conditions and node, and no registration key; the job's page shows the same pod; the cluster
    report says how to see nodes, and once the shipped ClusterRole is bound lists the real node."""
    assert real_node.test_image is not None
    stack = node_stack(real_node)
    try:
        profile = two_container_profile(stack, agent_image_on_node.name, real_node.test_image.name)
        job = schedule(stack, profile, duration=3600)
        wait_until(lambda: "Building" in stack.gocd.job(job.job_id).agent_reports, 60, "the job building")
        name = stack.gocd.job(job.job_id).agent_id
        assert name is not None
        namespace = found(stack, name)["metadata"]["namespace"]
        wait_until(lambda: SIDECAR_SAYS in container_log(real_node, namespace, name, "dind"),
                   30, "the sidecar's line")  # fmt: skip
        view = report(stack, "agent-status-report", elastic_agent_id=name)
        page, text = parse(view), text_of(view)
        assert set(page.marked["data-container"]) == {"agent", "dind"}
        assert all(c["data-ready"] == "yes" for c in page.marked["data-container"].values())
        the_pod = found(stack, name)  # as the page read it: the same containers' start times
        statuses = the_pod["status"]["containerStatuses"]
        started = {s["name"]: s["state"]["running"]["startedAt"] for s in statuses}
        assert (f"agent container ready: yes Image {agent_image_on_node.name} Image pull policy IfNotPresent "
                f"State Running since {started['agent']} Restarts 0 Command the image's "
                "ENTRYPOINT") in text  # fmt: skip
        assert (f"dind container ready: yes Image {real_node.test_image.name} Image pull policy Never State "
                f"Running since {started['dind']} Restarts 0 Command /bin/sh -c") in text  # fmt: skip
        assert f"Node {real_node.name} (host IP 127.0.0.1) Pod IP 127.0.0.1" in text  # hostNetwork
        conditions = set(page.marked["data-condition"])
        assert {"Ready", "ContainersReady", "Initialized", "PodScheduled"} <= conditions
        for container in ("agent", "dind"):  # the real kubelet's words, about each container
            assert re.search(rf"Normal Created {container} Container created", text), container
            assert re.search(rf"Normal Started {container} Container started", text), container
        assert set(page.marked["data-log"]) == {"agent", "dind"}
        assert SIDECAR_SAYS in text and f"standin-agent: registered as {name}" in text
        assert "GO_EA_AUTO_REGISTER_KEY set by the plugin" in text
        keys = [e["value"] for e in the_pod["spec"]["containers"][0]["env"] if e["name"] == ENV_KEY]
        assert keys and all(key not in view for key in keys)
        assert stack.agent_api is not None and stack.agent_api.url not in view, "profile values are not shown"

        by_job = report(stack, "agent-status-report", job_identifier=job.identifier())
        assert f"Pod {name} busy This pod runs this job." in text_of(by_job)
        assert parse(by_job).marked == page.marked

        cluster = text_of(report(stack, "cluster-status-report"))
        assert "Nodes are not shown: this plugin's service account may not list them (the API answered 403)" \
            in cluster  # fmt: skip
        undo = bind_nodes_cluster_role(real_node, namespace)
        node = real_node.core().read_node(real_node.name)
        allocatable = node.status.allocatable
        as_written = json.loads(real_node.core().read_node(real_node.name, _preload_content=False).data)
        fake = node_object("fake-node-1", 0, "2030-01-01T00:00:00Z")  # the fake's nodes keep to the real's
        assert set(fake["status"]) <= set(as_written["status"])
        assert set(fake["status"]["nodeInfo"]) <= set(as_written["status"]["nodeInfo"])
        assert as_written["status"]["capacity"]["memory"].endswith("Ki"), "the kubelet counts memory in Ki"
        try:
            views: list[str] = []

            def listed() -> bool:
                views.append(report(stack, "cluster-status-report"))
                return "data-node=" in views[-1]

            wait_until(listed, 10, "the node listed")
            shown, capacity = text_of(views[-1]), node.status.capacity
            assert (f"{real_node.name} 127.0.0.1 True {readable_cpu(allocatable['cpu'])} / "
                    f"{readable_cpu(capacity['cpu'])} {readable_bytes(allocatable['memory'])} / "
                    f"{readable_bytes(capacity['memory'])} {allocatable['pods']} / {capacity['pods']} 1 "
                    f"{real_node.binaries.kubernetes_version}") in shown  # fmt: skip
        finally:
            undo()
    finally:
        stack.stop()


def test_the_log_of_a_container_that_cannot_start_is_refused_as_the_fake_refuses_it(
    real_node: RealNode,
) -> None:
    """The kubelet's 400 for a container that has not run (pkg/kubelet/kubelet_pods.go
    `validateContainerLogStatus`), passed on by kube-apiserver: the fake's kubelet says the same for the
    same container status (elastic_agent/simulation/fake_kube_logs.py `kubelet_refusal`)."""
    core, namespace = real_node.core(), fresh_namespace(real_node)
    missing = f"localhost/gocd-reuse-no-such-image:{uuid.uuid4().hex[:8]}"
    manifest = pod_manifest("nothing", missing, ["true"], imagePullPolicy="IfNotPresent")
    core.create_namespaced_pod(namespace, manifest)
    pull_failed = ("ErrImagePull", "ImagePullBackOff")
    wait_for_pod(core, namespace, "nothing", lambda p: waiting_reason(p) in pull_failed, "failing to pull")
    for _ in range(50):  # the reason flips between the two: compare with a status that held throughout
        before = json.loads(core.read_namespaced_pod("nothing", namespace, _preload_content=False).data)
        with pytest.raises(ApiException) as real:
            core.read_namespaced_pod_log("nothing", namespace, container="main")
        after = json.loads(core.read_namespaced_pod("nothing", namespace, _preload_content=False).data)
        if before["status"]["containerStatuses"] == after["status"]["containerStatuses"]:
            break
    with pytest.raises(StoreError) as fake:
        kubelet_refusal(before, "main")
    assert real.value.status == fake.value.code == 400
    assert json.loads(real.value.body)["message"] == fake.value.message, before["status"]["containerStatuses"]
