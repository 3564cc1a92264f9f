"""Connecting again leaks nothing. Every credential change (a new token or CA in the cluster profile)
makes the backend build a new connection and, once its first pod list is in, stop the old one; a backend
that runs for months sees thousands of them (tokens rotated by a script, profiles edited). What each
connection took must go with it: no CA file and no exit hook left per connection, the old client's
sockets closed, its watch thread ended, its memory free.

Counted before and after: open file descriptors, files in the temporary directory, exit hooks, live
threads, and memory traced by tracemalloc. A thousand connections one after the other as the pool
makes them, a few hundred credential changes through the backend's server-ping, and on the real API
server (which keeps connections alive, where the fake closes each) the sockets of stopped connections.

The fake API server runs in a process of its own, on 127.0.0.1: its threads and sockets (one of each
per request being answered) would otherwise be counted with the backend's. Over plain HTTP the CA is
never parsed, so any text shaped as PEM does.
"""

from __future__ import annotations

import atexit
import base64
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.backend import Backend
from elastic_agent.clock import SystemClock
from elastic_agent.gocd.messages import Agent, cache_capacities
from elastic_agent.gocd.server import ServerInfo
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.service.wsgi import kubernetes_cluster
from elastic_agent.simulation.gocd_transport import encode, server_ping_body
from elastic_agent.simulation.inprocess import OneGoCDServer
from executors.base import RequestContext
from executors.server_ping import server_ping
from profiles.cluster import ClusterProfile
from tests.support.control_plane import ControlPlane
from tests.support.kube_fixtures import wait_for
from tests.support.real_cluster import SERVICE_ACCOUNT, project_role
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

CONNECTIONS = 1000  # connections one after the other, each with new credentials
CHANGES = 300  # credential changes through the backend, after its caches are warm
HELD = 100  # stopped connections kept referenced (on the real API server)
WARM_UP = 20  # connections before the first count: imports, first-use caches, the server's first answers
NAMESPACE = "default"
IDENTITY = PodIdentity(server_id="server", cluster="cluster")

# What may grow besides: an fd or a thread the process opened for its own reasons meanwhile (a log
# file, a worker started late), and memory that warm caches still shuffle.
FD_SLACK = 4
THREAD_SLACK = 2
MEMORY_SLACK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Usage:
    fds: int
    temp_files: int
    exit_hooks: int
    threads: int
    memory: int  # bytes traced by tracemalloc after a full collection (0 when not tracing)

    def assert_flat_since(self, before: Usage, changes: int) -> None:
        grown = f"after {changes} connections: before {before}, after {self}"
        assert self.fds <= before.fds + FD_SLACK, grown
        assert self.temp_files <= before.temp_files, grown
        assert self.exit_hooks <= before.exit_hooks, grown
        assert self.threads <= before.threads + THREAD_SLACK, grown
        assert self.memory <= before.memory + MEMORY_SLACK_BYTES, grown


def usage(temp_dir: Path) -> Usage:
    gc.collect()
    return Usage(
        fds=len(os.listdir("/proc/self/fd")),
        temp_files=len(os.listdir(temp_dir)),
        exit_hooks=atexit._ncallbacks(),  # type: ignore[attr-defined]  # CPython's, not in typeshed
        threads=threading.active_count(),
        memory=tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0,
    )


@pytest.fixture
def fake_api_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_agent.simulation.fake_kube", "--bind", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:"), line
        yield line.removeprefix("listening on ")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temporary directory, for this test alone: other test processes on the machine
    may write files of their own into the shared one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture
