"""Simulations run for the advisor: side by side in worker processes, one pool for the whole advice.

A simulation is CPU-bound Python, so processes (the standard library's pool), not threads; each
profile's search waits on its own runs from a thread of its own, so the pool is shared and locked where
results are counted. It takes the function to run rather than importing the simulator: `advise.py`
stays the advisor's one module that does.

Runs are started ahead of being asked for (`Started`): the pool is kept full, and a run that turns out
not to be wanted is dropped, cancelled when it has not begun. With a cache (cache.py), a run made before
on the same jobs, policy, settings and code is not made again.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elastic_agent.advisor.cache import MISSING, RunCache
from elastic_agent.traces.measures import PolicyResult


@dataclass(frozen=True)
class Started:
    """A run started ahead of being asked for: `result` waits for its figures; `drop` says they will not
    be asked for (a run not begun is then cancelled)."""

    result: Callable[[], PolicyResult]
    drop: Callable[[], None]


def started(future: concurrent.futures.Future[PolicyResult]) -> Started:
    return Started(future.result, lambda: _cancel(future))


def _cancel(future: concurrent.futures.Future[Any]) -> None:
    future.cancel()


def _keep(cache: RunCache, key: str, future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        cache.put(key, future.result())


class _Deferred(concurrent.futures.Future[Any]):
    """A run in this process, made when its result is first asked for: with one worker, a run started
    ahead that nobody asks for is never made."""

    def __init__(self, call: Callable[[Any], Any], run: Any) -> None:
        super().__init__()
        self._call = call
        self._run = run
        self._making = threading.RLock()  # its callbacks read the result it is setting

    def result(self, timeout: float | None = None) -> Any:
        with self._making:
            if not self.done():
                try:
                    value = self._call(self._run)
                except BaseException as error:
                    self.set_exception(error)
                else:
                    self.set_result(value)
        return super().result(timeout)


class Runner:
    """Runs simulations, side by side in `workers` processes (one pool for the whole advice), and tells
    `done` of each result and `dropped` of each run cancelled before it began. Thread-safe: each
    profile's search may wait on its own runs meanwhile."""

    def __init__(
        self,
        workers: int = 1,
        done: Callable[[PolicyResult], None] | None = None,
        dropped: Callable[[], None] | None = None,
        cache: RunCache | None = None,
    ) -> None:
        self._pool = concurrent.futures.ProcessPoolExecutor(workers) if workers > 1 else None
        self._done = done
        self._dropped = dropped
        self._cache = cache
        self._lock = threading.Lock()
        self.runs = 0

    def submit(self, call: Callable[[Any], Any], run: Any) -> concurrent.futures.Future[Any]:
        """`call(run)` started, or its figures from the cache (cache.py) when it holds them."""
        key = self._cache.key(call, run) if self._cache is not None else None
        future: concurrent.futures.Future[Any]
        if key is not None and self._cache is not None:
            kept = self._cache.get(key)
            if kept is not MISSING:
                future = concurrent.futures.Future()
                future.set_result(kept)
                future.add_done_callback(self._report)
                return future
        future = self._pool.submit(call, run) if self._pool is not None else _Deferred(call, run)
        if key is not None and self._cache is not None:
            future.add_done_callback(functools.partial(_keep, self._cache, key))
        future.add_done_callback(self._report)
        return future

    def _report(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            if future.cancelled():
                if self._dropped is not None:
                    self._dropped()
                return
            self.runs += 1
            result = future.result()
            if isinstance(result, dict):  # a run split by profile: one run, the same wall time in each
                result = next(iter(result.values()))
            result = getattr(result, "whole", result)  # a whole installation's (installation.py)
            if self._done is not None:
                self._done(result)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
