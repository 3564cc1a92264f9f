"""Handler threads for the plugin requests that may wait on the network, so that stopping still answers
every request in flight.

A waitress worker that runs a request itself cannot answer before the request is done. A create-agent
waiting on a Kubernetes API or a GoCD callback endpoint that accepts the connection and never answers
holds its worker until the client library's timeout, longer than a SIGTERM leaves for answers; closing the
connections then would drop it without a response. So such a request runs on a handler thread here while
the worker waits for its answer. Once stopping gives up on the requests still running (`give_up`), every
worker still waiting answers at once with what its caller gave for that case (a 503 with a sentence,
service/app.py), and waitress writes that answer before the connections close.

The handler threads are daemons, so one still blocked on the network does not keep the process from
exiting; that is also why this is not `concurrent.futures.ThreadPoolExecutor`, whose threads the
interpreter joins at exit. They are reused, not started per request, and one idle for a while ends.

A hand-over costs two thread switches, which the hot path cannot afford: the requests answered from memory
(`executors.dispatch.FROM_MEMORY`, should-assign-work among them) stay on the worker.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Call(Generic[T]):
    """One request handed over: `done` is set by its handler once `answer` (or `error`) is there, or by
    `give_up`, with neither."""

    __slots__ = ("answer", "done", "error", "finished", "run")

    def __init__(self, run: Callable[[], T]) -> None:
        self.run = run
        self.done = threading.Event()
        self.finished = False
        self.answer: T | None = None
        self.error: BaseException | None = None


class Handlers(Generic[T]):
    """Runs `answer`'s requests on reused daemon threads; `give_up` answers those still running.

    `_lock` guards `_idle`, `_waiting` and `_given_up`. `_idle` counts the threads that wait, or are about
    to wait, for a request, less the requests queued for them: a request that finds none starts a thread;
    a thread that has waited `idle_exit_s` for a request ends, unless a request is on its way to it."""

    def __init__(self, idle_exit_s: float = 60.0) -> None:
        self._idle_exit_s = idle_exit_s
        self._queue: queue.SimpleQueue[_Call[T]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._waiting: set[_Call[T]] = set()
        self._given_up = False

    def answer(self, run: Callable[[], T], given_up: Callable[[], T]) -> T:
        """`run()`'s result, computed on a handler thread, waited for as long as it takes; `given_up()`
        (on this thread) once `give_up` has been called before it was there."""
        call = _Call(run)
        with self._lock:
            if self._given_up:
                return given_up()
            self._waiting.add(call)
            start = self._idle == 0
            if not start:
                self._idle -= 1
        if start:
            threading.Thread(target=self._serve, name="plugin-handler", daemon=True).start()
        self._queue.put(call)
        try:
            call.done.wait()
        finally:
            with self._lock:
                self._waiting.discard(call)
        if not call.finished:
            return given_up()
        if call.error is not None:
            raise call.error
        return call.answer  # type: ignore[return-value]  # finished without an error: run() returned it

    def give_up(self) -> int:
        """Every request still waiting for its handler is answered by its `given_up` at once, and so is
        every later one; their handlers run on, and are abandoned. How many were waiting."""
        with self._lock:
            self._given_up = True
            waiting = list(self._waiting)
        for call in waiting:
            call.done.set()
        return len(waiting)

    def _serve(self) -> None:
        while True:
            try:
                call = self._queue.get(timeout=self._idle_exit_s)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # more threads wait than requests are queued: this one may go
                        self._idle -= 1
                        return
                continue
            try:
                call.answer = call.run()
            except BaseException as error:  # raised again on the worker, as if it had run the request
                call.error = error
            call.finished = True
            with self._lock:  # idle before the answer is out: the same worker's next request finds it
                self._idle += 1
            call.done.set()
            del call  # an idle thread keeps no request (nor its body) alive
