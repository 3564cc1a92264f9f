"""The heap trimmer: glibc's malloc_trim, once a minute of the injected clock, from its own thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from elastic_agent.clock import ManualClock
from elastic_agent.service.heap_trim import (
    HeapTrimmer,
    find_malloc_trim,
    jemalloc_in_process,
    start_heap_trimmer,
)
from elastic_agent.service.wsgi import build_backend, serve_in_background


def test_the_trimmer_calls_trim_once_per_interval_of_the_injected_clock() -> None:
    clock = ManualClock(start=1000.0)
    stopping = threading.Event()
    called_at: list[float] = []

    def trim(pad: int) -> int:
        assert pad == 0
        called_at.append(clock.now())
        if len(called_at) == 3:
            stopping.set()
        return 1

    HeapTrimmer(clock, stopping, trim, every_s=60.0).run()  # ManualClock: sleeping moves the clock
    assert called_at == [1060.0, 1120.0, 1180.0]


def test_no_trimmer_runs_when_the_interval_is_zero() -> None:
    assert start_heap_trimmer(ManualClock(), threading.Event(), every_s=0) is None


def test_no_trimmer_runs_where_jemalloc_is_the_allocator() -> None:
    # As the image runs the backend (LD_PRELOAD, docker/Dockerfile): glibc's heaps hold next to nothing.
    check = (
        "import threading\n"
        "from elastic_agent.clock import ManualClock\n"
        "from elastic_agent.service.heap_trim import jemalloc_in_process, start_heap_trimmer\n"
        "assert jemalloc_in_process()\n"
        "assert start_heap_trimmer(ManualClock(), threading.Event(), every_s=60) is None\n"
    )
    env = {**os.environ, "LD_PRELOAD": "libjemalloc.so.2"}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not jemalloc_in_process(), "the suite itself runs on glibc's malloc"


def test_the_service_trims_its_heap_by_default_and_the_thread_ends_when_it_stops() -> None:
    service = serve_in_background(build_backend("a-token", None), "a-token")
    trimmer = service.heap_trimmer
    assert trimmer is not None and trimmer.is_alive()  # this machine's C library is glibc
    assert trimmer.every_s == 60.0
    service.stop()
    trimmer.join(timeout=10)
    assert not trimmer.is_alive()


def test_a_service_told_never_to_trim_starts_no_trimmer() -> None:
    service = serve_in_background(build_backend("a-token", None), "a-token", heap_trim_every_s=0)
    try:
        assert service.heap_trimmer is None
    finally:
        service.stop()


FRAGMENT_AND_TRIM = """
import sys
from elastic_agent.service.heap_trim import find_malloc_trim

def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

# 4 KiB objects go to malloc, not pymalloc; keeping one in 32 scatters the survivors over the heap, so
# that freeing the others leaves pages malloc does not give back by itself.
blocks = [bytes(4000) + i.to_bytes(4, "little") for i in range(40000)]
kept = blocks[::32]
del blocks
before = rss_kib()
find_malloc_trim()(0)
print(before, rss_kib(), len(kept))
"""


def test_malloc_trim_gives_back_the_pages_of_freed_memory_scattered_among_live_objects() -> None:
    assert find_malloc_trim() is not None
    result = subprocess.run(
        [sys.executable, "-c", FRAGMENT_AND_TRIM], capture_output=True, text=True, timeout=60, check=True
    )
    before_kib, after_kib, _ = map(int, result.stdout.split())
    # About 150 MiB were freed in 4 KiB pieces between live ones; most of it must leave the process.
    assert before_kib - after_kib > 100 * 1024, result.stdout

