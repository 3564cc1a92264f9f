"""The adapter's cache of this plugin's pods (adapter.py), and the rules of which version of a pod it
shows.

Versions arrive from three places: a list, the watch that follows it, and the responses of our own
writes. A resourceVersion is opaque (Kubernetes' API conventions; client-go's informers compare it for
equality only), so order never comes from comparing versions. It comes from the watch, which delivers
every change of a pod in the order the server made them:

- The watch and the list are the truth, taken in the order they arrive.
- A write's response is shown at once (read-your-writes), as a version of our own, until the watch
  delivers that same resourceVersion (the watch has caught up: from then on its events are newer) or
  the pod is deleted. An event the watch delivers meanwhile is older than our write: it is kept as the
  watch's but not shown. A response whose version the watch already delivered while the write was on
  its way, or that was overtaken by the pod's deletion, is not taken at all: the watch is ahead.
- A pod our delete removed (or that a delete found gone) stays hidden until the watch says DELETED, so
  that the watch's older events cannot bring it back.
- A list made after a write completed shows that write or something newer: it replaces our version.
  Our versions of writes that overlapped a list, and hidden pods the watch never confirms, expire after
  a while on the clock (`LOCAL_TTL_S`), so that a missed confirmation cannot pin an old version.

A pod relabelled out of the selector counts as deleted. Listeners (the pool) hear every change of what
the cache shows, once, outside the lock, in the order the cache took them.

Its own module because these rules are the subtle part of the adapter and hold whatever API they are
fed from; the adapter keeps the calls, their errors and the list + watch loop.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.kube.pod_status import condition, container_views
from elastic_agent.kube.port import PodListener, PodView
from elastic_agent.redaction import traceback_text

log = logging.getLogger(__name__)

MAX_TOMBSTONES = 4096
# How long, in clock seconds, a version of our own or a hidden pod waits for the watch to confirm it.
# The watch confirms within milliseconds; this only bounds what a confirmation missed (a write that
# overlapped a relist) can cost. Kept by count alone, the hidden pods of a busy cluster filled to
# MAX_TOMBSTONES over the first hour and stayed there (the soak).
LOCAL_TTL_S = 600.0

Note = tuple[str, PodView]  # ("ADDED" | "MODIFIED" | "DELETED", the pod)


def epoch(timestamp: str | None) -> float:
    if not timestamp:
        return 0.0
    return _epoch(timestamp)


@functools.lru_cache(maxsize=1024)
def _epoch(timestamp: str) -> float:
    # A pod's creationTimestamp is read again at every change of the pod.
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def pod_view(obj: Mapping[str, Any], same_spec_and_status: PodView | None = None) -> PodView:
    """`same_spec_and_status`: a view of an earlier version of this pod whose spec and status were
    the very objects `obj` holds (a store that shares a pod's unchanged parts between its versions and
    never changes one in place, as the simulator's does): their parts are taken from it, not read
    again. A metadata patch, the plugin's commonest write, changes neither."""
    meta = obj.get("metadata") or {}
    shared = same_spec_and_status
    if shared is not None:
        return PodView(
            name=meta.get("name", ""),
            namespace=meta.get("namespace", ""),
            labels=MappingProxyType(dict(meta.get("labels") or {})),
            annotations=MappingProxyType(dict(meta.get("annotations") or {})),
            phase=shared.phase,
            resource_version=str(meta.get("resourceVersion") or ""),
            created_at=epoch(meta.get("creationTimestamp")),
            reason=shared.reason,
            message=shared.message,
            deleting=bool(meta.get("deletionTimestamp")),
            node_name=shared.node_name,
            containers=shared.containers,
            container_statuses=shared.container_statuses,
            scheduled=shared.scheduled,
        )
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
        container_statuses=container_views(status),
        scheduled=condition(status, "PodScheduled"),
    )


@dataclass
class _Evidence:
    """What the watch delivered for one pod while a write of ours was on its way."""

    versions: set[str] = field(default_factory=set)
    deleted: bool = False


@dataclass(frozen=True)
class _Local:
    """A version of our own write not yet confirmed by the watch (`view` None: our delete hid the pod)."""

    view: PodView | None
    sequence: int  # when the write completed, in the cache's own count of writes
    at: float  # the same, on the clock (LOCAL_TTL_S)


class PodWrite:
    """One write of ours to one pod, from before the call to its response (`PodCache.writing`)."""

    def __init__(self, cache: PodCache, name: str, evidence: _Evidence) -> None:
        self._cache, self._name, self._evidence = cache, name, evidence

    def took(self, obj: Mapping[str, Any]) -> PodView:
        """The server's answer to a create or a patch, or to a graceful delete (the pod terminates)."""
        view = pod_view(obj)
        shown = self._cache.fold_write(self._name, view, self._evidence)
        return shown if shown is not None else view

    def removed(self) -> None:
        """The pod is gone: deleted at once, or not found."""
        self._cache.fold_write(self._name, None, self._evidence)


