"""Session fixtures for the real node (tests/support/real_node.py): a control plane of its own with a kubelet,
containerd and kube-scheduler, and the helpers tests of real pods share.

tests/conftest.py imports these fixtures, so every module has them by name: do not import them into a
test module as well, which would give that module a node of its own, and its start would wait for the
machine lock the session's first node holds.

`real_node` is a RealNode: `real_node.plane` is its ControlPlane (admin client, client_kubeconfig(),
service_account_token(), apply_role()), `real_node.name` the node's name (127.0.0.1),
`real_node.import_image(archive)` imports an OCI archive (tests/support/node_images.py, write_oci_archive())
into the node's containerd, and `real_node.test_image` is the Debian image already imported. Pods must use
`hostNetwork: true` and `imagePullPolicy: Never` (or IfNotPresent) with an imported image.

The control plane is not the session's `real_kube`: tests there create pods that must never run (or
that tests/support/doubles/apiserver_node.py moves by hand), and a scheduler would bind them. The node
runs once per session under a machine-wide lock (two sessions on one machine take turns; the kubelet owns
the machine's pod cgroups). Like the control plane, it needs building (Go) and root (containerd): where
it cannot run, its tests are skipped with the reason on a developer's machine and fail with CI=true."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client

from tests.support import node_images
from tests.support.control_plane import Binaries, BuildError, ControlPlane
from tests.support.node_build import NodeBinaries, build, install_tools
from tests.support.real_kube_fixtures import _unavailable, real_kube_binaries
from tests.support.real_node import RealNode, machine_lock

__all__ = ["real_kube_binaries", "real_node", "real_node_binaries"]

POD_TIMEOUT_S = 60.0  # a pod runs within seconds here; a bound, not an expectation


@pytest.fixture(scope="session")
def real_node_binaries() -> NodeBinaries:
    """The built kubelet, kube-scheduler and pause (built here when `python -m tests.support.real_node build`
    has not run yet), and Debian's containerd, runc, mmdebstrap and CNI plugins."""
    if os.geteuid() != 0:
        _unavailable("the real node runs containerd and a kubelet, which need root")
    try:
        install_tools()
        return build()
    except BuildError as error:
        _unavailable(str(error))


@pytest.fixture(scope="session")
def real_node(
    real_kube_binaries: Binaries, real_node_binaries: NodeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNode]:
    """A Ready node on a control plane of its own, with the Debian test image imported; stopped, with
    everything it ran, at the end of the session."""
    image = node_images.debian_image()
    with (
        machine_lock(),
        ControlPlane.start(real_kube_binaries, tmp_path_factory.mktemp("real-node")) as plane,
        RealNode.start(plane, real_node_binaries, test_image=image) as node,
    ):
        yield node


def pod_manifest(name: str, image: str, command: list[str], **container: Any) -> dict[str, Any]:
    """A pod of one container on the host's network that is not restarted: `container` adds fields to
    the container (resources, imagePullPolicy, which is Never unless given)."""
    spec = {"name": "main", "image": image, "command": command, "imagePullPolicy": "Never", **container}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [spec],
        },
    }


def wait_for_pod(
    core: client.CoreV1Api, namespace: str, name: str, condition: Callable[[client.V1Pod], bool], what: str
) -> client.V1Pod:
    """Poll the pod until `condition` holds (bounded by POD_TIMEOUT_S); the failure names `what` and
    shows the pod's last status."""
    deadline = time.monotonic() + POD_TIMEOUT_S
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if condition(pod):
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(
                f"pod {namespace}/{name}: not {what} within {POD_TIMEOUT_S:.0f} s: {pod.status}"
            )
        time.sleep(0.2)


def pod_log(core: client.CoreV1Api, namespace: str, name: str) -> str:
    """The pod's log, as the kubelet serves it through kube-apiserver. Read raw: the client would
    otherwise parse the text as a Python literal."""
    answer = core.read_namespaced_pod_log(name, namespace, _preload_content=False)
    return str(answer.data.decode())


def waiting_reason(pod: client.V1Pod) -> str | None:
    """Why the pod's first container waits (ErrImagePull, CrashLoopBackOff, ...), or None."""
    statuses = pod.status.container_statuses or []
    waiting = statuses[0].state.waiting if statuses else None
    return None if waiting is None else str(waiting.reason)


def condition_of(pod: client.V1Pod, kind: str) -> Mapping[str, Any] | None:
    """The pod's condition of type `kind` as status, reason and message, or None."""
    for condition in pod.status.conditions or []:
        if condition.type == kind:
            return {"status": condition.status, "reason": condition.reason, "message": condition.message}
    return None
