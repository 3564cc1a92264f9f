"""The soak runs the backend on the allocator it is asked for (benchmarks/soak.py): the environment it
gives the backend preloads jemalloc by the image's soname, or clears any preload for glibc, and the check
it makes on the running backend tells the two apart from the process's memory map."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.soak import allocator_environment, allocator_in_use


def _sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    # Python itself, so that the map is read once the interpreter (and any preload) is in place.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"],
        env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == b"up\n"
    return child


def test_the_soaks_jemalloc_environment_puts_jemalloc_in_the_backends_memory_map() -> None:
    child = _sleeper(allocator_environment("jemalloc"))
    try:
        assert allocator_in_use(child.pid) == "jemalloc"
    finally:
        child.communicate(b"", timeout=30)


def test_the_soaks_glibc_environment_clears_a_preload_it_inherits() -> None:
    child = _sleeper({**allocator_environment("jemalloc"), **allocator_environment("glibc")})
    try:
        assert allocator_in_use(child.pid) == "glibc"
    finally:
        child.communicate(b"", timeout=30)
    assert allocator_in_use(os.getpid()) == "glibc", "the suite itself runs on glibc's malloc"