class PodCache:
    """The pods matching `selector`, by name. Thread-safe: the watch thread and request threads fold
    versions in."""

    def __init__(self, selector: Mapping[str, str], clock: Clock) -> None:
        self._selector = dict(selector)
        self._clock = clock
        self._lock = threading.RLock()  # guards everything below
        self._watched: dict[str, PodView] = {}  # what the list and the watch say
        self._local: OrderedDict[str, _Local] = OrderedDict()  # our writes, oldest first
        self._writing: dict[str, list[_Evidence]] = {}  # writes on their way, per pod
        self._sequence = 0
        self._listeners: list[PodListener] = []

    def add_listener(self, listener: PodListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    # -- reading -------------------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        self._expire()
        with self._lock:
            names = set(self._watched) | {n for n, local in self._local.items() if local.view is not None}
            shown = (self._shown(name) for name in sorted(names))
            return [view for view in shown if view is not None]

    def get(self, name: str) -> PodView | None:
        with self._lock:
            return self._shown(name)

    def _shown(self, name: str) -> PodView | None:
        local = self._local.get(name)
        return local.view if local is not None else self._watched.get(name)

    # -- our writes ----------------------------------------------------------------------------------

    @contextmanager
    def writing(self, name: str) -> Iterator[PodWrite]:
        """Wrap one write call: what the watch delivers for the pod meanwhile decides whether its
        response is newer than the watch (see the module's docstring)."""
        evidence = _Evidence()
        with self._lock:
            self._writing.setdefault(name, []).append(evidence)
        try:
            yield PodWrite(self, name, evidence)
        finally:
            with self._lock:
                pending = self._writing.get(name, [])
                if evidence in pending:
                    pending.remove(evidence)
                if not pending:
                    self._writing.pop(name, None)

    def fold_write(self, name: str, view: PodView | None, evidence: _Evidence) -> PodView | None:
        """Fold one response of ours in; returns what the cache shows of the pod now."""
        with self._lock:
            before = self._shown(name)
            behind = evidence.deleted or (view is not None and view.resource_version in evidence.versions)
            if view is not None and not self._matches(view.labels):
                view = None  # relabelled out of our selector by this very write
            if not behind:
                self._sequence += 1
                self._local[name] = _Local(view, self._sequence, self._clock.now())
                self._local.move_to_end(name)
            note = self._change(name, before)
            shown = self._shown(name)
        self._notify([note] if note else [])
        return shown

    def mark(self) -> int:
        """A point in the sequence of our writes: take it just before a list is asked for."""
        with self._lock:
            return self._sequence

    # -- the list and the watch ----------------------------------------------------------------------

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED)."""
        note = self.fold(kind, obj)
        self._notify([note] if note else [])

    def fold(self, kind: str, obj: Mapping[str, Any]) -> Note | None:
        """Fold one watch event in without telling the listeners; returns what they should hear."""
        view = pod_view(obj)
        name = view.name
        with self._lock:
            before = self._shown(name)
            gone = kind == "DELETED" or not self._matches(view.labels)
            for evidence in self._writing.get(name, ()):
                evidence.versions.add(view.resource_version)
                evidence.deleted = evidence.deleted or gone
            local = self._local.get(name)
            if gone:
                self._watched.pop(name, None)
                self._local.pop(name, None)
            else:
                self._watched[name] = view
                if (
                    local is not None
                    and local.view is not None
                    and local.view.resource_version == (view.resource_version)
                ):
                    del self._local[name]  # the watch has caught up with our write
            return self._change(name, before)

    def replace(self, items: Iterable[Mapping[str, Any]], started: int) -> None:
        """A fresh list, asked for at `mark()` == `started`: it shows every write completed before then,
        or something newer; pods missing from it are gone."""
        notes: list[Note] = []
        with self._lock:
            views = {view.name: view for view in map(pod_view, items) if self._matches(view.labels)}
            names = set(self._watched) | set(self._local) | set(views)
            before = {name: self._shown(name) for name in names}
            self._watched = views
            for name, local in list(self._local.items()):
                listed = views.get(name)
                confirmed = (
                    local.view is not None
                    and listed is not None
                    and (local.view.resource_version == listed.resource_version)
                )
                if local.sequence <= started or confirmed:
                    del self._local[name]
            for name in sorted(names):
                note = self._change(name, before[name])
                if note:
                    notes.append(note)
        self._notify(notes)

    # -- what is kept --------------------------------------------------------------------------------

    def retained(self) -> dict[str, int]:
        """What the cache keeps besides the pods themselves, for /metrics and the soak: the pods our
        deletes hid until the watch confirms them."""
        self._expire()
        with self._lock:
            return {"tombstones": sum(1 for local in self._local.values() if local.view is None)}

    @staticmethod
    def retained_limits() -> dict[str, int]:
        return {"tombstones": MAX_TOMBSTONES}

    def _expire(self) -> None:
        notes: list[Note] = []
        with self._lock:
            limit = self._clock.now() - LOCAL_TTL_S
            local = self._local
            while local and (len(local) > MAX_TOMBSTONES or next(iter(local.values())).at < limit):
                name = next(iter(local))
                before = self._shown(name)
                del local[name]
                log.debug("the watch never confirmed our write of pod %s; showing what it says", name)
                note = self._change(name, before)
                if note:
                    notes.append(note)
        self._notify(notes)

    # -- helpers -------------------------------------------------------------------------------------

    def _matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self._selector.items())

    def _change(self, name: str, before: PodView | None) -> Note | None:
        after = self._shown(name)
        if after is None:
            return ("DELETED", before) if before is not None else None
        if before is None:
            return ("ADDED", after)
        same = after is before or after.resource_version == before.resource_version  # equal: the same
        return None if same else ("MODIFIED", after)

    def _notify(self, notes: list[Note]) -> None:
        if not notes:
            return
        with self._lock:
            listeners = list(self._listeners)
        for kind, view in notes:
            for listener in listeners:
                try:
                    listener(kind, view)
                except Exception:  # one faulty listener must not stop the cache from updating
                    log.error("a pod listener failed on %s %s\n%s", kind, view.name, traceback_text())
