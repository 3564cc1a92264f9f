"""Builds a running backend from its configuration, the real parts wired once, and serves it with
waitress: started in a background thread, stopped gracefully (what SIGTERM does; cli.py).

Stopping, in order, within a deadline: stop accepting connections; let the requests in flight be
answered and their answers written; answer those still waiting on the network with a 503 (in_flight.py)
and write those answers too; close the connections; then the backend writes every queued pod state
change and console line and stops watching (Backend.stop). No request in flight sees its connection
closed without an answer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Flask
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import create_server
from waitress.utilities import RequestEntityTooLarge

from elastic_agent import __version__
from elastic_agent.backend import Backend, ClusterFactory
from elastic_agent.clock import Clock, SystemClock
from elastic_agent.gocd.server import GoCDServers
from elastic_agent.gocd.shared_token import SharedToken
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.service.app import (
    MAX_BODY_BYTES,
    PLUGIN_PATH,
    PluginAnswer,
    backend_version_header,
    create_app,
    too_large,
)
from elastic_agent.service.heap_trim import DEFAULT_EVERY_S, HeapTrimmer, start_heap_trimmer
from elastic_agent.service.in_flight import Handlers
from elastic_agent.service.metrics import Metrics
from elastic_agent.service.period_timer import PeriodTimer
from profiles.cluster import ClusterProfile

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger(__name__)

# What SIGTERM may take in all, and the part of it the requests in flight get; the rest is for writing
# state to the pods. Kubernetes' default grace period is 30 s; GoCD's bridge waits 10 s. The requests
# still waiting on the network then are answered 503, and those answers get GIVEN_UP_WRITTEN_WITHIN_S to
# be written (a few hundred bytes each, to a client that is waiting for them).
STOP_WITHIN_S = 9.0
ANSWERS_WITHIN_S = 4.0
GIVEN_UP_WRITTEN_WITHIN_S = 1.0


def kubernetes_cluster(profile: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
    """The official client, connected from the profile's URL, token and CA (else in-cluster, else
    kubeconfig), watching only this backend's pods."""
    api_client = connect(
        url=profile.kubernetes_cluster_url,
        token=profile.security_token,
        ca_cert=profile.kubernetes_cluster_ca_cert,
    )
    return KubeCluster(
        api_client,
        namespace=profile.namespace,
        selector=identity.selector(),
        clock=clock,
        request_timeout=profile.cluster_request_timeout,
    )


def build_backend(
    token: str | SharedToken,
    callback_url: str | None,
    clock: Clock | None = None,
    cluster_factory: ClusterFactory = kubernetes_cluster,
) -> Backend:
    clock = clock or SystemClock()
    return Backend(
        clock=clock,
        gocd_servers=GoCDServers(token, callback_url),
        cluster_factory=cluster_factory,
        remote_files=RemoteFileFetcher(clock),
    )


# Bytes of a response waitress buffers before a worker thread writes them to the socket itself; a
# smaller response is written by waitress's I/O thread once the request is done, in one send() with its
# headers. Waitress's default since 1.3 is 1: every worker writes its status line and headers, then its
# body, as soon as each is produced. With several connections busy at once that costs this GIL-bound
# process dearly: each send() lets the GIL go, and the I/O thread and the other workers, woken on the
# other core, take it in turn, again and again per request. 18,000 (waitress's default before 1.3)
# covers every answer of the hot path, and with it the backend spends far less CPU per concurrent
# request and answers many more of them (benchmarks/RESULTS.md section 3 has the figures); one client
# alone is answered as fast either way. Larger answers (status pages) still stream out in 18,000-byte
# steps from the worker.
SEND_BYTES = 18_000


def waitress_options() -> dict[str, Any]:
    """`send_bytes` has been deprecated, though honoured, since waitress 1.3 ("pending removal"): should a
    release drop it, the backend still starts, only slower under concurrent requests (and
    tests/http/test_service_tuning.py says so)."""
    return {"send_bytes": SEND_BYTES} if hasattr(Adjustments, "send_bytes") else {}


class _BodyTooLarge(RequestEntityTooLarge):
    """waitress's 413, with the sentence the application gives (app.too_large) instead of its own, and
    the backend's version, as every answer of the application has it."""

    def __init__(self, path: str) -> None:
        super().__init__(too_large(path.removeprefix(PLUGIN_PATH), MAX_BODY_BYTES))

    # types-waitress says the body is str; waitress's own to_response returns bytes, and writes them.
    def to_response(self, _ident: str | None = None) -> tuple[str, list[tuple[str, str]], bytes]:  # type: ignore[override]
        headers = [("Content-Type", "text/plain; charset=utf-8"), backend_version_header(__version__)]
        return f"{self.code} {self.reason}", headers, self.body.encode()


