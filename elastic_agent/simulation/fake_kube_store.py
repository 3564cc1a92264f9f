"""The in-memory model behind the fake Kubernetes API server (`fake_kube`).

It holds what the plugin touches: pods per namespace, their events and logs, a few nodes. Every change
takes the next value of one integer resourceVersion shared by all objects (as etcd's revision is), and
is kept in a bounded history so a watch can resume from a resourceVersion, or learn that it is too old
(410 Gone) once the history has moved past it. Listeners (the simulated kubelet) hear every change.

Objects are plain JSON-shaped dicts; callers always get deep copies, never the stored ones.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from elastic_agent.clock import Clock, SystemClock
from elastic_agent.simulation.fake_kube_objects import (
    Obj,
    StoreError,
    json_patch,
    merge_patch,
    parse_field_selector,
    parse_label_selector,
    selected,
)

__all__ = ["Change", "FakeKubeStore", "Obj", "StoreError", "parse_label_selector", "rfc3339"]

StoreListener = Callable[[str, Obj], None]  # (ADDED|MODIFIED|DELETED, pod copy)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------------
# The store


@dataclass(frozen=True)
class Change:
    resource_version: int
    type: str  # ADDED | MODIFIED | DELETED
    namespace: str
    obj: Obj  # the object after the change (for DELETED: its last state, with the deletion's version)
    previous: Obj | None  # the object before (None for ADDED): lets a watch see selector transitions


@dataclass
class _Deletion:
    namespace: str
    name: str
    uid: str
    at: float  # clock time at which a graceful deletion completes


def check_resource_version(name: str, current: Obj, wanted: Any) -> None:
    """Kubernetes' compare-and-swap: a patch naming another resourceVersion is refused with 409."""
    if wanted is not None and str(wanted) != current["metadata"]["resourceVersion"]:
        raise StoreError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
        )


def keep_immutable(current: Obj, updated: Obj) -> None:
    """A patch never changes a pod's identity or its deletion (metadata fields)."""
    for immutable in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
        if immutable in current:
            updated[immutable] = current[immutable]


