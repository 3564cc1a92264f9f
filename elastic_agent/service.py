"""Builds a running backend from its configuration: the real parts, wired once."""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Any

from flask import Flask
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


def serve_in_background(
    backend: Backend, token: str, host: str = "127.0.0.1", port: int = 0, threads: int = 16
) -> RunningService:
    app = create_app(backend, token, Metrics())
    server = create_server(app, host=host, port=port, threads=threads, ident="gocd-elastic-agent")
    bound_port = server.socket.getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    return RunningService(app, backend, f"http://{host}:{bound_port}", server, thread)
