"""Persists the pool's state changes to the pods, off the request path.

should-assign-work runs inside GoCD's global assignment lock, so a decision changes state in memory
(PoolState's overlay) and leaves the API call to a writer. Patches are compare-and-swap on the pod's
resourceVersion: a conflict means the pod changed (often just its status), so the writer retries on the
fresher copy. Stopping drains the queue: a change made before SIGTERM is on the pod afterwards, unless
the cluster cannot be reached before the deadline (then the next backend's server-ping repairs what
GoCD knows; docs/architecture.md, "What a restart loses").

A write the cluster does not take (no answer, an error status other than a conflict, or conflicts all
along) is tried again for that pod after an exponential backoff (backoff.py: 1 s doubling to 60 s, on
the injected clock), and at once when an outage ends; a success resets it. Failures of an outage are
logged at DEBUG (the port's `OutageTracker` reports the outage itself, once); any other failure is a
WARNING once per pod until that pod is written again. Stopping ignores the backoff: every queued pod is
tried once.

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
from elastic_agent.kube.port import ClusterError, ClusterPort, Conflict, NotFound, Unreachable
from elastic_agent.pool.backoff import RetryTimes
from elastic_agent.redaction import traceback_text
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger(__name__)

Overlay = dict[str, str | None]
WRITE = "write"  # the kind of call a write problem is about (PendingWrites.note_problem)
# How often the thread looks at the clock while every queued pod waits for its backoff. Real time on
# purpose, as in yielding.py: how promptly a due pod is noticed, not when it is due (that is the clock's).
IDLE_LOOK_S = 0.05


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
        """Write the pod's changes now, on the calling thread (unless a failure put the pod in backoff)."""

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
        self._wake = threading.Condition()  # also guards _retries
        self._retries = RetryTimes()
        # (clock time, outage count) before which no queued pod is due: spares scanning the queue at each
        # look while every pod waits; None once a pod is enqueued.
        self._idle_until: tuple[float, int] | None = None
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
                self._idle_until = None
                self._wake.notify()

    def flush(self, name: str) -> None:
        if self.due(name):
            self.write(name)

    def due(self, name: str) -> bool:
        """Whether the pod may be written now: not waiting for its backoff after a failure."""
        if not self._retries:  # nothing failed: the usual case, without the lock or the clock
            return True
        with self._wake:
            return self._retries.is_due(name, self._clock.now(), self._port.outage.recoveries)

    def _run(self) -> None:
        while True:
            with self._wake:
                waited = False
                while (index := self._next_locked()) is None:
                    if self._stopping and not self._queue:
                        return  # stopping, and everything is written
                    waited = True
                    self._wake.wait(IDLE_LOOK_S if self._queue else None)
            if waited:
                let_the_answer_go_first()
            with self._wake:
                index = self._next_locked()
                if index is None:
                    continue
                name = self._queue.pop(index)
                self._queued.discard(name)
                stopping = self._stopping
            try:
                retry = not self.write(name)
            except Exception:  # the writer must survive anything; the next ping re-queues dirty pods
                log.error("could not persist the state of pod %s\n%s", name, traceback_text())
                self._forget(name)  # not queued again here: a backoff kept for it would outlive the pod
                retry = False
            if retry and not stopping:
                self.enqueue(name)  # not before its backoff: `_next_locked` skips it until then

    def _next_locked(self) -> int | None:
        """The queue's first pod to write now; stopping, the first pod whatever its backoff."""
        if not self._queue:
            return None
        if self._stopping or not self._retries:
            return 0
        now, epoch = self._clock.now(), self._port.outage.recoveries
        if self._idle_until is not None and now < self._idle_until[0] and epoch == self._idle_until[1]:
            return None
        retries = self._retries
        due = next((i for i, name in enumerate(self._queue) if retries.is_due(name, now, epoch)), None)
        if due is None:
            self._idle_until = (min(retries.due_at(name) for name in self._queue), epoch)
        return due

    def write(self, name: str) -> bool:
        """One attempt at the pod's unwritten changes (with quick retries on conflicts); False when the
        cluster did not take them and the pod is to be tried again after its backoff."""
        for attempt in range(self.MAX_ATTEMPTS):
            pending = self._pending.take_unwritten(name)
            if pending is None:
                self._forget(name)
                return True
            annotations, pod_labels = pending
            pod = self._port.get(name)
            if pod is None:
                self._forget(name)
                return True
            try:
                self._port.patch_pod_metadata(
                    name,
                    annotations=annotations or None,
                    labels=pod_labels or None,
                    resource_version=pod.resource_version,
                )
                self._forget(name)
                self._pending.note_problem(WRITE, None)
                return True
            except Conflict:
                # Our cached copy is older than the server's; the watch brings the newer one shortly.
                self._clock.sleep(0.05 * (attempt + 1))
            except NotFound:
                self._forget(name)
                return True
            except ClusterError as error:
                self._failed(name, error)
                return False
        # The usual race with the kubelet's status updates, most often right after an outage when every
        # pod is written at once: no problem of the cluster's, so no warning; the backoff tries again.
        with self._wake:
            delay = self._retries.failed(name, self._clock.now())
        log.info(
            "pod %s kept changing (%d conflicts); trying again in %.0f s", name, self.MAX_ATTEMPTS, delay
        )
        return False

    def _failed(self, name: str, error: ClusterError) -> None:
        outage = isinstance(error, Unreachable)
        with self._wake:
            epoch = self._port.outage.recoveries if outage else None
            delay = self._retries.failed(name, self._clock.now(), epoch)
            first = self._retries.failures(name) == 1
        if outage:
            # The outage is the port's to report (OutageTracker), once for all pods.
            log.debug("could not persist the state of pod %s (again in %.0f s): %s", name, delay, error)
            return
        if first:
            log.warning("could not persist the state of pod %s (retrying with backoff): %s", name, error)
        else:
            log.debug("could not persist the state of pod %s (again in %.0f s): %s", name, delay, error)
        self._pending.note_problem(WRITE, error)

    def _forget(self, name: str) -> None:
        with self._wake:
            self._retries.succeeded(name)
