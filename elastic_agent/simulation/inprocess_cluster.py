"""A `ClusterPort` over the fake cluster's store, in process: no HTTP, no watch thread, no copies to spare.

The pool sees exactly the contract of `elastic_agent.kube.port`: `pods()`/`get()` read a cache that the
store's listener keeps current (synchronously, so a write is visible the moment it returns, as the real
adapter's read-your-writes gives), writes go to the store, a merge patch carrying a resourceVersion is a
compare-and-swap that raises `Conflict`.

`SimulationKubeStore` is the store for long simulations: the same semantics as `FakeKubeStore`, but
events are indexed per pod (the base class scans every event of the namespace to count repeats) and
dropped with their pod, logs too, and one immutable snapshot per change is shared by all listeners
instead of one deep copy each. Stored pods are never mutated in place, so sharing is safe for readers.
One difference is kept on purpose: a pod is removed in one change (DELETED), where the base class (as
kube-apiserver) first writes the deletion (MODIFIED): the simulations' results for a seed stay as they
were.

Pod names: `build_pod` draws a random suffix per pod. For results that are identical for a seed, the
port renames each new pod to `<prefix>-<counter>` (and its GO_EA agent id with it) before creating it;
names are opaque to the pool, so decisions do not change, only become reproducible.

The first list: a real informer's initial list takes a moment, and nothing of the cluster is known
until it has arrived (client-go's `HasSynced`). Given `lists`, the port's `start()` leaves its list
there and the driver answers it at the end of the instant (`answer_lists`), so requests in the instant a
pool is created that may not wait (should-assign-work, job-completion) see a cache that has not synced,
as they would in production; one that waits for the list (create-agent) gets it. Changes in the store
before the list are not heard: the watch starts with it.

Outages: setting `unreachable` makes every call raise `Unreachable` and freezes the cache, as a watch
that cannot reach its server would; clearing it lists the store again. Calls report to the port's
`OutageTracker` as the real adapter's do, so an outage in virtual time is logged and shown in GoCD as in
production.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from elastic_agent.clock import Clock
from elastic_agent.kube.events import event_rows
from elastic_agent.kube.nodes import NodeView, node_view
from elastic_agent.kube.outage import OutageTracker
from elastic_agent.kube.pod_cache import pod_view
from elastic_agent.kube.port import (
    ClusterError,
    Conflict,
    NotFound,
    PodListener,
    PodView,
    Unreachable,
    metadata_patch,
)
from elastic_agent.simulation.fake_kube_configmaps import FakeConfigMaps
from elastic_agent.simulation.fake_kube_objects import merge_patch, pod_event
from elastic_agent.simulation.fake_kube_store import (
    Change,
    FakeKubeStore,
    Obj,
    StoreError,
    check_metadata_update,
    check_resource_version,
    rfc3339,
)

AGENT_ID_VAR = "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID"


def json_copy(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars): several times faster than deepcopy."""
    kind = type(obj)
    if kind is dict:
        return {key: json_copy(value) for key, value in obj.items()}
    if kind is list:
        return [json_copy(value) for value in obj]
    return obj


