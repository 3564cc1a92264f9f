"""Persists annotation changes to pods off the request path.

should-assign-work runs inside GoCD's global assignment lock, so it flips state in memory and leaves the
API call to this writer. Patches are compare-and-swap on the pod's resourceVersion: a conflict means the
pod changed (often just its status), so the writer retries on the fresher copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from elastic_agent.clock import Clock
from elastic_agent.kube.port import ClusterError, ClusterPort, Conflict, NotFound
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger(__name__)

Overlay = dict[str, str | None]


class AnnotationWriter:
    MAX_ATTEMPTS = 5

    def __init__(
        self,
        port: ClusterPort,
        clock: Clock,
        take: Callable[[str], tuple[Overlay, Overlay] | None],
    ) -> None:
        """`take(name)` returns (annotations, labels) still to be written for a pod, or None."""
        self._port = port
        self._clock = clock
        self._take = take
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="annotation-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()

    def enqueue(self, name: str) -> None:
        with self._wake:
            if name not in self._queued:
                self._queued.add(name)
                self._queue.append(name)
                self._wake.notify()

    def flush(self, name: str) -> None:
        """Write now, on the calling thread (for paths that must persist before they go on)."""
        self.write(name)

    def _run(self) -> None:
        while True:
            with self._wake:
                woken = not self._queue
                while not self._queue and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
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
            pending = self._take(name)
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
                return
            except Conflict:
                # Our cached copy is older than the server's; the watch brings the newer one shortly.
                self._clock.sleep(0.05 * (attempt + 1))
            except NotFound:
                return
            except ClusterError as error:
                log.warning("could not persist the state of pod %s: %s", name, error)
                return
        log.warning("pod %s kept changing; its state will be written at the next ping", name)


def unconfirmed(wanted: Mapping[str, str | None], actual: Mapping[str, str]) -> Overlay:
    """The part of `wanted` that `actual` does not show yet."""
    return {key: value for key, value in wanted.items() if actual.get(key) != value}