@dataclass
class FakeKubeStore:
    """Thread-safe model of the cluster's API objects. `default_grace_seconds` > 0 makes deletions
    graceful: the pod keeps running with deletionTimestamp set until the grace period (on the clock)
    has passed and `tick()` (called by the server and the kubelet) removes it."""

    clock: Clock = field(default_factory=SystemClock)
    history_limit: int = 1000
    default_grace_seconds: float = 0.0
    nodes: list[str] = field(default_factory=lambda: ["fake-node-1", "fake-node-2", "fake-node-3"])

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._rv = 0
        self._pods: dict[str, dict[str, Obj]] = {}
        self._events: dict[str, list[Obj]] = {}
        self._logs: dict[tuple[str, str], list[str]] = {}
        self._history: deque[Change] = deque()
        self._history_floor = 0  # every change with a resourceVersion above this is in the history
        self._pending_notify: list[Change] = []
        self._deletions: list[_Deletion] = []
        self._listeners: list[StoreListener] = []

    # -- bookkeeping ---------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def add_listener(self, listener: StoreListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    @contextmanager
    def _txn(self) -> Iterator[None]:
        """Hold the lock for a change, then tell listeners about what changed once it is released:
        a listener (the kubelet) may write back into the store from another thread."""
        try:
            with self._lock:
                yield
        finally:
            with self._lock:
                pending, self._pending_notify = self._pending_notify, []
                listeners = list(self._listeners)
            self._notify(pending, listeners)

    def _record(self, kind: str, ns: str, obj: Obj, previous: Obj | None) -> None:
        change = Change(int(obj["metadata"]["resourceVersion"]), kind, ns, obj, previous)
        self._history.append(change)
        while len(self._history) > self.history_limit:
            self._history_floor = self._history.popleft().resource_version
        self._pending_notify.append(change)
        self._changed.notify_all()

    @staticmethod
    def _notify(changes: Iterable[Change], listeners: list[StoreListener]) -> None:
        for change in changes:
            for listener in listeners:
                listener(change.type, copy.deepcopy(change.obj))

    def _pod(self, ns: str, name: str) -> Obj:
        pod = self._pods.get(ns, {}).get(name)
        if pod is None:
            raise StoreError(404, "NotFound", f'pods "{name}" not found')
        return pod

    # -- pods ----------------------------------------------------------------------------------------

    # Hooks for a store that shares unchanged parts of pods instead of copying them (the simulator's).
    def _copy_in(self, body: Mapping[str, Any]) -> Obj:
        return copy.deepcopy(dict(body))

    def _share(self, pod: Obj) -> Obj:
        """What leaves the store: a copy, so no caller can change a stored pod."""
        return copy.deepcopy(pod)

    def _new_uid(self) -> str:
        return str(uuid.uuid4())

    def create_pod(self, ns: str, body: Mapping[str, Any]) -> Obj:
        pod = self._copy_in(body)
        meta = pod.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise StoreError(422, "Invalid", "Pod is invalid: metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if meta.get("namespace", ns) != ns:
            raise StoreError(400, "BadRequest", "the namespace of the object does not match the request")
        with self._txn():
            self._tick_locked()
            name = meta["name"]
            if name in self._pods.get(ns, {}):
                raise StoreError(409, "AlreadyExists", f'pods "{name}" already exists')
            meta.update(
                namespace=ns,
                uid=self._new_uid(),
                creationTimestamp=rfc3339(self.clock.now()),
                resourceVersion=str(self._bump()),
            )
            pod["apiVersion"], pod["kind"] = "v1", "Pod"
            pod.setdefault("spec", {})
            pod["status"] = {"phase": "Pending"}
            self._pods.setdefault(ns, {})[name] = pod
            self._record("ADDED", ns, self._share(pod), None)
            return self._share(pod)

    def get_pod(self, ns: str, name: str) -> Obj:
        with self._txn():
            self._tick_locked()
            return copy.deepcopy(self._pod(ns, name))

    def list_pods(
        self, ns: str | None, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[Obj], int]:
        """Matching pods (all namespaces when `ns` is None) and the resourceVersion of the list."""
        labels, fields = parse_label_selector(label_selector), parse_field_selector(field_selector)
        with self._txn():
            self._tick_locked()
            spaces = [ns] if ns is not None else sorted(self._pods)
            items = [
                copy.deepcopy(pod)
                for space in spaces
                for _, pod in sorted(self._pods.get(space, {}).items())
                if selected(pod, labels, fields)
            ]
            return items, self._rv

    def patch_pod(self, ns: str, name: str, patch: Any, content_type: str) -> Obj:
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            if "json-patch" in content_type:
                if not isinstance(patch, list):
                    raise StoreError(400, "BadRequest", "a JSON patch must be a list of operations")
                updated = json_patch(current, patch)
                wanted_rv = None
            else:
                if not isinstance(patch, dict):
                    raise StoreError(400, "BadRequest", "a merge patch must be a JSON object")
                wanted_rv = (patch.get("metadata") or {}).get("resourceVersion")
                # Spec and status are not patchable here: the plugin only changes metadata, and the
                # status belongs to the kubelet (a real server ignores status in a pod patch).
                unexpected = set(patch) - {"metadata", "apiVersion", "kind", "status"}
                if unexpected:
                    raise StoreError(
                        422, "Invalid", f"pod updates may not change fields {sorted(unexpected)}"
                    )
                updated = copy.deepcopy(current)
                updated["metadata"] = merge_patch(current["metadata"], patch.get("metadata") or {})
            check_resource_version(name, current, wanted_rv)
            keep_immutable(current["metadata"], updated["metadata"])
            updated["status"] = current["status"]
            return self._replace(ns, name, current, updated)

    def _replace(self, ns: str, name: str, current: Obj, updated: Obj) -> Obj:
        """Store `updated` under a new resourceVersion; must be called with the lock held."""
        updated["metadata"]["resourceVersion"] = str(self._bump())
        self._pods[ns][name] = updated
        self._record("MODIFIED", ns, copy.deepcopy(updated), copy.deepcopy(current))
        return copy.deepcopy(updated)

    def update_status(self, ns: str, name: str, uid: str | None, status: Mapping[str, Any]) -> Obj | None:
        """The kubelet's write: merge `status` (and node name, under key `nodeName`) into the pod.
        Returns None when the pod is gone or was replaced by another pod of the same name."""
        with self._txn():
            current = self._pods.get(ns, {}).get(name)
            if current is None or (uid is not None and current["metadata"]["uid"] != uid):
                return None
            updated = copy.deepcopy(current)
            status = dict(status)
            node = status.pop("nodeName", None)
            if node:
                updated["spec"]["nodeName"] = node
            updated["status"] = merge_patch(current.get("status") or {}, status)
            return self._replace(ns, name, current, updated)

    def delete_pod(self, ns: str, name: str, grace_seconds: float | None = None) -> Obj:
        grace = self.default_grace_seconds if grace_seconds is None else grace_seconds
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            meta = current["metadata"]
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(current)  # already terminating: deleting again changes nothing
            now = self.clock.now()
            if grace > 0:
                updated = copy.deepcopy(current)
                updated["metadata"]["deletionTimestamp"] = rfc3339(now + grace)
                updated["metadata"]["deletionGracePeriodSeconds"] = max(1, round(grace))
                self._deletions.append(_Deletion(ns, name, meta["uid"], now + grace))
                return self._replace(ns, name, current, updated)
            return self._remove_locked(ns, name, now)

    def _remove_locked(self, ns: str, name: str, now: float) -> Obj:
        current = self._pods[ns].pop(name)
        gone = copy.deepcopy(current)
        gone["metadata"].setdefault("deletionTimestamp", rfc3339(now))
        gone["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        gone["metadata"]["resourceVersion"] = str(self._bump())
        self._record("DELETED", ns, copy.deepcopy(gone), current)
        return gone

    def tick(self) -> None:
        """Complete graceful deletions whose grace period has passed on the clock."""
        with self._txn():
            self._tick_locked()

    def _tick_locked(self) -> None:
        now = self.clock.now()
        due = [d for d in self._deletions if d.at <= now]
        if not due:
            return
        self._deletions = [d for d in self._deletions if d.at > now]
        for d in due:
            pod = self._pods.get(d.namespace, {}).get(d.name)
            if pod is not None and pod["metadata"]["uid"] == d.uid:
                self._remove_locked(d.namespace, d.name, now)

    # -- watch support -------------------------------------------------------------------------------

    def changes_since(self, resource_version: int) -> list[Change] | None:
        """Changes after `resource_version`, oldest first; None when the history no longer reaches back
        that far (the watcher must relist: 410 Gone)."""
        with self._txn():
            self._tick_locked()
            if resource_version > self._rv:
                return []
            if resource_version < self._history_floor:
                return None
            return [c for c in self._history if c.resource_version > resource_version]

    def compact(self) -> None:
        """Forget the change history, as etcd's compaction does: a watch resuming from any older
        resourceVersion now gets 410 Gone and must relist."""
        with self._lock:
            self._history.clear()
            self._history_floor = self._rv

    def wait_for_change(self, after: int, timeout: float) -> None:
        """Block (real time, at most `timeout` seconds) until the resourceVersion passes `after`."""
        with self._changed:
            if self._rv <= after:
                self._changed.wait(timeout)

    # -- events, logs, nodes -------------------------------------------------------------------------

    def add_event(self, ns: str, pod_name: str, reason: str, message: str, type_: str = "Normal") -> None:
        with self._lock:
            now = rfc3339(self.clock.now())
            events = self._events.setdefault(ns, [])
            for event in events:  # a repeated event is counted, as the real event recorder does
                same = (event["involvedObject"]["name"], event["reason"], event["message"])
                if same == (pod_name, reason, message):
                    event["count"] += 1
                    event["lastTimestamp"] = now
                    event["metadata"]["resourceVersion"] = str(self._bump())
                    return
            events.append(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {
                        "name": f"{pod_name}.{uuid.uuid4().hex[:16]}",
                        "namespace": ns,
                        "resourceVersion": str(self._bump()),
                    },
                    "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": ns},
                    "reason": reason,
                    "message": message,
                    "type": type_,
                    "count": 1,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "source": {"component": "kubelet"},
                }
            )

    def list_events(self, ns: str, field_selector: str | None = None) -> tuple[list[Obj], int]:
        fields = parse_field_selector(field_selector)
        with self._lock:
            items = [copy.deepcopy(e) for e in self._events.get(ns, []) if selected(e, [], fields)]
            return items, self._rv

    def append_log(self, ns: str, pod_name: str, line: str) -> None:
        with self._lock:
            self._logs.setdefault((ns, pod_name), []).append(line)

    def get_log(self, ns: str, pod_name: str, tail_lines: int | None = None) -> str:
        with self._lock:
            self._pod(ns, pod_name)
            lines = self._logs.get((ns, pod_name), [])
            if tail_lines is not None:
                lines = lines[-tail_lines:] if tail_lines > 0 else []
            return "".join(line + "\n" for line in lines)

    def list_nodes(self) -> list[Obj]:
        ready = {"type": "Ready", "status": "True"}
        return [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"conditions": [ready], "allocatable": {"cpu": "8", "memory": "32Gi"}},
            }
            for name in self.nodes
        ]
