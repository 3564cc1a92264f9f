"""Work the backend does off the request path: what a request decided but must not wait for.

should-assign-work and job-completion answer from memory (GoCD asks the first inside its server-wide
assignment lock, and sends the second once, never again), so what they cannot do without the network
is handed to a `Background`: the ordered retirement of a pod after its last job, connecting a pool
GoCD asked about before it was connected, what a pool does once its first pod list has arrived, taking
over new credentials, refreshing a remote pod template.

`Background` is the seam: production runs each queue on one daemon thread (`WorkerThread`), in the
order the work was handed over; the simulator passes one that it drains at the end of each simulated
instant, as it drains the pods' state writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from elastic_agent.redaction import traceback_text
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger(__name__)

Work = Callable[[], object]  # what it returns is dropped


class Background(Protocol):
    def submit(self, what: str, work: Work) -> None:
        """Do `work` soon, after what was handed over before it; `what` names it in the log."""

    def stop(self, deadline: float) -> None:
        """Do what is queued until `deadline` (time.monotonic()), then stop."""


BackgroundFactory = Callable[[str], Background]  # a name for its thread -> a queue of its own


class WorkerThread:
    """One queue and one daemon thread, started with the first work. Work that raises is logged (its
    traceback with nothing of a request in it: work carries no request body) and the queue goes on.
    Past CAPACITY queued items a submission is dropped and logged: everything handed over here is
    decided again at the next server-ping (a retiring pod stays marked retiring, waiting jobs are
    re-sent by GoCD), so a drop delays, it never loses state."""

    CAPACITY = 10_000

    def __init__(self, name: str = "background") -> None:
        self.name = name
        self._queue: deque[tuple[str, Work]] = deque()
        self._wake = threading.Condition()  # guards the queue, the thread and `_stopping`
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._busy = False

    def submit(self, what: str, work: Work) -> None:
        with self._wake:
            if self._stopping:
                log.debug("not doing %s: stopping", what)
                return
            if len(self._queue) >= self.CAPACITY:
                log.warning("too much background work waiting; dropped %s (a ping does it again)", what)
                return
            self._queue.append((what, work))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._wake.notify()

    def idle(self) -> bool:
        """Nothing queued and nothing running (tests wait for it)."""
        with self._wake:
            return not self._queue and not self._busy

    def stop(self, deadline: float) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            # Real time on purpose: how long stopping may take, not a decision's time.
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._stopping:
                    self._wake.wait()
                if not self._queue:
                    return  # stopping, and everything is done
                what, work = self._queue.popleft()
                self._busy = True
            let_the_answer_go_first()  # woken by a request that is still answering
            try:
                work()
            except Exception:  # one failure must not stop the queue
                log.error("background work failed: %s\n%s", what, traceback_text())
            finally:
                with self._wake:
                    self._busy = False
