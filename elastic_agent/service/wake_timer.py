"""The thread that wakes the backend between GoCD's calls.

The backend otherwise only acts when GoCD calls it, and two things should not wait for the next
server-ping (a minute): a ReuseSchedule period that wants idle pods from 07:00, and the jobs whose pods
the Kubernetes API refused while it was away, once it answers again. This thread asks the backend when
it wants waking next (`Backend.next_wake`) and wakes it then (`Backend.wake`). It sleeps on the
injected clock in short steps, so that a profile seen for the first time has its schedule watched
within seconds, an outage's end is acted on within seconds, a scaled clock runs it faster, and stopping
never waits for it. (The virtual-time simulators have no threads: their event loops ask the same two
backend methods.)
"""

from __future__ import annotations

import logging
import threading

from elastic_agent.backend import Backend
from elastic_agent.redaction import traceback_text

log = logging.getLogger(__name__)

STEP_S = 5.0  # clock seconds between looks when nothing is due sooner


class WakeTimer(threading.Thread):
    def __init__(self, backend: Backend, stopping: threading.Event) -> None:
        super().__init__(name="wake-timer", daemon=True)
        self.backend = backend
        self.stopping = stopping

    def run(self) -> None:
        clock = self.backend.clock
        while not self.stopping.is_set():
            due = self.backend.next_wake()
            now = clock.now()
            if due is not None and due <= now:
                try:
                    self.backend.wake()
                except Exception:  # the next wake must still come: say it, keep the thread
                    log.error("could not serve waiting jobs or fill warm pools\n%s", traceback_text())
                continue
            clock.sleep(STEP_S if due is None else min(STEP_S, due - now))
