"""The in-memory model behind the fake Kubernetes API server (`fake_kube`).

It holds what the plugin touches: pods per namespace, their events and logs, a few nodes. Every change
takes the next value of one integer resourceVersion shared by all objects (as etcd's revision is), and
is kept in a bounded history so a watch can resume from a resourceVersion, or learn that it is too old
(410 Gone) once the history has moved past it. Listeners (the simulated kubelet) hear every change.

Where it matters to a client, the rules are kube-apiserver's, as tests/contracts/test_kube_contract.py checks
on both: labels and annotations are validated (422), a pod's identity is immutable, the status subresource
writes status and metadata but never spec, a binding assigns a node once, and deletion is graceful only
for a pod bound to a node that has not finished (its deletion is written first, then the pod removed).

Objects are plain JSON-shaped dicts; callers always get deep copies, never the stored ones.
"""

from __future__ import annotations

import copy
import functools
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from elastic_agent.clock import Clock, SystemClock
from elastic_agent.simulation.fake_kube_configmaps import FakeConfigMaps
from elastic_agent.simulation.fake_kube_logs import ContainerLogs, first_container_name
from elastic_agent.simulation.fake_kube_nodes import node_object
from elastic_agent.simulation.fake_kube_objects import (
    EVENT_FIELDS,
    POD_FIELDS,
    Obj,
    StoreError,
    json_patch,
    merge_patch,
    parse_field_selector,
    parse_label_selector,
    pod_event,
    selected,
    validate_metadata,
)

__all__ = ["Change", "FakeKubeStore", "Obj", "StoreError", "parse_label_selector", "rfc3339"]

StoreListener = Callable[[str, Obj], None]  # (ADDED|MODIFIED|DELETED, pod copy)


@functools.lru_cache(maxsize=64)  # a kubelet writes several events in one instant
def rfc3339(epoch: float) -> str:
    # strftime's "%Y-%m-%dT%H:%M:%SZ", formatted here: strftime goes through the C library, at twice
    # the cost (years before 1000, which it would not pad, are not epoch times).
    at = datetime.fromtimestamp(epoch, UTC)
    return f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}Z"


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
    grace: float  # its grace period (seconds, fractions allowed): only a shorter one replaces it


def stamp_created(pod: Obj, ns: str, uid: str, now: float, version: int) -> None:
    """What kube-apiserver adds to a pod it creates: its namespace, uid, creation time and version, the
    kind, and a Pending status (a pod's status is never taken from the client's body)."""
    pod["metadata"].update(
        namespace=ns, uid=uid, creationTimestamp=rfc3339(now), resourceVersion=str(version)
    )
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    pod.setdefault("spec", {})
    pod["status"] = {"phase": "Pending"}


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


def check_metadata_update(name: str, current: Obj, updated: Obj) -> None:
    """A pod's metadata as kube-apiserver checks an update of it: another name is a 400, another uid or
    deletion a 422 (immutable fields; a client that sends its pod's uid gets a precondition, not a
    change), invalid labels or annotations a 422; creationTimestamp is silently kept. Labels and
    annotations are only checked when they changed (stored ones were checked when written)."""
    if updated.get("name", name) != name:
        raise StoreError(400, "BadRequest", f"the name of the object ({updated.get('name')}) does not "
                                            f"match the name on the URL ({name})")  # fmt: skip
    if updated.get("namespace", current.get("namespace")) != current.get("namespace"):
        raise StoreError(400, "BadRequest", "the namespace of the provided object does not match the "
                                            "namespace sent on the request")  # fmt: skip
    for immutable in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if updated.get(immutable) != current.get(immutable):
            raise StoreError(422, "Invalid", f'Pod "{name}" is invalid: metadata.{immutable}: Invalid value: '
                                             f'"{updated.get(immutable)}": field is immutable')  # fmt: skip
    keep_immutable(current, updated)
    if updated.get("labels") is not current.get("labels") or (
        updated.get("annotations") is not current.get("annotations")
    ):
        validate_metadata("Pod", name, updated, current)


