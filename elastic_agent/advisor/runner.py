"""Simulations run for the advisor: side by side in worker processes, one pool for the whole advice.

A simulation is CPU-bound Python, so processes (the standard library's pool), not threads; each
profile's search waits on its own runs from a thread of its own, so the pool is shared and locked where
results are counted. It takes the function to run rather than importing the simulator: `advise.py`
stays the advisor's one module that does.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from elastic_agent.traces.measures import PolicyResult


class Runner:
    """Runs simulations, side by side in `workers` processes (one pool for the whole advice), and tells
    `done` of each result. Thread-safe: each profile's search may wait on its own runs meanwhile."""

    def __init__(self, workers: int = 1, done: Callable[[PolicyResult], None] | None = None) -> None:
        self._pool = concurrent.futures.ProcessPoolExecutor(workers) if workers > 1 else None
        self._done = done
        self._lock = threading.Lock()
        self.runs = 0

    def submit(self, call: Callable[[Any], Any], run: Any) -> concurrent.futures.Future[Any]:
        if self._pool is not None:
            future = self._pool.submit(call, run)
        else:
            future = concurrent.futures.Future()
            future.set_result(call(run))
        future.add_done_callback(self._report)
        return future

    def _report(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self.runs += 1
            result = future.result()
            if isinstance(result, dict):  # a run split by profile: one run, the same wall time in each
                result = next(iter(result.values()))
            if self._done is not None:
                self._done(result)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
