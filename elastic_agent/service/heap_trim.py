"""Giving the C allocator's freed memory back to the operating system, once a minute.

Why: on glibc's malloc the backend's resident memory grows while its Python objects stay flat (the soak,
benchmarks/soak.py; its figures are in RESULTS.md section 8). What grows is malloc's freed-but-kept
memory: request bodies, parsed profiles and the Kubernetes client's responses are larger than pymalloc's
512-byte blocks and go to malloc, and malloc gives memory back by itself only from the top of a heap, so
long-lived objects scattered among freed ones keep whole pages resident. `malloc_trim(0)` (glibc 2.8 and
later) also releases the free pages inside its heaps. Other long-running servers call it from a
housekeeping thread for the same reason (Orthanc every 100 ms, Icinga 2 every 5 minutes; Dask documents
the allocator's trim threshold for its workers). A call walks the heap under the allocator's lock, for
longer the more there is to give back, so it is made from its own thread, once a minute, never on a
request's path.

Where the C library has no `malloc_trim` (musl-based images, macOS), there is nothing to call: the thread
is not started and the log says so once at DEBUG. Nor is it where jemalloc is the process's allocator
(the image preloads it, docker/Dockerfile): glibc's heaps then hold next to nothing, and jemalloc gives
freed pages back by itself after its decay time. Trimming does not give back what glibc's per-thread
arenas keep; jemalloc does, which is why the image runs on it (RESULTS.md section 8).

The thread sleeps on the injected clock in short steps, like the period timer, so that stopping never
waits for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

from elastic_agent.clock import Clock

log = logging.getLogger(__name__)

DEFAULT_EVERY_S = 60.0
STEP_S = 5.0


def find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer(threading.Thread):
    """Calls `trim(0)` every `every_s` seconds of `clock` until `stopping` is set."""

    def __init__(
        self, clock: Clock, stopping: threading.Event, trim: Callable[[int], int], every_s: float
    ) -> None:
        super().__init__(name="heap-trim", daemon=True)
        self.clock, self.stopping, self.trim, self.every_s = clock, stopping, trim, every_s

    def run(self) -> None:
        due = self.clock.now() + self.every_s
        while not self.stopping.is_set():
            now = self.clock.now()
            if now >= due:
                self.trim(0)
                due = now + self.every_s
                continue
            self.clock.sleep(min(STEP_S, due - now))


def jemalloc_in_process() -> bool:
    """Whether jemalloc serves this process's malloc (preloaded): its `mallctl` is then in the global
    symbol table."""
    return hasattr(ctypes.CDLL(None), "mallctl")


def start_heap_trimmer(clock: Clock, stopping: threading.Event, every_s: float) -> HeapTrimmer | None:
    """The started trimmer, or None when `every_s` is 0, the C library cannot trim or jemalloc is the
    allocator."""
    if every_s <= 0:
        return None
    if jemalloc_in_process():
        log.debug("jemalloc is the allocator: it gives freed memory back by itself, no malloc_trim")
        return None
    trim = find_malloc_trim()
    if trim is None:
        log.debug("the C library has no malloc_trim: freed memory is left to the allocator")
        return None
    trimmer = HeapTrimmer(clock, stopping, trim, every_s)
    trimmer.start()
    return trimmer
