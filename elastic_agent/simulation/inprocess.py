"""The backend in process, for virtual time: the real executors, pool and reaper, without HTTP or threads.

- `InProcessTransport`: the simulated GoCD server's `PluginTransport`, calling the executors of the
  dispatch table directly (with the same error-to-answer mapping as the HTTP app).
- `InProcessGoCDServer`: the backend's `GoCDServer` answered by `ServerApi` (the simulated server's
  `GoApplicationAccessor.submit`): it is `HttpGoCDServer` with its one HTTP method replaced, so bodies
  and answers are parsed by the production code.
- `VirtualTimeBackend`: a `Backend` whose background work happens when the driver says so. The pool's
  `AnnotationWriter` normally persists state changes from a thread "soon" after a decision; here each
  pool gets a `DeferredWriter` whose queue the driver drains after every event (the least invasive seam:
  the pool's decisions and its in-memory overlay are untouched, only *when* the patch is sent changes,
  from "a few milliseconds later" to "at the end of this instant"). Console lines are sent synchronously
  (or only counted) instead of from the narrator's thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import urllib3

from elastic_agent.annotation_writer import AnnotationWriter
from elastic_agent.app import answer_safely
from elastic_agent.backend import Backend, ClusterFactory
from elastic_agent.clock import Clock
from elastic_agent.gocd import API_VERSIONS, CONSOLE_LOG, GoCDError, GoCDServer, GoCDServers, HttpGoCDServer
from elastic_agent.narrator import Narrator
from elastic_agent.pool import ClusterPool
from elastic_agent.remote_file import RemoteFileFetcher
from elastic_agent.simulation.gocd_callbacks import ServerApi
from executors.base import RequestContext
from executors.base import Response as PluginResponse
from executors.dispatch import executor_for
from profiles.cluster import ClusterProfile

CALLBACK_URL = "inprocess://gocd"
TOKEN = "inprocess-token-not-a-secret"


class InProcessGoCDServer(HttpGoCDServer):
    """GoCD's server calls answered by the simulated server in process. `console=False` only counts
    console lines (benchmarks: they cost time and say nothing about waits or pods)."""

    def __init__(self, api: ServerApi, *, console: bool = True) -> None:
        super().__init__(CALLBACK_URL, TOKEN, urllib3.PoolManager(num_pools=1))
        self._api = api
        self.console = console
        self.calls: dict[str, int] = {}

    def _call(self, api: str, body: Any | None = None) -> Any:
        self.calls[api] = self.calls.get(api, 0) + 1
        if api == CONSOLE_LOG and not self.console:
            return None
        payload = "" if body is None else json.dumps(body)
        status, text = self._api.submit(api, API_VERSIONS[api], payload)
        if status != 200:
            raise GoCDError(f"GoCD answered {status} to {api}: {text[:200] or 'no reason given'}")
        return json.loads(text) if text.strip() else None


class InProcessGoCDServers(GoCDServers):
    """Every callback URL leads to the one in-process server."""

    def __init__(self, server: InProcessGoCDServer) -> None:
        super().__init__(TOKEN, CALLBACK_URL)
        self.server = server

    def for_callback(self, header_url: str | None) -> GoCDServer:
        return self.server

    def latest(self) -> GoCDServer | None:
        return self.server


class SyncNarrator(Narrator):
    """Decisions logged, and written to the job's console at once on the caller's thread."""

    def __init__(self) -> None:  # no thread: everything happens in the caller's step
        self.decisions = 0

    def decision(self, text: str, gocd: GoCDServer | None = None, job: dict[str, Any] | None = None) -> None:
        self.decisions += 1
        super().decision(text)  # the log line only
        if gocd is not None and job is not None:
            self.console_now(gocd, job, text)

    def drain(self, timeout_s: float = 5.0) -> None:
        pass

    def stop(self) -> None:
        pass


class DeferredWriter(AnnotationWriter):
    """An AnnotationWriter without a thread: `enqueue` remembers the pod, `drain` writes, in order."""

    def start(self) -> None:
        pass

    def enqueue(self, name: str) -> None:
        if name not in self._queued:
            self._queued.add(name)
            self._queue.append(name)

    def drain(self) -> int:
        written = 0
        while self._queue:
            queue, self._queue = self._queue, []
            self._queued.clear()
            for name in queue:
                self.write(name)
                written += 1
        return written


@dataclass
class VirtualTimeBackend(Backend):
    """A Backend for the discrete-event driver (see the module's docstring)."""

    writers: list[DeferredWriter] = field(default_factory=list)

    def pool(self, profile: ClusterProfile, gocd: GoCDServer) -> ClusterPool:
        pool = super().pool(profile, gocd)
        if not isinstance(pool.writer, DeferredWriter):
            # Swapped before the pool is handed to anyone: nothing can have been queued on the thread.
            threaded = pool.writer
            threaded.stop()
            pool.writer = DeferredWriter(pool.port, self.clock, pool._take_unwritten)
            self.writers.append(pool.writer)
            if threaded._thread is not None:
                threaded._thread.join(timeout=5)
        return pool

    def drain_writes(self) -> int:
        written = 0
        for writer in self.writers:  # a plain loop: this runs after every simulated event
            written += writer.drain()
        return written


def build_inprocess_backend(
    clock: Clock, api: ServerApi, cluster_factory: ClusterFactory, *, console: bool = True
) -> VirtualTimeBackend:
    """The wiring of `service.build_backend`, with the in-process GoCD server and no threads."""
    return VirtualTimeBackend(
        clock=clock,
        gocd_servers=InProcessGoCDServers(InProcessGoCDServer(api, console=console)),
        cluster_factory=cluster_factory,
        remote_files=RemoteFileFetcher(clock),
        narrator=SyncNarrator(),
    )


class InProcessTransport:
    """The simulated server's `PluginTransport`, answered by the executors directly."""

    def __init__(self, backend: Backend, callback_url: str = CALLBACK_URL) -> None:
        self.backend = backend
        self._context = RequestContext(backend, callback_url)
        self.requests: dict[str, int] = {}
        self.seconds: dict[str, float] = {}  # real time spent in the backend, per request name

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        started = time.perf_counter()
        executor = executor_for(request_name)
        if executor is None:
            return 404, f"'{request_name}' is not a request this plugin knows."
        answer: PluginResponse = answer_safely(request_name, lambda: executor(body, self._context))
        self.requests[request_name] = self.requests.get(request_name, 0) + 1
        self.seconds[request_name] = self.seconds.get(request_name, 0.0) + time.perf_counter() - started
        return answer.status, answer.body


def total(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for count in counts:
        for key, value in count.items():
            summed[key] = summed.get(key, 0) + value
    return summed