class SimulationKubeStore(FakeKubeStore):
    """`FakeKubeStore` tuned for 100,000-pod simulations (see the module's docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._pod_events: dict[tuple[str, str], dict[tuple[str, str, str], Obj]] = {}
        self.keep_logs = False

    # Structural sharing: a stored pod is never changed in place, so a new version copies only what it
    # changes (metadata or status) and shares the rest (the spec) with the version before.

    def _copy_in(self, body: Mapping[str, Any]) -> Obj:
        return json_copy(dict(body))

    def _share(self, pod: Obj) -> Obj:
        # Shared, not copied: in a simulation the only callers (the in-process port, the kubelet) read.
        return pod

    def _new_uid(self) -> str:
        return f"uid-{self._rv + 1}"  # deterministic for a seed, unlike uuid4

    def get_pod(self, ns: str, name: str) -> Obj:
        with self._txn():
            self._tick_locked()
            return json_copy(self._pod(ns, name))  # a copy still: the caller (the kubelet) may change it

    def patch_pod(self, ns: str, name: str, patch: Any, content_type: str) -> Obj:
        if "json-patch" in content_type or not isinstance(patch, dict) or set(patch) - {"metadata"}:
            return super().patch_pod(ns, name, patch, content_type)
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            return self._replace(ns, name, current, metadata_patched(name, current, patch))

    def update_status(self, ns: str, name: str, uid: str | None, status: Mapping[str, Any]) -> Obj | None:
        with self._txn():
            current = self._pods.get(ns, {}).get(name)
            if current is None or (uid is not None and current["metadata"]["uid"] != uid):
                return None
            return self._replace(ns, name, current, status_updated(current, status))

    def _replace(self, ns: str, name: str, current: Obj, updated: Obj) -> Obj:
        updated["metadata"]["resourceVersion"] = str(self._bump())
        self._pods[ns][name] = updated
        self._record("MODIFIED", ns, updated, current)
        # Shared, not copied: in a simulation the only callers (the in-process port, the kubelet) read.
        return updated

    def _remove_locked(self, ns: str, name: str, now: float) -> Obj:
        current = self._pods[ns].pop(name)
        gone = removed(current, now, self._bump())
        self._record("DELETED", ns, gone, current)
        self._pod_events.pop((ns, name), None)
        self.logs.drop(ns, name)
        return gone

    @staticmethod
    def _notify(changes: Iterable[Change], listeners: list[Callable[[str, Obj], None]]) -> None:
        # One snapshot for every listener: the change's object is never mutated after it is recorded.
        for change in changes:
            for listener in listeners:
                listener(change.type, change.obj)

    def add_event(self, ns: str, pod_name: str, reason: str, message: str, type_: str = "Normal",
                  field_path: str = "") -> None:  # fmt: skip
        with self._lock:
            now = rfc3339(self.clock.now())
            events = self._pod_events.setdefault((ns, pod_name), {})
            event = events.get((field_path, reason, message))
            if event is not None:
                event["count"] += 1
                event["lastTimestamp"] = now
                return
            metadata = {"name": f"{pod_name}.{len(events)}"}
            events[(field_path, reason, message)] = pod_event(ns, pod_name, reason, message, type_, now,
                                                              metadata, field_path)  # fmt: skip

    def list_events(self, ns: str, field_selector: str | None = None) -> tuple[list[Obj], int]:
        with self._lock:
            name = (field_selector or "").partition("involvedObject.name=")[2].split(",")[0]
            groups = (
                [self._pod_events.get((ns, name), {})]
                if name
                else [events for (space, _), events in self._pod_events.items() if space == ns]
            )
            return [json_copy(event) for group in groups for event in group.values()], self._rv

    def append_log(self, ns: str, pod_name: str, line: str, container: str | None = None) -> None:
        if self.keep_logs:
            super().append_log(ns, pod_name, line, container)

    def deleting(self) -> bool:
        """Whether a graceful deletion waits for the store's next tick (any later store call)."""
        with self._lock:
            return bool(self._deletions)


# A pod's next version as the simulations' stores make it (SimulationKubeStore here, the policy engine's
# MemoryPods): a new object that shares with the one before every part it does not change.


def metadata_patched(name: str, current: Obj, patch: Mapping[str, Any]) -> Obj:
    """`current` after a merge patch of its metadata, by kube-apiserver's rules: a patch naming another
    resourceVersion is a 409, and the metadata is checked as an update of it."""
    check_resource_version(name, current, (patch.get("metadata") or {}).get("resourceVersion"))
    metadata = merge_patch(current["metadata"], patch.get("metadata") or {})
    check_metadata_update(name, current["metadata"], metadata)
    return {**current, "metadata": metadata}