def _apply_patch(
    current: Obj, patch: Any, content_type: str, merge: Callable[[dict[str, Any]], Obj]
) -> tuple[Obj, Any]:
    """The patched object and the resourceVersion the patch demands (None: any): a JSON patch (a list
    of operations), else a merge patch (an object) applied by `merge`."""
    if "json-patch" in content_type:
        if not isinstance(patch, list):
            raise StoreError(400, "BadRequest", "a JSON patch must be a list of operations")
        return json_patch(current, patch), None
    if not isinstance(patch, dict):
        raise StoreError(400, "BadRequest", "a merge patch must be a JSON object")
    return merge(patch), (patch.get("metadata") or {}).get("resourceVersion")


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
        self._rv = 1  # etcd's first revision: no list says 0, which a watch would take for "any version"
        self._pods: dict[str, dict[str, Obj]] = {}
        self._events: dict[str, list[Obj]] = {}
        self.logs = ContainerLogs()
        self._history: deque[Change] = deque()
        self._history_floor = 0  # every change with a resourceVersion above this is in the history
        self._pending_notify: list[Change] = []
        self._deletions: list[_Deletion] = []
        self._listeners: list[StoreListener] = []
        self.config_maps = FakeConfigMaps(self._bump_locked)

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

    def _bump_locked(self) -> int:
        """A resourceVersion for another kind of object (ConfigMaps): one revision counter, as etcd's."""
        with self._lock:
            return self._bump()

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
        validate_metadata("Pod", meta["name"], meta)
        with self._txn():
            self._tick_locked()
            name = meta["name"]
            if name in self._pods.get(ns, {}):
                raise StoreError(409, "AlreadyExists", f'pods "{name}" already exists')
            stamp_created(pod, ns, self._new_uid(), self.clock.now(), self._bump())
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
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, POD_FIELDS)
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

            def merge_metadata(patch: dict[str, Any]) -> Obj:
                # Spec and status are not patchable here: the plugin only changes metadata, and the
                # status belongs to the kubelet (a real server ignores status in a pod patch).
                unexpected = set(patch) - {"metadata", "apiVersion", "kind", "status"}
                if unexpected:
                    raise StoreError(
                        422, "Invalid", f"pod updates may not change fields {sorted(unexpected)}"
                    )
                updated = copy.deepcopy(current)
                updated["metadata"] = merge_patch(current["metadata"], patch.get("metadata") or {})
                return updated

            updated, wanted_rv = _apply_patch(current, patch, content_type, merge_metadata)
            check_resource_version(name, current, wanted_rv)
            check_metadata_update(name, current["metadata"], updated["metadata"])
            updated["status"] = current["status"]
            return self._replace(ns, name, current, updated)

    def patch_status(self, ns: str, name: str, patch: Any, content_type: str) -> Obj:
        """A write to the `pods/status` subresource (the kubelet's): as kube-apiserver, it changes the
        status and may change labels and annotations too, but never the spec, the deletion or the owner
        references (those are reset to the stored ones, silently); a resourceVersion in it is a
        compare-and-swap as for the pod itself."""
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            updated, wanted_rv = _apply_patch(current, patch, content_type, lambda p: merge_patch(current, p))
            check_resource_version(name, current, wanted_rv)
            meta = updated.setdefault("metadata", {})
            for reset in ("deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences"):
                meta.pop(reset, None)
                if reset in current["metadata"]:
                    meta[reset] = copy.deepcopy(current["metadata"][reset])
            check_metadata_update(name, current["metadata"], meta)
            updated["spec"] = copy.deepcopy(current["spec"])
            updated["status"] = updated.get("status") or {}
            updated["apiVersion"], updated["kind"] = "v1", "Pod"
            return self._replace(ns, name, current, updated)

    def bind_pod(self, ns: str, name: str, node: str, uid: str | None = None) -> None:
        """The scheduler's `pods/binding`: assign a node to a pod that has none (409 otherwise, also
        when `uid`, a precondition, names another pod)."""
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            meta = current["metadata"]
            if uid is not None and uid != meta["uid"]:
                raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on pods "{name}": '
                                                  f"Precondition failed: UID in precondition: {uid}, "
                                                  f"UID in object meta: {meta['uid']}")  # fmt: skip
            assigned = (current.get("spec") or {}).get("nodeName")
            refusal = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name}'
            if assigned:
                raise StoreError(409, "Conflict", f'{refusal} is already assigned to node "{assigned}"')
            if meta.get("deletionTimestamp"):
                raise StoreError(409, "Conflict", f"{refusal} is being deleted, cannot be assigned to a host")
            updated = copy.deepcopy(current)
            updated["spec"]["nodeName"] = node
            conditions = [c for c in updated["status"].get("conditions") or []
                          if c.get("type") != "PodScheduled"]  # fmt: skip
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastTransitionTime": rfc3339(self.clock.now())})  # fmt: skip
            updated["status"]["conditions"] = conditions
            self._replace(ns, name, current, updated)

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

    def grace_period(self, pod: Obj, requested: float | None) -> float:
        """kube-apiserver's grace period for deleting `pod`: none for a pod that no node runs (unbound)
        or that has finished (Failed, Succeeded), whatever was asked; else the one asked for, else the
        pod's terminationGracePeriodSeconds, else `default_grace_seconds` (the real server defaults the
        pod's to 30 s; the fake's default is 0, for tests that need no deletion to linger)."""
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Failed", "Succeeded"):
            return 0.0
        if requested is not None:
            return max(0.0, float(requested))
        if spec.get("terminationGracePeriodSeconds") is not None:
            return max(0.0, float(spec["terminationGracePeriodSeconds"]))
        return self.default_grace_seconds

    def delete_pod(self, ns: str, name: str, grace_seconds: float | None = None, *,
                   uid: str | None = None) -> Obj:  # fmt: skip
        """Delete as kube-apiserver does (see grace_period): at once, or gracefully (deletionTimestamp
        set, removed by tick() once the grace period has passed on the clock). Deleting a terminating pod
        again with a shorter grace period shortens it (0: at once); a longer one changes nothing. `uid` is
        a precondition (409 when the pod is another one by now)."""
        with self._txn():
            self._tick_locked()
            current = self._pod(ns, name)
            meta = current["metadata"]
            if uid is not None and uid != meta["uid"]:
                raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on Pod "{name}": the UID '
                                                  f"in the precondition ({uid}) does not match the UID in "
                                                  f"record ({meta['uid']}). The object might have been "
                                                  "deleted and then recreated")  # fmt: skip
            grace = self.grace_period(current, grace_seconds)
            now = self.clock.now()
            if meta.get("deletionTimestamp"):
                pending = next((d for d in self._deletions if (d.namespace, d.name, d.uid)
                                == (ns, name, meta["uid"])), None)  # fmt: skip
                if pending is not None and grace >= pending.grace:
                    return copy.deepcopy(current)  # already terminating, as soon or sooner
                self._deletions = [d for d in self._deletions if d is not pending]
            if grace > 0:
                updated = copy.deepcopy(current)
                updated["metadata"]["deletionTimestamp"] = rfc3339(now + grace)
                updated["metadata"]["deletionGracePeriodSeconds"] = max(1, round(grace))
                self._deletions.append(_Deletion(ns, name, meta["uid"], now + grace, grace))
                return self._replace(ns, name, current, updated)
            return self._remove_locked(ns, name, now)

    def _remove_locked(self, ns: str, name: str, now: float) -> Obj:
        current = self._pods[ns][name]
        if current["metadata"].get("deletionGracePeriodSeconds") != 0:
            # As kube-apiserver: the deletion is written first (deletionTimestamp now, grace period 0), which
            # watchers see as MODIFIED, then the pod is removed (DELETED, under the next resourceVersion).
            updated = copy.deepcopy(current)
            updated["metadata"]["deletionTimestamp"] = rfc3339(now)
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            self._replace(ns, name, current, updated)
        current = self._pods[ns].pop(name)
        gone = copy.deepcopy(current)
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

    def add_event(self, ns: str, pod_name: str, reason: str, message: str, type_: str = "Normal",
                  field_path: str = "") -> None:  # fmt: skip
        """What a kubelet records about a pod, or one of its containers (`field_path`, as the kubelet's
        GenerateContainerRef writes it: `spec.containers{name}`)."""
        with self._lock:
            now = rfc3339(self.clock.now())
            events = self._events.setdefault(ns, [])
            for event in events:  # a repeated event is counted, as the real event recorder does
                involved = event["involvedObject"]
                same = (involved["name"], involved.get("fieldPath", ""), event["reason"], event["message"])
                if same == (pod_name, field_path, reason, message):
                    event["count"] += 1
                    event["lastTimestamp"] = now
                    event["metadata"]["resourceVersion"] = str(self._bump())
                    return
            metadata = {"name": f"{pod_name}.{uuid.uuid4().hex[:16]}", "resourceVersion": str(self._bump())}
            events.append(pod_event(ns, pod_name, reason, message, type_, now, metadata, field_path))

    def create_event(self, ns: str, body: Mapping[str, Any]) -> Obj:
        """An Event written through the API (what a kubelet or a scheduler records), stored as given."""
        event = copy.deepcopy(dict(body))
        meta = event.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise StoreError(422, "Invalid", "Event is invalid: metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:16]
        if meta.get("namespace", ns) != ns:
            raise StoreError(400, "BadRequest", "the namespace of the object does not match the request")
        validate_metadata("Event", meta["name"], meta)
        with self._lock:
            events = self._events.setdefault(ns, [])
            if any(e["metadata"]["name"] == meta["name"] for e in events):
                raise StoreError(409, "AlreadyExists", f'events "{meta["name"]}" already exists')
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=rfc3339(self.clock.now()),
                        resourceVersion=str(self._bump()))  # fmt: skip
            event["apiVersion"], event["kind"] = "v1", "Event"
            events.append(event)
            return copy.deepcopy(event)

    def list_events(self, ns: str, field_selector: str | None = None) -> tuple[list[Obj], int]:
        fields = parse_field_selector(field_selector, EVENT_FIELDS)
        with self._lock:
            items = [copy.deepcopy(e) for e in self._events.get(ns, []) if selected(e, [], fields)]
            return items, self._rv

    def append_log(self, ns: str, pod_name: str, line: str, container: str | None = None) -> None:
        """A line the pod's `container` wrote (None: its first container)."""
        with self._lock:
            pod = self._pods.get(ns, {}).get(pod_name) or {}
        self.logs.append(ns, pod_name, container or first_container_name(pod), line)

    def get_log(self, ns: str, pod_name: str, tail_lines: int | None = None, container: str | None = None,
                *, checked: bool = True) -> str:  # fmt: skip
        """The tail of a container's log, as a real cluster serves it (ContainerLogs.read)."""
        with self._lock:
            pod = copy.deepcopy(self._pod(ns, pod_name))
        return self.logs.read(pod, container, tail_lines, checked=checked)

    def list_nodes(self) -> list[Obj]:
        at = rfc3339(0)
        return [node_object(name, index, at) for index, name in enumerate(self.nodes)]
