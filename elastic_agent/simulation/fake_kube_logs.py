"""Container logs in the fake cluster, and the checks a real cluster makes before it serves one.

A log belongs to one container of a pod. Before serving `pods/log`, kube-apiserver picks the container
(k8s.io/kubernetes v1.36.3, pkg/registry/core/pod/strategy.go: `LogLocation`, `validateContainer`): none
named and the pod has one: that one; none named and it has several: 400 "a container name must be
specified for pod P, choose one of: [a b]" (init containers first, as `podutil.VisitContainers` lists
them); a name the pod does not have: 400 "container C is not valid for pod P". A pod on no node has no
log yet (204, fake_kube.py). Then the node's kubelet looks at the container's status
(pkg/kubelet/kubelet_pods.go: `validateContainerLogStatus`) and refuses a container that has not run
yet, which kube-apiserver passes on as a 400 with the kubelet's text
(k8s.io/apiserver pkg/registry/generic/rest/response_checker.go): "container \"C\" in pod \"P\" is
waiting to start: ContainerCreating". A container the status does not list yet reads here as
ContainerCreating, the state a real kubelet reports for it from the moment it admits the pod.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from elastic_agent.simulation.fake_kube_objects import StoreError

# The kubelet's own words for the commonest waits (pkg/kubelet/images/types.go reasons).
_WAIT_WORDS = {
    "ErrImagePull": "image can't be pulled",
    "ImagePullBackOff": "trying and failing to pull image",
}


def first_container_name(pod: Mapping[str, Any]) -> str:
    apps = (pod.get("spec") or {}).get("containers") or [{}]
    return str(apps[0].get("name", ""))


def container_names(pod: Mapping[str, Any]) -> list[str]:
    """Init containers, then containers, then ephemeral ones, as the API server visits them."""
    spec = pod.get("spec") or {}
    return [str(c.get("name", "")) for key in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(key) or [] if isinstance(c, Mapping)]  # fmt: skip


def log_container(pod: Mapping[str, Any], container: str | None) -> str:
    """The container whose log is asked for, or kube-apiserver's 400."""
    name = str((pod.get("metadata") or {}).get("name", ""))
    if not container:
        apps = (pod.get("spec") or {}).get("containers") or []
        if len(apps) == 1:
            return str(apps[0].get("name", ""))
        if not apps:
            raise StoreError(400, "BadRequest", f"a container name must be specified for pod {name}")
        choices = " ".join(container_names(pod))
        message = f"a container name must be specified for pod {name}, choose one of: [{choices}]"
        raise StoreError(400, "BadRequest", message)
    if container not in container_names(pod):
        raise StoreError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    return container


def kubelet_refusal(pod: Mapping[str, Any], container: str) -> None:
    """The kubelet's 400 for a container that has not run yet (no current or previous run to read)."""
    status = pod.get("status") or {}
    found: Mapping[str, Any] = {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        found = next((s for s in status.get(key) or [] if s.get("name") == container), found)
    state, last = found.get("state") or {}, found.get("lastState") or {}
    if any(isinstance(value, Mapping) for value in (state.get("running"), state.get("terminated"),
                                                     last.get("terminated"))):  # fmt: skip
        return  # a run to read (the kubelet's checks of a terminated run's container id are left out)
    reason = str((state.get("waiting") or {}).get("reason") or "ContainerCreating")
    name = (pod.get("metadata") or {}).get("name", "")
    raise StoreError(400, "BadRequest",
                     f'container "{container}" in pod "{name}" is waiting to start: '
                     f"{_WAIT_WORDS.get(reason, reason)}")  # fmt: skip


class ContainerLogs:
    """The lines each container wrote, by pod (namespace, name) and container; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[tuple[str, str], dict[str, list[str]]] = {}

    def append(self, ns: str, pod: str, container: str, line: str) -> None:
        with self._lock:
            self._pods.setdefault((ns, pod), {}).setdefault(container, []).append(line)

    def read(self, pod: Mapping[str, Any], container: str | None, tail_lines: int | None = None, *,
             checked: bool = True) -> str:  # fmt: skip
        """The tail of a container's log after the API server's checks of the container's name and,
        when `checked`, the kubelet's of its state."""
        name = log_container(pod, container)
        if checked:
            kubelet_refusal(pod, name)
        meta = pod.get("metadata") or {}
        return self.tail(str(meta.get("namespace", "")), str(meta.get("name", "")), name, tail_lines)

    def tail(self, ns: str, pod: str, container: str, tail_lines: int | None = None) -> str:
        with self._lock:
            lines = list(self._pods.get((ns, pod), {}).get(container, []))
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        return "".join(line + "\n" for line in lines)

    def drop(self, ns: str, pod: str) -> None:
        with self._lock:
            self._pods.pop((ns, pod), None)