def status_updated(current: Obj, status: Mapping[str, Any]) -> Obj:
    """`current` bound to `status["nodeName"]` if given, the rest merged into its status (PodHost's
    update_status)."""
    status = dict(status)
    node = status.pop("nodeName", None)
    updated = {**current, "metadata": dict(current["metadata"])}
    if node:
        updated["spec"] = {**current["spec"], "nodeName": node}
    updated["status"] = merge_patch(current.get("status") or {}, status)
    return updated


def removed(current: Obj, now: float, version: int) -> Obj:
    """The last version of a pod deleted at once (no grace period): the DELETED event's object."""
    metadata = dict(current["metadata"])
    metadata.setdefault("deletionTimestamp", rfc3339(now))
    metadata.setdefault("deletionGracePeriodSeconds", 0)
    metadata["resourceVersion"] = str(version)
    return {**current, "metadata": metadata}


class PodStore(Protocol):
    """What the port calls: a `FakeKubeStore`, or the policy engine's `MemoryPods` (memory_pods.py)."""

    clock: Clock
    config_maps: FakeConfigMaps

    def add_listener(self, listener: Callable[[str, Obj], None]) -> None: ...

    def list_pods(
        self, ns: str | None, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[Obj], int]: ...

    def create_pod(self, ns: str, body: Mapping[str, Any]) -> Obj: ...

    def patch_pod(self, ns: str, name: str, patch: Any, content_type: str) -> Obj: ...

    def delete_pod(self, ns: str, name: str) -> Obj: ...

    def list_events(self, ns: str, field_selector: str | None = None) -> tuple[list[Obj], int]: ...

    def get_log(
        self, ns: str, pod_name: str, tail_lines: int | None = None, container: str | None = None
    ) -> str: ...

    def list_nodes(self) -> list[Obj]: ...


