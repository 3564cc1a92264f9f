"""should-assign-work through the WSGI app in process (no HTTP, no load client): what one request costs
the backend, parsing included, with 5,000 pods as `service_bench` populates them.

    python -m benchmarks.app_latency [--calls 20000]

Two figures: the same body again and again (an idle agent asking about the same waiting job at every
poll), and a new body every call. Run it from another tree (`cd OTHER && PYTHONPATH=$PWD python -m
benchmarks.app_latency`) to compare two versions; the imports fall back to the module paths before the
backend was split into subpackages, so that older trees can be measured the same way.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable
from typing import Any

try:
    from elastic_agent.service.app import create_app
    from elastic_agent.service.metrics import Metrics
    from elastic_agent.service.wsgi import build_backend
except ImportError:  # a tree from before the subpackages (for an A/B run)
    from elastic_agent.app import create_app  # type: ignore[import-not-found,no-redef]
    from elastic_agent.metrics import Metrics  # type: ignore[import-not-found,no-redef]

    from elastic_agent.service import build_backend  # type: ignore[attr-defined,no-redef]
from benchmarks.service_fixture import TOKEN, gocd_callbacks, job_fields, populate
from elastic_agent.simulation.fake_kube import FakeKubeServer

PREFIX = "/gocd/plugin/cd.go.elastic-agent."


def best_of(rounds: int, calls: int, run: Callable[[], Any]) -> float:
    """The fastest round's microseconds per call (the machine is shared: the minimum is the cost)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - started) / calls * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    kube = FakeKubeServer()
    kube.start()
    fixture = populate(kube, args.pods)
    agents = [
        {"agent_id": name, "agent_state": state, "build_state": state, "config_state": "Enabled"}
        for names, state in ((fixture.idle, "Idle"), (fixture.busy, "Building"))
        for name in names
    ]
    callback_url, _ = gocd_callbacks(agents)
    app = create_app(build_backend(TOKEN, callback_url), TOKEN, Metrics())
    agent = {
        "agent_id": fixture.busy[0],
        "agent_state": "Idle",
        "build_state": "Idle",
        "config_state": "Enabled",
    }
    ask = {
        "agent": agent,
        "elastic_agent_profile_properties": fixture.elastic,
        "cluster_profile_properties": fixture.cluster,
        "job_identifier": job_fields(10_000_000),
    }

    def call(name: str, data: bytes) -> bytes:
        environ = {
            "REQUEST_METHOD": "POST", "PATH_INFO": PREFIX + name, "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data), "wsgi.input_terminated": True, "wsgi.url_scheme": "http",
            "HTTP_AUTHORIZATION": f"Bearer {TOKEN}", "HTTP_X_GOCD_CALLBACK_URL": callback_url,
            "SERVER_NAME": "bench", "SERVER_PORT": "0",
        }  # fmt: skip
        return b"".join(app.wsgi_app(environ, lambda status, headers: None))

    call("server-ping", json.dumps({"all_cluster_profile_properties": [fixture.cluster]}).encode())
    same = json.dumps(ask).encode()
    repeated = best_of(5, args.calls, lambda: call("should-assign-work", same))
    fresh = iter(
        [
            json.dumps({**ask, "job_identifier": job_fields(20_000_000 + n)}).encode()
            for n in range(args.calls)
        ]
    )
    started = time.perf_counter()
    for body in fresh:
        call("should-assign-work", body)
    new_body = (time.perf_counter() - started) / args.calls * 1e6
    print(f"should-assign-work through the WSGI app, {args.pods} pods: the same body {repeated:.1f} us "
          f"(best of 5 rounds of {args.calls}), a new body each call {new_body:.1f} us")  # fmt: skip
    kube.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