def traced() -> Iterator[None]:
    """Memory traced for the test (unless the whole run is traced already: then it is left on)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    yield
    if started:
        tracemalloc.stop()


def ca_pem(n: int) -> str:
    body = base64.b64encode(f"certificate authority number {n}".encode() * 4).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


def credentials(n: int) -> dict[str, str]:
    """The n-th credentials: each differs from the one before in its token or in its CA, by turns."""
    return {"security_token": f"token-{(n + 1) // 2}", "kubernetes_cluster_ca_cert": ca_pem(n // 2)}


def cluster_properties(url: str, n: int) -> dict[str, str]:
    return {
        "go_server_url": "https://ci.example.test/go",
        "kubernetes_cluster_url": url,
        "namespace": NAMESPACE,
        **credentials(n),
    }


class QuietGoCD:
    """A GoCD server with no agents of this plugin, as server-ping needs one."""

    def list_agents(self) -> list[Agent]:
        return []

    def disable_agents(self, agent_ids: object) -> None: ...

    def delete_agents(self, agent_ids: object) -> None: ...

    def server_info(self) -> ServerInfo:
        return ServerInfo("server", None, None)

    def set_health_messages(self, messages: list[dict[str, str]]) -> None: ...

    def console_log(self, job: dict[str, Any], text: str) -> None: ...


def connect_and_sync(properties: dict[str, str], clock: SystemClock) -> ClusterPort:
    """A port as the backend builds one for new credentials (wsgi.kubernetes_cluster), once it has
    listed the pods: what a pool waits for before it takes the port over."""
    port = kubernetes_cluster(ClusterProfile.from_properties(properties), IDENTITY, clock)
    port.start()
    assert port.wait_synced(10), port.sync_problem()
    return port


@pytest.mark.usefixtures("traced")
def test_a_thousand_connections_one_after_the_other_leave_nothing_behind(
    fake_api_url: str, temp_dir: Path
) -> None:
    """Connect with the next credentials, then stop the connection before, as the pool's takeover does."""
    clock = SystemClock()
    current = connect_and_sync(cluster_properties(fake_api_url, 0), clock)

    def change(n: int) -> None:
        nonlocal current
        port = connect_and_sync(cluster_properties(fake_api_url, n), clock)
        current.stop()
        current = port

    try:
        for n in range(1, WARM_UP + 1):
            change(n)
        before = usage(temp_dir)
        for n in range(WARM_UP + 1, WARM_UP + CONNECTIONS + 1):
            change(n)
        after = usage(temp_dir)
    finally:
        current.stop()
    after.assert_flat_since(before, CONNECTIONS)


@pytest.mark.usefixtures("traced")
def test_credential_changes_through_the_backend_leave_nothing_behind(
    fake_api_url: str, temp_dir: Path
) -> None:
    """Each server-ping brings new credentials; the pool connects with them and takes the new
    connection over once it has listed the pods, as in production. Counted only once the process-wide
    cache of parsed cluster profiles is full, so that what it holds by design is not taken for a leak."""
    clock = SystemClock()
    backend = Backend(clock, OneGoCDServer(QuietGoCD()), kubernetes_cluster, RemoteFileFetcher(clock))
    ctx = RequestContext(backend, None)
    warm_up = cache_capacities()["parsed_cluster_profiles"] + WARM_UP

    def change(n: int) -> None:
        pools = backend.pools()
        previous = pools[0].port if pools else None
        answer = server_ping(encode(server_ping_body([cluster_properties(fake_api_url, n)])), ctx)
        assert answer.status == 200, answer
        (pool,) = backend.pools()
        took_over = wait_for(lambda: pool.port is not previous and pool.synced, timeout=10, interval=0.001)
        assert took_over, (f"the pool did not take connection {n} over", pool.sync_problem())

    try:
        for n in range(warm_up):
            change(n)
        before = usage(temp_dir)
        for n in range(warm_up, warm_up + CHANGES):
            change(n)
        after = usage(temp_dir)
    finally:
        backend.stop(deadline=time.monotonic() + 5)
    after.assert_flat_since(before, CHANGES)


def test_a_stopped_connection_holds_no_socket_while_something_still_references_it(
    real_kube: ControlPlane, temp_dir: Path
) -> None:
    """A request thread that read the pool's port before a takeover, a traceback, a reference cycle:
    a stopped port may live on for a while, and its client must have closed its connections when it
    stopped, not whenever the last reference goes. On the real API server, over TLS with the profile's
    CA: it keeps connections alive between calls, which the fake does not."""
    namespace = f"leaks-{os.getpid()}"
    real_kube.create_namespace(namespace)
    real_kube.apply_role(namespace, project_role(), SERVICE_ACCOUNT)
    tokens = [real_kube.service_account_token(namespace, SERVICE_ACCOUNT) for _ in range(2)]
    # The same CA as PEM and as base64 of PEM, by turns: two texts of the profile, one authority.
    cas = [real_kube.ca_pem, base64.b64encode(real_kube.ca_pem.encode()).decode()]
    clock = SystemClock()
    held: list[ClusterPort] = []

    def connected(n: int) -> ClusterPort:
        properties = {
            "go_server_url": "https://ci.example.test/go",
            "kubernetes_cluster_url": real_kube.url,
            "namespace": namespace,
            "security_token": tokens[(n + 1) // 2 % 2],
            "kubernetes_cluster_ca_cert": cas[n // 2 % 2],
        }
        port = connect_and_sync(properties, clock)
        assert port.pod_events("any") == []  # a call besides the watch's: a connection kept alive
        return port

    current = connected(0)
    try:
        before = usage(temp_dir)
        for n in range(1, HELD + 1):
            port = connected(n)
            current.stop()
            held.append(current)
            current = port
        after = usage(temp_dir)
    finally:
        current.stop()
    assert len(held) == HELD
    after.assert_flat_since(before, HELD)