class InProcessCluster:
    """`ClusterPort` for one namespace of a `PodStore`, watching only pods that carry `selector`."""

    def __init__(
        self,
        store: PodStore,
        namespace: str,
        selector: Mapping[str, str],
        *,
        rename: bool = True,
        name_prefix: str = "agent",
        counter: Callable[[], int] | None = None,
        clock: Clock | None = None,
        lists: list[InProcessCluster] | None = None,
    ) -> None:
        self.namespace = namespace
        self.api_calls: dict[str, int] = {}
        self.outage = OutageTracker(f"in-process://{namespace}", clock or store.clock)
        self._unreachable = False
        self._store = store
        self._selector = dict(selector)
        self._selector_items = tuple(self._selector.items())
        self._cache: dict[str, PodView] = {}
        # Each cached pod's spec and status objects, as the store shares them between versions.
        self._bodies: dict[str, tuple[object, object]] = {}
        self._listeners: list[PodListener] = []
        self._rename = rename
        self._name_prefix = name_prefix
        self._counter = counter or itertools.count(1).__next__
        self._started = self._synced = False
        self._lists = lists
        self._on_synced: list[Callable[[], None]] = []
        store.add_listener(self._on_change)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._lists is None:
            self.list_now()
        else:
            self._lists.append(self)

    def list_now(self) -> None:
        """The first list arrives: the cache fills, and whoever waited for it is told."""
        if self._synced:
            return
        if self._unreachable:
            self.outage.failed("connection refused")  # the list comes when it answers again (`unreachable`)
            return
        if self._lists is not None and self in self._lists:
            self._lists.remove(self)
        self._count("list")
        items, _ = self._store.list_pods(self.namespace)
        self._synced = True
        for item in items:
            self._on_change("ADDED", item)
        callbacks, self._on_synced = self._on_synced, []
        for callback in callbacks:
            callback()

    def stop(self) -> None:
        pass

    def wait_synced(self, timeout: float) -> bool:
        """A caller that may wait (create-agent's bounded wait) gets the list, as it would in production
        from a cluster that answers: the list takes milliseconds, the wait allows seconds. One that may
        not (timeout 0) sees the cache as it is."""
        if not self._synced and self._started and timeout > 0:
            self.list_now()
        return self._synced

    def on_synced(self, callback: Callable[[], None]) -> None:
        if self._synced:
            callback()
        else:
            self._on_synced.append(callback)

    def sync_problem(self) -> ClusterError | None:
        return self.outage.problem()  # otherwise the store is in process: the cache is always current

    @property
    def unreachable(self) -> bool:
        return self._unreachable

    @unreachable.setter
    def unreachable(self, unreachable: bool) -> None:
        if unreachable == self._unreachable:
            return
        self._unreachable = unreachable
        if unreachable:
            self.outage.failed("connection refused")  # the watch notices at once
            return
        if not self._synced:
            if self._started:
                self.list_now()
            return
        self._count("list")  # the watch lists again: what changed meanwhile is heard now
        items, _ = self._store.list_pods(self.namespace)
        listed = {item["metadata"]["name"] for item in items}
        for item in items:
            self._on_change("MODIFIED", item)
        for name in [name for name in self._cache if name not in listed]:
            self._bodies.pop(name, None)
            self._tell("DELETED", self._cache.pop(name))

    def add_listener(self, listener: PodListener) -> None:
        self._listeners.append(listener)

    def retained(self) -> dict[str, int]:
        return {}  # the store is the simulator's, and keeps no tombstones of its own

    def retained_limits(self) -> dict[str, int]:
        return {}

    # -- reads (cache only) --------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        return sorted(self._cache.values(), key=_name) if not self._rename else list(self._cache.values())

    def get(self, name: str) -> PodView | None:
        return self._cache.get(name)

    # -- writes --------------------------------------------------------------------------------------

    def create_pod(self, manifest: Mapping[str, Any]) -> PodView:
        body = json_copy(dict(manifest))
        meta = body.setdefault("metadata", {})
        labels = meta.setdefault("labels", {})
        for key, value in self._selector_items:
            if labels.setdefault(key, value) != value:
                raise ValueError(f"the pod's label {key}={labels[key]} contradicts this cluster's {value}")
        if self._rename:
            _rename(body, f"{self._name_prefix}-{self._counter():06d}")
        self._count("create")
        try:
            created = self._store.create_pod(self.namespace, body)
        except StoreError as error:
            raise _cluster_error(error, "create") from None
        return self._cache.get(created["metadata"]["name"]) or pod_view(created)

    def patch_pod_metadata(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> PodView:
        patch = metadata_patch(labels, annotations, resource_version)
        self._count("patch")
        try:
            patched = self._store.patch_pod(self.namespace, name, patch, "application/merge-patch+json")
        except StoreError as error:
            raise _cluster_error(error, "patch") from None
        return self._cache.get(name) or pod_view(patched)

    def delete_pod(self, name: str) -> None:
        self._count("delete")
        try:
            self._store.delete_pod(self.namespace, name)
        except StoreError as error:
            if error.code != 404:
                raise _cluster_error(error, "delete") from None
            self._bodies.pop(name, None)
            gone = self._cache.pop(name, None)
            if gone is not None:
                self._tell("DELETED", gone)

    def pod_events(self, name: str) -> list[dict[str, Any]]:
        self._count("events")
        items, _ = self._store.list_events(self.namespace, f"involvedObject.name={name}")
        return event_rows(items)

    def pod_log(self, name: str, tail_lines: int = 200, container: str | None = None) -> str:
        self._count("log")
        try:
            return self._store.get_log(self.namespace, name, tail_lines, container)
        except StoreError as error:
            raise _cluster_error(error, "log") from None

    def read_pod(self, name: str) -> dict[str, Any] | None:
        self._count("read")
        ours = ",".join(f"{k}={v}" for k, v in self._selector_items)
        items, _ = self._store.list_pods(self.namespace, ours, f"metadata.name={name}")
        return json_copy(items[0]) if items else None

    def nodes(self) -> list[NodeView]:
        self._count("nodes")
        return [node_view(item) for item in self._store.list_nodes()]

    def read_config_map(self, name: str) -> dict[str, str] | None:
        self._count("configmaps")
        try:
            return dict(self._store.config_maps.get(self.namespace, name).get("data") or {})
        except StoreError as error:
            if error.code == 404:
                return None
            raise _cluster_error(error, "configmaps") from None

    def write_config_map(self, name: str, data: Mapping[str, str]) -> None:
        self._count("configmaps")
        body = {"metadata": {"name": name}, "data": dict(data)}
        maps = self._store.config_maps
        try:
            try:
                maps.replace(self.namespace, name, body)
            except StoreError as error:
                if error.code != 404:
                    raise
                maps.create(self.namespace, body)
        except StoreError as error:
            raise _cluster_error(error, "configmaps") from None

    # -- the cache -----------------------------------------------------------------------------------

    def _count(self, verb: str) -> None:
        """Every call comes here first: counted, and refused while the cluster is unreachable."""
        self.api_calls[verb] = self.api_calls.get(verb, 0) + 1
        if self._unreachable:
            self.outage.failed("connection refused")
            raise Unreachable(f"cannot reach the fake cluster ({verb}): connection refused")
        self.outage.reached()

    def _on_change(self, kind: str, obj: Obj) -> None:
        if self._unreachable or not self._synced:
            return  # no watch: the change is heard at the list (after the outage, or the first)
        meta = obj["metadata"]
        if meta.get("namespace") != self.namespace:
            return
        name = meta["name"]
        pod_labels = meta.get("labels") or {}
        ours = all(pod_labels.get(key) == value for key, value in self._selector_items)
        if kind == "DELETED" or not ours:
            self._bodies.pop(name, None)
            gone = self._cache.pop(name, None)
            if gone is not None:
                self._tell("DELETED", gone)
            return
        before = self._cache.get(name)
        body = (obj.get("spec"), obj.get("status"))
        kept = self._bodies.get(name)
        same = before is not None and kept is not None and kept[0] is body[0] and kept[1] is body[1]
        view = pod_view(obj, before if same else None)
        self._bodies[name] = body
        self._cache[name] = view
        self._tell("MODIFIED" if before is not None else "ADDED", view)

    def _tell(self, kind: str, view: PodView) -> None:
        for listener in self._listeners:
            listener(kind, view)


def _name(view: PodView) -> str:
    return view.name


def _rename(body: dict[str, Any], name: str) -> None:
    meta = body["metadata"]
    old = meta.get("name")
    meta["name"] = name
    for container in (body.get("spec") or {}).get("containers") or []:
        for item in container.get("env") or []:
            if item.get("name") == AGENT_ID_VAR and item.get("value") == old:
                item["value"] = name


def _cluster_error(error: StoreError, verb: str) -> ClusterError:
    message = f"the fake cluster answered {error.code} to {verb}: {error.message}"
    if error.code == 409 and error.reason == "Conflict":
        return Conflict(message, 409)
    if error.code == 404:
        return NotFound(message, 404)
    return ClusterError(message, error.code)


def store_cluster_factory(
    store: PodStore, counter: Callable[[], int] | None = None, **options: Any
) -> Callable[[Any, Any, Clock], InProcessCluster]:
    """A `cluster_factory` for `build_backend`/`Backend`: every cluster profile maps to its namespace
    of `store`, selecting the backend's own pods. `counter` numbers the pods (shared by the backends
    that follow each other on one store, so that names stay unique across restarts)."""
    counter = counter or itertools.count(1).__next__

    def factory(profile: Any, identity: Any, clock: Clock) -> InProcessCluster:
        return InProcessCluster(
            store, profile.namespace, identity.selector(), counter=counter, clock=clock, **options
        )

    return factory


def answer_lists(lists: list[InProcessCluster]) -> bool:
    """Answer the first lists on their way (see the module's docstring); True if there was one."""
    answered = bool(lists)
    while lists:
        lists.pop(0).list_now()
    return answered
