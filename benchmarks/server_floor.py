"""What the production server itself costs per request on this machine: an app that answers `false`
without doing anything, served by waitress with the backend's settings (`elastic_agent.service.wsgi`) in a
process of its own, timed by the same load client as the backend, back to back and at 50 per second.

    python -m benchmarks.server_floor [--requests 3000]

The service benchmark runs it in the same run as the backend's figures and prints both side by side:
the backend's latency cannot be lower than this floor, and the difference is what the plugin adds.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.load_client import only_answer, run_apart
from benchmarks.service_fixture import start_listening, summary
from elastic_agent.service.wsgi import WsgiServer
from elastic_agent.traces.measures import percentile

ANSWER = b"false"
PATH = "/gocd/plugin/cd.go.elastic-agent.should-assign-work"
PACED_GAP_MS = 20.0  # 50 per second, the pace of the service benchmark's paced requests


def empty_answer(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """Reads the request body and answers `false`, as should-assign-work does, with nothing between."""
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(ANSWER)))])
    return [ANSWER]


@dataclass(frozen=True)
class Floor:
    back_to_back: list[float]
    paced: list[float]

    def lines(self) -> list[str]:
        return [
            f"an empty answer from the same server, back to back: {summary(self.back_to_back)}",
            f"an empty answer from the same server, 50 per second: {summary(self.paced)}",
        ]


def beside(name: str, latencies: Sequence[float], floor: Sequence[float]) -> str:
    """The backend's p50 and p99 next to the floor's, as ratios and as the time the plugin adds."""
    ours, bare = sorted(latencies), sorted(floor)
    parts = []
    for label, share in (("p50", 0.5), ("p99", 0.99)):
        mine, base = percentile(ours, share), percentile(bare, share)
        parts.append(f"{label} {mine * 1000:.2f} / {base * 1000:.2f} ms = {mine / base:.2f}x "
                     f"({(mine - base) * 1000:+.2f} ms)")  # fmt: skip
    return f"{name} against the empty answer: " + "; ".join(parts)


def measure(
    requests: int, paced_requests: int = 250, headers: dict[str, str] | None = None, body: str = "{}"
) -> Floor:
    """Starts the empty-answer server in a child process, times it both ways, stops it. Give the
    headers and body the backend was sent, so that both servers read requests of the same size."""
    request = {"path": PATH, "headers": headers or {"Content-Type": "application/json"}, "body": body}
    process, port = start_listening(
        lambda port: [sys.executable, "-m", "benchmarks.server_floor", "serve", "--port", str(port)],
        dict(os.environ), "the empty-answer server",
    )  # fmt: skip
    try:
        back_to_back = _latencies(port, request, "--requests", str(requests), "--warmup", "200")
        paced = _latencies(port, request, "--requests", str(paced_requests), "--warmup", "0",
                           "--gap-ms", str(PACED_GAP_MS))  # fmt: skip
    finally:
        process.terminate()
        process.wait(10)
    return Floor(back_to_back, paced)


def _latencies(port: int, request: dict[str, Any], *options: str) -> list[float]:
    result = run_apart("latency", port, request, *options)
    only_answer(result, ANSWER.decode(), "the empty-answer server")
    latencies: list[float] = result["latencies"]
    return latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="?", choices=["measure", "serve"], default="measure")
    parser.add_argument("--port", type=int, help="serve: the port to listen on")
    parser.add_argument("--requests", type=int, default=3000, help="measure: requests timed back to back")
    args = parser.parse_args(argv)
    if args.what == "serve":
        if args.port is None:
            parser.error("serve needs --port")
        # As `elastic_agent serve` runs: waitress in a thread of its own, the main thread waiting.
        WsgiServer(empty_answer, "127.0.0.1", args.port, threads=16).start()
        threading.Event().wait()
    print("\n".join(measure(args.requests).lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
