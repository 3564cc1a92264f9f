"""Simulations the advisor made before, kept on disk so that advising again on the same trace is quick.

A run's figures depend on the jobs simulated, the policy, the simulation's settings and the code that
simulates; an entry is keyed by a digest of all four. The jobs by their fields, the policy and settings
by their `repr` (a run whose repr holds an object's address is not kept: it would never be found again),
the code by `elastic_agent.__version__` and a digest of the source files of what a run executes: the
packages elastic_agent (the advisor's modules aside, but for installation.py, whose function runs in the
workers), executors and profiles. Any change to them is a new key.

An entry is a pickle of the run's figures, written to a temporary file and renamed into place, so that a
reader never sees half of one; an entry that cannot be read (truncated, from another version, not ours)
is a miss, made again and written anew. The directory is the user's own
(`$XDG_CACHE_HOME/gocd-reuse-advisor`, else `~/.cache/gocd-reuse-advisor`; `advise --cache-dir` or the
environment's GOCD_REUSE_ADVISOR_CACHE, a directory or `off`, say otherwise): entries are unpickled,
so it must not be writable by others.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import pickle
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import elastic_agent

ENVIRONMENT = "GOCD_REUSE_ADVISOR_CACHE"  # a directory, or "off"
_MAGIC = "gocd-reuse-advisor run 1"
MISSING = object()  # what `get` gives for an entry it has not


def default_directory() -> Path | None:
    """Where entries are kept unless the command line says: GOCD_REUSE_ADVISOR_CACHE (None when it is
    `off`), else the XDG cache directory's gocd-reuse-advisor."""
    given = os.environ.get(ENVIRONMENT, "")
    if given:
        return None if given.lower() == "off" else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gocd-reuse-advisor"


@functools.cache
def code_version() -> str:
    """elastic_agent's version and a digest of the source of every module a simulation executes."""
    digest = hashlib.sha256()
    for package in ("elastic_agent", "executors", "profiles"):
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            root = Path(folder)
            for path in sorted(root.rglob("*.py")):
                relative = path.relative_to(root).as_posix()
                if package == "elastic_agent" and _advisor_only(relative):
                    continue
                digest.update(f"{package}/{relative}\0".encode())
                digest.update(path.read_bytes())
                digest.update(b"\0")
    return f"{elastic_agent.__version__}+{digest.hexdigest()[:16]}"


def _advisor_only(relative: str) -> bool:
    """The advisor's modules decide and report; only installation.py's function runs in the workers."""
    return relative.startswith("advisor/") and relative != "advisor/installation.py"


class RunCache:
    """Runs' figures on disk under `directory`, by `key`; counts the hits and misses. Thread-safe."""

    def __init__(self, directory: Path, version: str | None = None) -> None:
        self.directory = directory
        self.version = version if version is not None else code_version()
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._digests: dict[int, tuple[object, str]] = {}  # by id: the jobs (kept alive), their digest

    def key(self, call: Callable[[Any], Any], run: Any) -> str | None:
        """The entry of `call(run)` for a run (jobs, policy, settings); None when it cannot have one."""
        if not (isinstance(run, tuple) and len(run) == 3):
            return None
        jobs, policy, settings = run
        described = f"{policy!r}\n{settings!r}"
        if " at 0x" in described:  # an object's address: never the same twice
            return None
        name = f"{getattr(call, '__module__', '')}.{getattr(call, '__qualname__', '')}"
        text = f"{_MAGIC}\n{self.version}\n{name}\n{self._jobs_digest(jobs)}\n{described}"
        return hashlib.sha256(text.encode()).hexdigest()

    def _jobs_digest(self, jobs: Sequence[Any]) -> str:
        with self._lock:
            known = self._digests.get(id(jobs))
        if known is not None and known[0] is jobs:
            return known[1]
        digest = hashlib.sha256()
        for job in jobs:
            digest.update(repr(job).encode())
            digest.update(b"\n")
        found = digest.hexdigest()
        with self._lock:
            self._digests[id(jobs)] = (jobs, found)
        return found

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.pickle"

    def get(self, key: str) -> Any:
        """The entry's figures, or `MISSING` (and counted a miss) when there is none that can be read."""
        try:
            with self._path(key).open("rb") as file:
                magic, stored_key, value = pickle.load(file)
            if magic != _MAGIC or stored_key != key:
                raise ValueError("not this entry")
        except Exception:  # absent, truncated, another version's, not a pickle at all: made again
            with self._lock:
                self.misses += 1
            return MISSING
        with self._lock:
            self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Writes the entry atomically (a temporary file renamed into place); a failure to write only
        means the run is not kept."""
        path = self._path(key)
        temporary: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False) as file:
                temporary = Path(file.name)
                pickle.dump((_MAGIC, key, value), file, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink(missing_ok=True)

    def said(self) -> str:
        """One line for stderr: how many runs came from the cache."""
        runs = self.hits + self.misses
        return f"advise: {self.hits} of {runs} simulations came from the cache in {self.directory}"
