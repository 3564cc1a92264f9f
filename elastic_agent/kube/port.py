"""What the pool needs from a Kubernetes cluster, independent of how it is reached.

The real adapter (`elastic_agent.kube.adapter`) implements it with the official client over HTTP and
keeps `pods()` current with list + watch; tests may use the same adapter against the fake API server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from elastic_agent.kube.pod_status import Condition, ContainerView

if TYPE_CHECKING:
    from elastic_agent.kube.outage import OutageTracker


@dataclass(frozen=True)
class PodView:
    """The parts of a pod the plugin reads, copied out of the API object (immutable snapshot)."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    resource_version: str
    created_at: float  # epoch seconds
    reason: str | None = None  # status.reason, e.g. "Evicted"
    message: str | None = None  # status.message
    deleting: bool = False  # metadata.deletionTimestamp is set
    node_name: str | None = None
    containers: tuple[str, ...] = field(default_factory=tuple)
    # What the kubelet and the scheduler say (kube/pod_status.py): init containers first.
    container_statuses: tuple[ContainerView, ...] = field(default_factory=tuple)
    scheduled: Condition | None = None  # the PodScheduled condition, None until the scheduler wrote one


class ClusterError(Exception):
    """A call to the cluster failed. `status` is the HTTP status when there was one (None: unreachable)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        # Set by a caller that has already said it once (a repeat of a refusal streak): log at DEBUG.
        self.repeated = False


class Unreachable(ClusterError):
    """No answer at all (connection refused or reset, timeout, TLS failure): part of an outage, which
    the port's `OutageTracker` reports once. Callers log it at DEBUG and retry later."""


class Conflict(ClusterError):
    """409: the object changed since the resourceVersion we sent (compare-and-swap lost)."""


class NotFound(ClusterError):
    """404: the object does not exist (any more)."""


class Forbidden(ClusterError):
    """401/403: the credentials of the cluster profile are missing, wrong or lack RBAC permissions."""


def metadata_patch(
    labels: Mapping[str, str | None] | None,
    annotations: Mapping[str, str | None] | None,
    resource_version: str | None,
) -> dict[str, Any]:
    """The JSON merge patch `patch_pod_metadata` sends: with a resourceVersion it is a compare-and-swap."""
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


PodListener = Callable[[str, PodView], None]  # (event type ADDED|MODIFIED|DELETED, pod)


class ClusterPort(Protocol):
    namespace: str
    outage: OutageTracker  # every call's outcome is reported to it (kube/outage.py)

    def start(self) -> None:
        """Begin the initial list and the watch (non-blocking)."""

    def stop(self) -> None: ...

    def wait_synced(self, timeout: float) -> bool:
        """True once the initial list has filled the cache (as client-go's `HasSynced`)."""

    def on_synced(self, callback: Callable[[], None]) -> None:
        """`callback()` once the initial list has filled the cache: at once if it has, else from the
        thread that filled it (keep it short: hand real work to a `Background`)."""

    def sync_problem(self) -> ClusterError | None:
        """Why the latest list or watch failed, as a new exception for the caller to raise; None while
        the cache is current."""

    def pods(self) -> list[PodView]:
        """This plugin's pods in this cluster, from the watched cache (no API call)."""

    def get(self, name: str) -> PodView | None:
        """One pod from the watched cache (no API call)."""

    def create_pod(self, manifest: Mapping[str, Any]) -> PodView: ...

    def patch_pod_metadata(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> PodView:
        """JSON merge patch of metadata. With `resource_version` it is a compare-and-swap: raises
        Conflict when the pod changed since. A None value removes the key."""

    def delete_pod(self, name: str) -> None:
        """Delete; a pod that is already gone is not an error."""

    def pod_events(self, name: str) -> list[dict[str, Any]]:
        """Events of one pod (for status reports): dicts with type, reason, message, count, last_seen."""

    def pod_log(self, name: str, tail_lines: int = 200, container: str | None = None) -> str:
        """The last lines of a container's log (None: the pod's only container)."""

    def read_config_map(self, name: str) -> dict[str, str] | None:
        """The data of a ConfigMap of the namespace (what Predict learned); None when there is none."""

    def write_config_map(self, name: str, data: Mapping[str, str]) -> None:
        """Replace the ConfigMap's data, creating it the first time."""

    def add_listener(self, listener: PodListener) -> None:
        """`listener(kind, pod)` is called after every change of the cache (ADDED, MODIFIED, DELETED),
        also for the port's own writes before they return; the pool's record index relies on it."""

    def retained(self) -> Mapping[str, int]:
        """Entries of what the port keeps besides the pods (for /metrics): each must stay bounded."""

    def retained_limits(self) -> Mapping[str, int]:
        """The fixed capacity of each structure in `retained`."""
