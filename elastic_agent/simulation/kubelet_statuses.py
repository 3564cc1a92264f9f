"""The pod status pieces the simulated kubelet writes, shaped as the real kubelet writes them.

Field names and required fields are those of `core/v1` (staging/src/k8s.io/api/core/v1/types.go:
`ContainerStatus` needs name, image, imageID, ready and restartCount, or the official client refuses to
read the pod). The words are the real kubelet's and scheduler's: the waiting reasons of
pkg/kubelet/images/types.go and pkg/kubelet/container/sync_result.go, the messages of
pkg/kubelet/images/image_manager.go (`EnsureImageExists`), of pkg/kubelet/kuberuntime/
kuberuntime_manager.go (`doBackOff`: "back-off 10s restarting failed container=... pod=...") and the
scheduler's `PodScheduled` condition with reason `Unschedulable`. Kept apart from kubelet.py, which
decides when what happens, so that each stays readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_agent.simulation.fake_kube_store import Obj

# What a failed pull of a missing image says through containerd (the registry's "not found").
PULL_NOT_FOUND = "rpc error: code = NotFound desc = failed to pull and unpack image: not found"
CONFIG_MISSING = 'secret "agent-settings" not found'
INSUFFICIENT = (
    "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No "
    "preemption victims found for incoming pod."
)
OOM_EXIT_CODE = 137  # SIGKILL from the kernel's OOM killer: 128 + 9


def first_container(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    first = containers[0]
    return first if isinstance(first, dict) else {}


def container_status(
    container: Mapping[str, Any], ready: bool, state: Obj, restarts: int = 0, last: Obj | None = None
) -> Obj:
    image = str(container.get("image", "unknown"))
    status: Obj = {"name": container.get("name", "agent"), "image": image,
                   "imageID": "" if not ready else f"docker-pullable://{image}", "ready": ready,
                   "restartCount": restarts, "started": ready, "state": state}  # fmt: skip
    if last is not None:
        status["lastState"] = last
    return status


def running_status(containers: list[dict[str, Any]], at: str, pod_ip: str, host_ip: str) -> Obj:
    """The status of a pod whose containers all started `at` and are ready; its conditions as the
    kubelet writes them (pkg/kubelet/kubelet_pods.go `generateAPIPodStatus`: its own four, then
    PodScheduled)."""
    kinds = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    hosts = {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}]} if host_ip else {}  # must be an IP
    return {
        "phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": at, **hosts,
        "conditions": [{"type": k, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}
                       for k in kinds],
        "containerStatuses": [container_status(c, True, {"running": {"startedAt": at}}) for c in containers],
    }  # fmt: skip


def waiting(reason: str, message: str) -> Obj:
    return {"waiting": {"reason": reason, "message": message}}


def terminated(reason: str, exit_code: int, started: str, finished: str) -> Obj:
    return {"terminated": {"reason": reason, "exitCode": exit_code, "startedAt": started,
                           "finishedAt": finished}}  # fmt: skip


def pod_full_name(pod: Mapping[str, Any]) -> str:
    """As the kubelet's `format.Pod` writes a pod: name_namespace(uid)."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"


def invalid_image_message(image: str) -> str:
    parsed = f'couldn\'t parse image reference "{image}": invalid reference format'
    return f'Failed to apply default image tag "{image}": {parsed}'


def crash_loop_message(backoff_s: float, container: str, pod: Mapping[str, Any]) -> str:
    backoff = go_duration(backoff_s)
    return f"back-off {backoff} restarting failed container={container} pod={pod_full_name(pod)}"


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration prints it (10s, 1m20s, 5m0s)."""
    whole = int(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def unschedulable(message: str, now: str) -> Obj:
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastTransitionTime": now, "lastProbeTime": None}  # fmt: skip


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    """Literal `value`s of the container's env; `valueFrom` needs a real kubelet and is left out."""
    return {
        str(item["name"]): str(item.get("value", ""))
        for item in container.get("env") or []
        if isinstance(item, dict) and "name" in item and "valueFrom" not in item
    }
