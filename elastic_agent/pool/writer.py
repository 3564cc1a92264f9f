"""Persists the pool's state changes to the pods, off the request path.

should-assign-work runs inside GoCD's global assignment lock, so a decision changes state in memory
(PoolState's overlay) and leaves the API call to a writer. Patches are compare-and-swap on the pod's
resourceVersion: a conflict means the pod changed (often just its status), so the writer retries on the
fresher copy. Stopping drains the queue: a change made before SIGTERM is on the pod afterwards, unless
the cluster cannot be reached before the deadline (then the next backend's server-ping repairs what
GoCD knows; docs/architecture.md, "What a restart loses").

`StateWriter` is the seam: production uses the `AnnotationWriter` thread; the simulator passes a writer
that it drains at the end of each simulated instant.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from elastic_agent.clock import Clock
from elastic_agent.kube.port import ClusterError, ClusterPort, Conflict, NotFound
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger(__name__)

Overlay = dict[str, str | None]
WRITE = "write"  # the kind of call a write problem is about (PendingWrites.note_problem)


class PendingWrites(Protocol):
    def take_unwritten(self, name: str) -> tuple[Overlay, Overlay] | None:
        """(annotations, labels) still to be written for a pod, or None."""

    def note_problem(self, what: str, error: ClusterError | None) -> None:
        """A call of kind `what` failed with `error`, or (None) worked: GoCD's health messages say so."""


class StateWriter(Protocol):
    def start(self) -> None: ...

    def enqueue(self, name: str) -> None:
        """The pod has changes to write; cheap, never blocks on the cluster."""

    def flush(self, name: str) -> None:
        """Write the pod's changes now, on the calling thread."""

    def stop(self, deadline: float) -> int:
        """Write what is queued until `deadline` (time.monotonic()), then stop; returns how many pods'
        changes were left unwritten (they stay in the pool's state)."""


WriterFactory = Callable[[ClusterPort, Clock, PendingWrites], StateWriter]


class AnnotationWriter:
    MAX_ATTEMPTS = 5

    def __init__(self, port: ClusterPort, clock: Clock, pending: PendingWrites) -> None:
        self._port = port
        self._clock = clock
        self._pending = pending
        self._queue: list[str] = []  # guarded by _wake, with _queued (no name twice)
        self._queued: set[str] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="annotation-writer", daemon=True)
        self._thread.start()

    def stop(self, deadline: float) -> int:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is None:
            return len(self._queue)
        # Real time on purpose: how long stopping may take, not a decision's time.
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._wake:
            return len(self._queue) + (1 if self._thread.is_alive() else 0)  # and the one being written

    def enqueue(self, name: str) -> None:
        with self._wake:
            if name not in self._queued:
                self._queued.add(name)
                self._queue.append(name)
                self._wake.notify()

    def flush(self, name: str) -> None:
        self.write(name)

    def _run(self) -> None:
        while True:
            with self._wake:
                woken = not self._queue
                while not self._queue and not self._stopping:
                    self._wake.wait()
                if not self._queue:
                    return  # stopping, and everything is written
            if woken:
                let_the_answer_go_first()
            with self._wake:
                if not self._queue:
                    continue
                name = self._queue.pop(0)
                self._queued.discard(name)
            try:
                self.write(name)
            except Exception:  # the writer must survive anything; the next ping re-queues dirty pods
                log.exception("could not persist the state of pod %s", name)

    def write(self, name: str) -> None:
        for attempt in range(self.MAX_ATTEMPTS):
            pending = self._pending.take_unwritten(name)
            if pending is None:
                return
            annotations, pod_labels = pending
            pod = self._port.get(name)
            if pod is None:
                return
            try:
                self._port.patch_pod_metadata(
                    name,
                    annotations=annotations or None,
                    labels=pod_labels or None,
                    resource_version=pod.resource_version,
                )
                self._pending.note_problem(WRITE, None)
                return
            except Conflict:
                # Our cached copy is older than the server's; the watch brings the newer one shortly.
                self._clock.sleep(0.05 * (attempt + 1))
            except NotFound:
                return
            except ClusterError as error:
                log.warning("could not persist the state of pod %s: %s", name, error)
                self._pending.note_problem(WRITE, error)
                return
        log.warning("pod %s kept changing; its state will be written at the next ping", name)
