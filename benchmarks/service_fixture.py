"""What the service benchmark sets up: 5,000 pods in the fake cluster, a GoCD callback endpoint with their
agents, and the backend in a process of its own; also the bridge's headers and a free port."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server

from elastic_agent.clock import SystemClock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.pool.pods import PodIdentity, build_pod, cluster_label
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.traces.measures import percentile
from profiles.cluster import ClusterProfile

TOKEN = "service-benchmark-token"
SERVER_ID = "benchmark-gocd"
NAMESPACE = "bench"


@dataclass
class Fixture:
    kube: FakeKubeServer
    cluster: dict[str, str]
    elastic: dict[str, str]
    idle: list[str]
    busy: list[str]


class _Quiet(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def gocd_callbacks(agents: list[dict[str, str]]) -> tuple[str, Callable[[], None]]:
    """A GoCD callback endpoint with a fixed list of agents; every other call answers 200."""
    listing = json.dumps(agents).encode()
    info = json.dumps({"server_id": SERVER_ID, "site_url": "http://gocd.test/go"}).encode()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"].read(length)
        path = environ.get("PATH_INFO", "")
        body = listing if path.endswith("list-agents") else info if path.endswith("server-info.get") else b""
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_Quiet)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server.shutdown


def populate(kube: FakeKubeServer, pods: int, idle_share: float = 0.2) -> Fixture:
    """`pods` reusable pods of one profile, owned by the backend: a share idle, the rest busy."""
    cluster = {
        "go_server_url": "https://gocd.example.test/go",
        "kubernetes_cluster_url": kube.url,
        "namespace": NAMESPACE,
        "pending_pods_count": "100000",
        "idle_timeout": "10m",
    }
    elastic = {"Image": "registry.example.test/agents/java:1", "Reuse": "true"}
    profile = ClusterProfile.from_properties(cluster)
    spec = JobSpecs(SystemClock(), lambda url: "").spec(elastic, profile, None, "pipeline")
    identity = PodIdentity(server_id=SERVER_ID, cluster=cluster_label(profile.cluster_key))
    now = time.time()
    idle: list[str] = []
    busy: list[str] = []
    for index in range(pods):
        job = JobIdentifier(**job_fields(index + 1))
        manifest = build_pod(
            spec.template, identity=identity, namespace=NAMESPACE, job=job, spec=spec,
            auto_register_key=f"key-{index}", go_server_url=profile.go_server_url, now=now,
        )  # fmt: skip
        is_idle = index < pods * idle_share
        manifest["metadata"]["annotations"] |= {
            labels.ANN_STATE: "idle" if is_idle else "busy",
            labels.ANN_REGISTERED: "true",
            labels.ANN_JOBS_RUN: "1",
            labels.ANN_STATE_SINCE: f"{now:.3f}",
        }
        created = kube.store.create_pod(NAMESPACE, manifest)
        (idle if is_idle else busy).append(created["metadata"]["name"])
    return Fixture(kube, cluster, elastic, idle, busy)


def job_fields(job_id: int, pipeline: str = "pipeline") -> dict[str, Any]:
    return {
        "pipeline_name": pipeline, "pipeline_label": "1", "pipeline_counter": 1, "stage_name": "build",
        "stage_counter": "1", "job_name": "job", "job_id": job_id,
    }  # fmt: skip


def bridge_headers(callback_url: str) -> dict[str, str]:
    """The headers the bridge sends with every request."""
    return {
        "Authorization": f"Bearer {TOKEN}",
        "X-GoCD-Extension-Version": "5.0",
        "X-GoCD-Callback-URL": callback_url,
        "Content-Type": "application/json",
    }


def start_backend(callback_url: str) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m elastic_agent serve` alone in a child process, once it listens."""
    env = dict(os.environ, GOCD_ELASTIC_AGENT_TOKEN=TOKEN)
    return start_listening(
        lambda port: [sys.executable, "-m", "elastic_agent", "serve", "--bind", f"127.0.0.1:{port}",
                      "--callback-url", callback_url, "--log-level", "WARNING"],
        env, "the backend",
    )  # fmt: skip


def start_listening(
    command_for: Callable[[int], list[str]], env: dict[str, str], what: str
) -> tuple[subprocess.Popen[bytes], int]:
    """Runs the command for a free local port; returns once something accepts connections there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(command_for(port), env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{what} did not start listening within 30 s")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def summary(latencies: Sequence[float]) -> str:
    ordered = sorted(latencies)
    return (
        f"n={len(ordered)} p50={percentile(ordered, 0.5) * 1000:.2f} ms "
        f"p99={percentile(ordered, 0.99) * 1000:.2f} ms mean={statistics.fmean(ordered) * 1000:.2f} ms"
    )
