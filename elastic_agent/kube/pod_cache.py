"""The adapter's cache of this plugin's pods (adapter.py), and the rules of which version of a pod wins.

Versions arrive from three places in any order: the responses of our own writes, the watch's events and
a fresh list. The cache keeps the newest by resourceVersion and never rolls back; a pod relabelled out of
the selector counts as deleted; a pod seen deleted does not come back from an older version, which is
what its tombstone remembers. Listeners (the pool) hear every change once, outside the lock, in the
order the cache took them.

Its own module because these rules are the subtle part of the adapter and hold whatever API they are fed
from; the adapter keeps the calls, their errors and the list + watch loop.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.kube.port import PodListener, PodView
from elastic_agent.redaction import traceback_text

log = logging.getLogger(__name__)

MAX_TOMBSTONES = 4096
# How long a deleted pod's tombstone is kept, in clock seconds. The stragglers it guards against (a write's
# response or a watch event older than the deletion) are seconds old at most; kept by count alone, the
# tombstones of a busy cluster filled to MAX_TOMBSTONES over the first hour and stayed there (the soak).
TOMBSTONE_TTL_S = 600.0

Note = tuple[str, PodView]  # ("ADDED" | "MODIFIED" | "DELETED", the pod)


def version_number(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None  # opaque resourceVersion: cannot be ordered, so every event is taken


def epoch(timestamp: str | None) -> float:
    if not timestamp:
        return 0.0
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return PodView(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        labels=MappingProxyType(dict(meta.get("labels") or {})),
        annotations=MappingProxyType(dict(meta.get("annotations") or {})),
        phase=status.get("phase") or "Pending",
        resource_version=str(meta.get("resourceVersion") or ""),
        created_at=epoch(meta.get("creationTimestamp")),
        reason=status.get("reason"),
        message=status.get("message"),
        deleting=bool(meta.get("deletionTimestamp")),
        node_name=spec.get("nodeName"),
        containers=tuple(str(c.get("name", "")) for c in spec.get("containers") or []),
    )


class PodCache:
    """The pods matching `selector`, by name. Thread-safe: the watch thread and request threads fold
    versions in."""

    def __init__(self, selector: Mapping[str, str], clock: Clock) -> None:
        self._selector = dict(selector)
        self._clock = clock
        self._lock = threading.RLock()  # guards the pods, the tombstones and the listeners
        self._pods: dict[str, PodView] = {}
        # name → (resourceVersion at which we saw the pod deleted, when): bounded by count and by age.
        self._tombstones: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._listeners: list[PodListener] = []

    def add_listener(self, listener: PodListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def pods(self) -> list[PodView]:
        with self._lock:
            return sorted(self._pods.values(), key=lambda p: p.name)

    def get(self, name: str) -> PodView | None:
        with self._lock:
            return self._pods.get(name)

    def apply(self, kind: str, obj: Mapping[str, Any]) -> PodView:
        """Fold one version in (a write's response or a watch event); returns the view of `obj`."""
        note = self.fold(kind, obj)
        if note is None:
            return pod_view(obj)
        self._notify([note])
        return note[1]

    def fold(self, kind: str, obj: Mapping[str, Any]) -> Note | None:
        """Fold one version in without telling the listeners; returns what they should hear, if
        anything. The caller holds no lock or this one (it is reentrant)."""
        view = pod_view(obj)
        name, new = view.name, version_number(view.resource_version)
        with self._lock:
            current = self._pods.get(name)
            old = version_number(current.resource_version) if current is not None else None
            if kind != "DELETED" and not self._matches(view.labels):
                kind = "DELETED"  # relabelled out of our selector: no longer ours to track
            if new is not None and old is not None and (new < old or (new == old and kind != "DELETED")):
                return None  # an older (or the same) version than we hold: never roll back
            tomb = self._tombstones.get(name)
            if kind != "DELETED" and new is not None and tomb is not None and new <= tomb[0]:
                return None  # an event from before we saw the pod deleted
            if kind == "DELETED":
                if current is None:
                    return None
                del self._pods[name]
                self._bury(name, new if new is not None else (old or 0))
                return ("DELETED", view)
            self._pods[name] = view
            self._tombstones.pop(name, None)
            return ("ADDED" if current is None else "MODIFIED", view)

    def forget(self, name: str) -> None:
        """The server says the pod does not exist (a 404 to our delete)."""
        with self._lock:
            gone = self._pods.pop(name, None)
            if gone is not None:
                self._bury(name, version_number(gone.resource_version) or 0)
        if gone is not None:
            self._notify([("DELETED", gone)])

    def replace(self, items: Iterable[Mapping[str, Any]], version: str) -> None:
        """A fresh list at resourceVersion `version`: pods missing from it are gone, but for versions
        our own writes put here after the list's snapshot was taken."""
        listed = version_number(version)
        notes: list[Note] = []
        with self._lock:
            names = set()
            for item in items:
                names.add((item.get("metadata") or {}).get("name"))
                note = self.fold("MODIFIED", item)
                if note is not None:
                    notes.append(note)
            for name, view in list(self._pods.items()):
                held = version_number(view.resource_version)
                if name not in names and (held is None or listed is None or held <= listed):
                    del self._pods[name]
                    notes.append(("DELETED", view))
        self._notify(notes)

    def retained(self) -> dict[str, int]:
        """What the cache keeps besides the pods themselves, for /metrics and the soak."""
        with self._lock:
            return {"tombstones": len(self._tombstones)}

    @staticmethod
    def retained_limits() -> dict[str, int]:
        return {"tombstones": MAX_TOMBSTONES}

    def _matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self._selector.items())

    def _bury(self, name: str, version: int) -> None:
        now = self._clock.now()
        tombstones = self._tombstones
        tombstones[name] = (version, now)
        tombstones.move_to_end(name)
        # Oldest first (a re-burial moves to the end), so expiry looks at the front only.
        while tombstones and (
            len(tombstones) > MAX_TOMBSTONES or next(iter(tombstones.values()))[1] < now - TOMBSTONE_TTL_S
        ):
            tombstones.popitem(last=False)

    def _notify(self, notes: list[Note]) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for kind, view in notes:
            for listener in listeners:
                try:
                    listener(kind, view)
                except Exception:  # one faulty listener must not stop the cache from updating
                    log.error("a pod listener failed on %s %s\n%s", kind, view.name, traceback_text())