class _LimitedParser(HTTPRequestParser):
    """Refuses a body over the limit as soon as waitress does: from a declared Content-Length, in the
    headers, before the body is sent; a chunked one once it has grown past the limit. (waitress buffers
    a whole body before the application sees it, so a limit checked only there would be checked after
    the bytes were read, to a temporary file.)"""

    def received(self, data: bytes) -> int:
        consumed: int = super().received(data)
        if type(self.error) is RequestEntityTooLarge:
            self.error = _BodyTooLarge(getattr(self, "path", None) or "")  # set with the headers
        return consumed


class _LimitedChannel(HTTPChannel):
    parser_class = _LimitedParser


class WsgiServer:
    """A waitress server with this service's settings, bound at once, run by `start()` in a thread.

    waitress has no stop(): its loop ends when its socket map is empty, and the map must be emptied on
    the loop's own thread (closing from another thread races its select()). So the server is given a
    map of our own, and `stop` closes what is in it through waitress's trigger."""

    def __init__(self, app: WSGIApplication, host: str, port: int, threads: int) -> None:
        self._map: dict[int, Any] = {}
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "send_bytes will be removed", DeprecationWarning)
            server: Any = create_server(
                app,
                map=self._map,
                host=host,
                port=port,
                threads=threads,
                ident="gocd-elastic-agent",
                # waitress refuses from this size on (>=); a body of exactly the limit is read. The app
                # checks the same limit for other WSGI servers. Chunked bodies count their framing.
                max_request_body_size=MAX_BODY_BYTES + 1,
                **waitress_options(),
            )
        server.channel_class = _LimitedChannel
        self.server = server
        self.port: int = server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self.server.run, name="waitress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, answers_by: float, give_up: Callable[[], int] = lambda: 0) -> None:
        """Stop accepting, answer what is in flight until `answers_by` (time.monotonic()); then
        `give_up()`, which has the requests still waiting on the network answered at once (it says how
        many), and let those answers be written; close."""
        server = self.server
        if self._thread.is_alive():
            with contextlib.suppress(OSError):  # the loop closed its trigger already: it is ending
                # The listening socket only: the server's own close() would close the trigger too,
                # which the workers still pull to hand their answers to the loop.
                server.trigger.pull_trigger(lambda: wasyncore.dispatcher.close(server))
            self._wait_for_answers(answers_by)
            given_up = give_up()
            if given_up:
                log.warning("stopping: %d request(s) still waiting on the network answered 503", given_up)
            # Those answers, and any request still queued (given up on as soon as it starts).
            self._wait_for_answers(time.monotonic() + GIVEN_UP_WRITTEN_WITHIN_S)
            with contextlib.suppress(OSError):
                server.trigger.pull_trigger(lambda: [channel.close() for channel in list(self._map.values())])
            self._thread.join(timeout=5)
        server.task_dispatcher.shutdown(timeout=1)

    def _wait_for_answers(self, until: float) -> None:
        while time.monotonic() < until and self._answering():
            time.sleep(0.01)

    def _answering(self) -> bool:
        """Requests queued or being served, or answers not yet sent (waitress's dispatcher and channel
        attributes: it offers no public way to ask)."""
        dispatcher = self.server.task_dispatcher
        if dispatcher.queue or dispatcher.active_count:
            return True
        return any(
            getattr(channel, "requests", None) or getattr(channel, "total_outbufs_len", 0)
            for channel in list(self._map.values())
        )


@dataclass
class RunningService:
    """A backend served by waitress in a background thread (the CLI, tests, the demo)."""

    app: Flask
    backend: Backend
    url: str
    server: WsgiServer
    stopping: threading.Event
    handlers: Handlers[PluginAnswer]  # the app's: those that stopping gives up on
    heap_trimmer: HeapTrimmer | None = None

    def stop(self, within_s: float = STOP_WITHIN_S) -> None:
        self.stopping.set()
        # Real time on purpose: how long the process may take to exit, not the plugin's (scaled) time.
        started = time.monotonic()
        answers_by = started + min(ANSWERS_WITHIN_S, within_s / 2)
        self.server.stop(answers_by, give_up=self.handlers.give_up)
        self.backend.stop(deadline=started + within_s)


def serve_in_background(
    backend: Backend,
    token: str | SharedToken,
    host: str = "127.0.0.1",
    port: int = 0,
    threads: int = 16,
    heap_trim_every_s: float = DEFAULT_EVERY_S,
) -> RunningService:
    stopping = threading.Event()
    handlers: Handlers[PluginAnswer] = Handlers()
    app = create_app(backend, token, Metrics(), stopping=stopping, handlers=handlers)
    server = WsgiServer(app, host, port, threads)
    server.start()
    PeriodTimer(backend, stopping).start()
    trimmer = start_heap_trimmer(backend.clock, stopping, heap_trim_every_s)
    url = f"http://{host}:{server.port}"
    return RunningService(app, backend, url, server, stopping, handlers, trimmer)
