"""Builds a running backend from its configuration: the real parts, wired once."""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Flask
from waitress.adjustments import Adjustments
from waitress.server import create_server

from elastic_agent.app import create_app
from elastic_agent.backend import Backend, ClusterFactory
from elastic_agent.clock import Clock, SystemClock
from elastic_agent.gocd import GoCDServers
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.port import ClusterPort
from elastic_agent.metrics import Metrics
from elastic_agent.pods import PodIdentity
from elastic_agent.remote_file import RemoteFileFetcher
from profiles.cluster import ClusterProfile

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger(__name__)


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
    token: str,
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


@dataclass
class RunningService:
    """A backend served by waitress in a background thread (tests, the demo, the simulator)."""

    app: Flask
    backend: Backend
    url: str
    _server: object
    _thread: threading.Thread

    def stop(self) -> None:
        # waitress has no stop(): its loop ends when its socket map is empty, and the map must be
        # emptied on the loop's own thread (closing from here races its select()).
        server: Any = self._server
        if self._thread.is_alive():
            # OSError: the loop closed its trigger already, it is ending by itself.
            with contextlib.suppress(OSError):
                server.trigger.pull_trigger(lambda: [ch.close() for ch in list(server._map.values())])
            self._thread.join(timeout=5)
        server.task_dispatcher.shutdown()
        self.backend.stop()


# Bytes of a response waitress buffers before a worker thread writes them to the socket itself; a
# smaller response is written by waitress's I/O thread once the request is done, in one send() with its
# headers. Waitress's default since 1.3 is 1: every worker writes its status line and headers, then its
# body, as soon as each is produced. With several connections busy at once that costs this GIL-bound
# process dearly: each send() lets the GIL go, and the I/O thread and the other workers, woken on the
# other core, take it in turn, again and again per request. Measured with 5,000 pods on two cores,
# should-assign-work over 4 concurrent connections: about 1,400 req/s and 800 us of backend CPU per
# request with the default, about 3,000 req/s and 330 us with 18,000 (waitress's default before 1.3);
# one client alone answers as fast either way. Larger answers (status pages) still stream out in
# 18,000-byte steps from the worker.
SEND_BYTES = 18_000


def waitress_options() -> dict[str, Any]:
    """`send_bytes` has been deprecated, though honoured, since waitress 1.3 ("pending removal"): should a
    release drop it, the backend still starts, only slower under concurrent requests (and
    tests/test_service_tuning.py says so)."""
    return {"send_bytes": SEND_BYTES} if hasattr(Adjustments, "send_bytes") else {}


def wsgi_server(app: WSGIApplication, host: str, port: int, threads: int) -> Any:
    """A waitress server with this service's settings, bound and ready to `run()`."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "send_bytes will be removed", DeprecationWarning)
        return create_server(
            app, host=host, port=port, threads=threads, ident="gocd-elastic-agent", **waitress_options()
        )


def serve_in_background(
    backend: Backend, token: str, host: str = "127.0.0.1", port: int = 0, threads: int = 16
) -> RunningService:
    app = create_app(backend, token, Metrics())
    server = wsgi_server(app, host, port, threads)
    bound_port = server.socket.getsockname()[1]
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    return RunningService(app, backend, f"http://{host}:{bound_port}", server, thread)
