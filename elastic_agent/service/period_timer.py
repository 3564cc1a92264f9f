"""The thread that starts ReuseSchedule periods on time.

The backend otherwise only acts when GoCD calls it, and a period that wants idle pods from 07:00 should
not wait for the next server-ping (a minute) or a job's create-agent (when the first job already waits)
to fill the warm pool. This thread asks the backend when a period may change next and calls it then.
It sleeps on the injected clock in short steps, so that a profile seen for the first time has its
schedule watched within seconds, a scaled clock runs it faster, and stopping never waits for it. (The
virtual-time simulator has no threads: its event loop asks the same two backend methods.)
"""

from __future__ import annotations

import logging
import threading

from elastic_agent.backend import Backend
from elastic_agent.redaction import traceback_text

log = logging.getLogger(__name__)

STEP_S = 5.0  # clock seconds between looks when nothing is due sooner


class PeriodTimer(threading.Thread):
    def __init__(self, backend: Backend, stopping: threading.Event) -> None:
        super().__init__(name="reuse-schedule-periods", daemon=True)
        self.backend = backend
        self.stopping = stopping

    def run(self) -> None:
        clock = self.backend.clock
        while not self.stopping.is_set():
            due = self.backend.next_period_change()
            now = clock.now()
            if due is not None and due <= now:
                try:
                    self.backend.on_period_change()
                except Exception:  # the next period must still start: say it, keep the thread
                    log.error("could not fill the warm pools of a ReuseSchedule period\n%s", traceback_text())
                continue
            clock.sleep(STEP_S if due is None else min(STEP_S, due - now))
