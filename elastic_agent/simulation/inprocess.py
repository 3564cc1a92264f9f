"""The backend in process, for virtual time: the real executors, pool and reaper, without HTTP or threads.

Every difference from production is a part passed in through a seam, never a patch:
- The backend's GoCD server: given the simulated server itself, `DirectGoCDServer` (direct_gocd.py)
  calls its methods without JSON between them; otherwise (a test that puts faults into the server's API)
  a `GoCDClient` whose `ServerTransport` is `InProcessServerCalls`, answered by `ServerApi` (the
  simulated server's `GoApplicationAccessor.submit`), so bodies and answers are read by the production
  code.
- `DeferredWriter`: the pools' `StateWriter`. Production persists state changes from a thread "soon"
  after a decision; here the driver drains the queue after every event (the decisions and the in-memory
  overlay are the same, only *when* the patch is sent changes: from "a few milliseconds later" to "at
  the end of this instant"). A pod whose write failed waits for its backoff as in production: it stays
  queued and is tried at the first drain after its due time.
- `DeferredWork`: the backend's and the pools' `Background`. Production does work off the request
  path on a thread "soon"; here the driver does it at the end of the instant, with the deferred writes.
- The pools' first pod lists: the in-process port leaves each list for the driver to answer at the end
  of the instant (inprocess_cluster.py), so the requests of the instant a pool is connected meet a cache
  that has not synced, as in production.
- `SyncNarrator`: console lines are sent at once on the caller's thread (or only counted).

GoCD's requests reach the executors through `InProcessTransport` (inprocess_requests.py), as values.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from elastic_agent.backend import Backend, ClusterFactory
from elastic_agent.background import Background, Work
from elastic_agent.clock import Clock
from elastic_agent.gocd.narrator import Job, send_console_line
from elastic_agent.gocd.server import CONSOLE_LOG, GoCDClient, GoCDServer
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.pool.writer import AnnotationWriter, PendingWrites, StateWriter
from elastic_agent.simulation.direct_gocd import DirectGoCDServer
from elastic_agent.simulation.gocd_callbacks import ServerApi
from elastic_agent.simulation.gocd_model import SimulatedGoCD
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, answer_lists


class InProcessServerCalls:
    """GoCD's server calls answered by the simulated server in process. `console=False` drops console
    lines (benchmarks: they cost time and say nothing about waits or pods)."""

    def __init__(self, api: ServerApi, *, console: bool = True) -> None:
        self._api = api
        self.console = console

    def submit(self, api: str, version: str, body: str) -> tuple[int, str]:
        if api == CONSOLE_LOG and not self.console:
            return 200, ""
        return self._api.submit(api, version, body)


class OneGoCDServer:
    """Every callback URL leads to the one in-process server."""

    def __init__(self, server: GoCDServer) -> None:
        self.server = server

    def for_callback(self, header_url: str | None) -> GoCDServer:
        return self.server


class SyncNarrator:
    """Decisions logged, and written to the job's console at once on the caller's thread."""

    def __init__(self) -> None:
        self.decisions = 0

    def decision(self, text: str, gocd: GoCDServer | None = None, job: Job | None = None) -> None:
        self.decisions += 1
        if gocd is not None and job is not None:
            send_console_line(gocd, job, text)

    def console_now(self, gocd: GoCDServer, job: Job, text: str) -> None:
        send_console_line(gocd, job, text)

    def stop(self, deadline: float) -> None:
        pass


class DeferredWriter:
    """A StateWriter without a thread: `enqueue` remembers the pod, `drain` writes, in order, what is
    due (AnnotationWriter.due); stopping tries everything once."""

    def __init__(self, port: ClusterPort, clock: Clock, pending: PendingWrites) -> None:
        self._writer = AnnotationWriter(port, clock, pending)  # its `write`, never its thread
        self._queue: dict[str, None] = {}  # insertion-ordered, each pod once

    def start(self) -> None:
        pass

    def enqueue(self, name: str) -> None:
        self._queue[name] = None

    def flush(self, name: str) -> None:
        self._writer.flush(name)

    def queued(self) -> bool:
        return bool(self._queue)

    def stop(self, deadline: float) -> int:
        queue, self._queue = self._queue, {}
        return sum(0 if self._writer.write(name) else 1 for name in queue)

    def drain(self) -> int:
        written = 0
        later: dict[str, None] = {}  # failed now, or waiting for the backoff: the next drain's
        while self._queue:
            queue, self._queue = self._queue, {}
            for name in queue:
                if name in later:
                    continue
                if not self._writer.due(name):
                    later[name] = None
                    continue
                written += 1
                if not self._writer.write(name):
                    later[name] = None
        self._queue = later
        return written


class DeferredWork:
    """A `Background` without a thread, shared by the backend and its pools: `drain` does what was
    handed over, in order, and what that hands over in turn."""

    def __init__(self) -> None:
        self._queue: deque[Work] = deque()

    def __call__(self, _name: str) -> Background:  # the backend's BackgroundFactory
        return self

    def submit(self, what: str, work: Work) -> None:
        self._queue.append(work)

    def stop(self, deadline: float) -> None:
        self.drain()

    def drain(self) -> int:
        done = 0
        while self._queue:
            self._queue.popleft()()
            done += 1
        return done


@dataclass
class DeferredWriters:
    """The writer factory of a virtual-time backend; keeps every writer it made for the driver."""

    made: list[DeferredWriter] = field(default_factory=list)

    def __call__(self, port: ClusterPort, clock: Clock, pending: PendingWrites) -> StateWriter:
        writer = DeferredWriter(port, clock, pending)
        self.made.append(writer)
        return writer

    def drain(self) -> int:
        written = 0
        for writer in self.made:  # a plain loop: this runs after every simulated event
            written += writer.drain()
        return written


@dataclass
class InProcessBackend:
    """A backend for the discrete-event driver, with what the driver needs to reach."""

    backend: Backend
    writers: DeferredWriters
    work: DeferredWork = field(default_factory=DeferredWork)
    lists: list[InProcessCluster] = field(default_factory=list)  # first pod lists on their way

    def settle(self) -> int:
        """What production does right after a request, in its order: the first pod lists arrive, the
        background work runs, the state writes go out; until none is left (work may make more).
        Returns how many writes went out."""
        written = 0
        while True:
            answered = answer_lists(self.lists)
            done = self.work.drain()
            wrote = self.writers.drain()
            written += wrote
            if not (answered or done or wrote):
                return written

    def pending_writes(self) -> bool:
        """Whether a write is still queued after the last drain (it failed, or waits for its backoff)."""
        return any(writer.queued() for writer in self.writers.made)


def build_inprocess_backend(
    clock: Clock,
    api: ServerApi,
    cluster_factory: Callable[[list[InProcessCluster]], ClusterFactory],
    *,
    console: bool = True,
    model: SimulatedGoCD | None = None,
) -> InProcessBackend:
    """The wiring of `service.wsgi.build_backend`, with the in-process GoCD server and no threads.
    `cluster_factory(lists)`: the backend's cluster factory, whose ports leave their first list in
    `lists` for the driver (store_cluster_factory's `lists` option). `model`: the server behind `api`,
    called directly (DirectGoCDServer); None: every call goes through `api`."""
    client = GoCDClient(InProcessServerCalls(api, console=console))
    gocd: GoCDServer = client if model is None else DirectGoCDServer(model, client, console=console)
    writers, work = DeferredWriters(), DeferredWork()
    lists: list[InProcessCluster] = []
    backend = Backend(
        clock=clock,
        gocd_servers=OneGoCDServer(gocd),
        cluster_factory=cluster_factory(lists),
        remote_files=RemoteFileFetcher(clock, background=work),
        narrator=SyncNarrator(),
        writer_factory=writers,
        background_factory=work,
    )
    return InProcessBackend(backend, writers, work, lists)
