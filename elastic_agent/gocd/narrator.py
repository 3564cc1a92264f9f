"""Explains decisions: a line in the job's console (when there is a job) and in the log.

Console lines are calls to GoCD; should-assign-work must not wait for one (it runs inside GoCD's
assignment lock), so `ThreadedNarrator` sends them from a background thread in the order they were
said. `Narrator` is the seam: the simulator passes one that writes at once on the caller's thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Protocol

from elastic_agent.gocd.server import GoCDError, GoCDServer
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger("elastic_agent.decisions")

CONSOLE_PREFIX = "[kubernetes-reuse] "

Job = dict[str, Any]  # a job identifier as GoCD sends it (messages.JobIdentifier.to_json)


class Narrator(Protocol):
    def decision(self, text: str, gocd: GoCDServer | None = None, job: Job | None = None) -> None:
        """Log `text`; with a job, also write it to the job's console, soon."""

    def console_now(self, gocd: GoCDServer, job: Job, text: str) -> None:
        """For request paths that may wait: the line is in the console before the answer."""

    def stop(self, deadline: float) -> None:
        """Send the lines said so far until `deadline` (time.monotonic()), then stop."""


class ThreadedNarrator:
    CAPACITY = 10_000  # console lines waiting; past it a line is dropped (and the drop logged)

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[GoCDServer, Job, str] | None] = queue.Queue(maxsize=self.CAPACITY)
        self._thread = threading.Thread(target=self._run, name="console-lines", daemon=True)
        self._thread.start()

    def decision(self, text: str, gocd: GoCDServer | None = None, job: Job | None = None) -> None:
        log.info("%s", text)
        if gocd is not None and job is not None:
            try:
                self._queue.put_nowait((gocd, job, text))
            except queue.Full:
                log.warning("too many console lines waiting; dropped one")

    def console_now(self, gocd: GoCDServer, job: Job, text: str) -> None:
        send_console_line(gocd, job, text)

    def backlog(self) -> int:
        """Console lines said and not sent yet (bounded by the queue's size)."""
        return self._queue.qsize()

    def stop(self, deadline: float) -> None:
        # Real time on purpose: how long the process may take to exit, not a decision's time.
        self._queue.put(None)  # after every line said so far
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while True:
            woken = self._queue.empty()
            item = self._queue.get()
            if woken:
                let_the_answer_go_first()  # before this thread takes the GIL for a call to GoCD
            if item is None:
                return
            gocd, job, text = item
            send_console_line(gocd, job, text)


def send_console_line(gocd: GoCDServer, job: Job, text: str) -> None:
    try:
        gocd.console_log(job, f"{CONSOLE_PREFIX}{text}\n")
    except GoCDError as error:
        log.warning("could not write to a job's console: %s", error)
