"""What a pod's status says about its containers and its scheduling, read in one place.

The pool decides from these whether a pod that has not registered yet is broken (pool/broken.py) and
whether an agent was killed for memory under a job. The fields are those of the Kubernetes API's
`core/v1` types (staging/src/k8s.io/api/core/v1/types.go: `ContainerStatus`, `ContainerState`,
`ContainerStateWaiting`, `ContainerStateTerminated`, `PodCondition`), kept as the API names them, so
that a reason read here is the kubelet's own word (pkg/kubelet/images/types.go,
pkg/kubelet/container/sync_result.go, pkg/kubelet/kuberuntime/kuberuntime_container.go) or the
scheduler's (`PodScheduled` False, reason `Unschedulable`).

Only the parts the plugin reads are copied, as immutable values: the pod view (kube/port.PodView) is
an immutable snapshot, and a status the API server may grow need not be understood whole. A field that
is missing or of the wrong type reads as absent, never as an error: a pod is read on every watch event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Termination:
    """`ContainerStateTerminated`: why a container's (latest) run ended."""

    reason: str | None  # e.g. "OOMKilled", "Error", "Completed"
    exit_code: int | None
    message: str | None = None


@dataclass(frozen=True)
class ContainerView:
    """One `ContainerStatus`, of an init container (`init`) or of an app container."""

    name: str
    restart_count: int = 0
    waiting_reason: str | None = None  # state.waiting.reason, e.g. "ImagePullBackOff"
    waiting_message: str | None = None
    terminated: Termination | None = None  # state.terminated: the container is not running now
    last_terminated: Termination | None = None  # lastState.terminated: its previous run
    init: bool = False

    def terminations(self) -> tuple[Termination, ...]:
        """The ends this status shows, the current one first."""
        return tuple(t for t in (self.terminated, self.last_terminated) if t is not None)


@dataclass(frozen=True)
class Condition:
    """One `PodCondition` (the plugin reads `PodScheduled`)."""

    status: str  # "True", "False", "Unknown"
    reason: str | None = None  # "Unschedulable" when the scheduler found no node
    message: str | None = None


def container_views(status: Mapping[str, Any]) -> tuple[ContainerView, ...]:
    """`status.initContainerStatuses` then `status.containerStatuses`, in the API's order."""
    views = [_container(item, init=True) for item in _list(status.get("initContainerStatuses"))]
    views += [_container(item, init=False) for item in _list(status.get("containerStatuses"))]
    return tuple(view for view in views if view is not None)


def condition(status: Mapping[str, Any], kind: str) -> Condition | None:
    """The pod's condition of type `kind` (e.g. "PodScheduled"), None when it has none."""
    for item in _list(status.get("conditions")):
        if item.get("type") == kind:
            return Condition(str(item.get("status") or "Unknown"), _text(item.get("reason")),
                             _text(item.get("message")))  # fmt: skip
    return None


def _container(item: Mapping[str, Any], *, init: bool) -> ContainerView | None:
    name = item.get("name")
    if not isinstance(name, str):
        return None
    state, last = _dict(item.get("state")), _dict(item.get("lastState"))
    waiting = _dict(state.get("waiting"))
    restarts = item.get("restartCount")
    return ContainerView(
        name=name,
        restart_count=restarts if isinstance(restarts, int) and not isinstance(restarts, bool) else 0,
        waiting_reason=_text(waiting.get("reason")),
        waiting_message=_text(waiting.get("message")),
        terminated=_termination(state.get("terminated")),
        last_terminated=_termination(last.get("terminated")),
        init=init,
    )


def _termination(value: object) -> Termination | None:
    if not isinstance(value, Mapping):
        return None
    code = value.get("exitCode")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    return Termination(_text(value.get("reason")), exit_code, _text(value.get("message")))


def _list(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
