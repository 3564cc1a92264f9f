"""Explains decisions: a line in the job's console (when there is a job) and in the log.

Console lines are calls to GoCD; should-assign-work must not wait for one (it runs inside GoCD's
assignment lock), so lines go out from a background thread in the order they were said.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from elastic_agent.gocd import GoCDError, GoCDServer
from elastic_agent.yielding import let_the_answer_go_first

log = logging.getLogger("elastic_agent.decisions")

CONSOLE_PREFIX = "[kubernetes-reuse] "


class Narrator:
    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[GoCDServer, dict[str, Any], str] | None] = queue.Queue(maxsize=10_000)
        self._thread = threading.Thread(target=self._run, name="console-lines", daemon=True)
        self._thread.start()

    def decision(self, text: str, gocd: GoCDServer | None = None, job: dict[str, Any] | None = None) -> None:
        log.info("%s", text)
        if gocd is not None and job is not None:
            try:
                self._queue.put_nowait((gocd, job, text))
            except queue.Full:
                log.warning("too many console lines waiting; dropped one")

    def console_now(self, gocd: GoCDServer, job: dict[str, Any], text: str) -> None:
        """For request paths that may wait: the line is in the console before the answer."""
        _send(gocd, job, text)

    def drain(self, timeout_s: float = 5.0) -> None:
        done = threading.Event()
        self._queue.put((_Marker(done), {}, ""))  # type: ignore[arg-type]
        done.wait(timeout_s)

    def stop(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            woken = self._queue.empty()
            item = self._queue.get()
            if woken:
                let_the_answer_go_first()  # before this thread takes the GIL for a call to GoCD
            if item is None:
                return
            gocd, job, text = item
            if isinstance(gocd, _Marker):
                gocd.done.set()
                continue
            _send(gocd, job, text)


class _Marker:
    def __init__(self, done: threading.Event) -> None:
        self.done = done


def _send(gocd: GoCDServer, job: dict[str, Any], text: str) -> None:
    try:
        gocd.console_log(job, f"{CONSOLE_PREFIX}{text}\n")
    except GoCDError as error:
        log.warning("could not write to a job's console: %s", error)
