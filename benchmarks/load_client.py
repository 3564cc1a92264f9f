"""A small HTTP/1.1 load generator for the service benchmark, run as its own process:

    python -m benchmarks.load_client latency --port P [--requests N] [--warmup N] < request.json
    python -m benchmarks.load_client throughput --port P [--seconds S] [--connections C] < request.json

`request.json` holds {"path": ..., "headers": {...}, "body": ...}: one POST, sent over and over on
keep-alive connections. It may hold "bodies": [...] instead, sent one after the other, round and round
(requests that change state, such as a `true` that makes a pod busy or a create-agent that creates one,
cannot be repeated); in latency mode `--gap-ms` paces the requests. It prints one JSON object: the
latencies in seconds (latency), or the answers counted in the timed window (throughput), and every
status and body seen.

Why not `http.client` in the benchmark process: that process also hosts the fake Kubernetes API server
and its 5,000 pods, so its client threads share a GIL and a large heap with the server side of the
test, and `http.client` can spend more CPU per request than the backend's request path does. This
client prepares the request bytes once, reads the answer by its Content-Length, and drives several
connections from one thread with a selector, so its own share of the two cores stays small. It is
still a real HTTP client over TCP: the backend sees ordinary requests on keep-alive connections.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

HEADER_END = b"\r\n\r\n"


def request_bytes(host: str, port: int, path: str, headers: dict[str, str], body: str) -> bytes:
    data = body.encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(data)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


class Answer:
    """Parses the answers arriving on one connection: status line, headers, a Content-Length body."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buffer += data
        answers = []
        while True:
            end = self._buffer.find(HEADER_END)
            if end < 0:
                return answers
            head = self._buffer[:end].decode("latin-1").split("\r\n")
            status = int(head[0].split(" ", 2)[1])
            length = None
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
                elif name.strip().lower() == "transfer-encoding":
                    raise ValueError("chunked answers are not expected from the backend")
            if length is None:
                raise ValueError(f"an answer without Content-Length: {head[0]}")
            start = end + len(HEADER_END)
            if len(self._buffer) < start + length:
                return answers
            answers.append((status, self._buffer[start : start + length]))
            self._buffer = self._buffer[start + length :]


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client and the JDK client do
    return sock


def latency(
    port: int, requests_in_turn: Sequence[bytes], requests: int, warmup: int, gap_s: float = 0.0
) -> dict[str, Any]:
    """One connection, one request at a time (the next of `requests_in_turn`, round and round), `gap_s`
    apart: the time from sending to the last byte of the answer."""
    sock, parser = connect(port), Answer()
    seen: Counter[tuple[int, str]] = Counter()
    timings = []
    for index in range(warmup + requests):
        if index and gap_s:
            time.sleep(gap_s)
        request = requests_in_turn[index % len(requests_in_turn)]
        started = time.perf_counter()
        sock.sendall(request)
        answers: list[tuple[int, bytes]] = []
        while not answers:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the backend closed the connection")
            answers = parser.feed(data)
        elapsed = time.perf_counter() - started
        if index >= warmup:
            timings.append(elapsed)
        seen.update((status, body.decode(errors="replace")) for status, body in answers)
    sock.close()
    return {"latencies": timings, "answers": _answers(seen)}


def throughput(
    port: int, requests_in_turn: Sequence[bytes], seconds: float, connections: int, warmup: float
) -> dict[str, Any]:
    """`connections` keep-alive connections, each with one request in flight at all times (a closed loop,
    as the same number of client threads sending one after the other), driven from one thread; the
    requests are the next of `requests_in_turn`, round and round. Counts the answers that arrive within
    `seconds` after a warm-up."""
    selector = selectors.DefaultSelector()
    parsers = {}
    sent = 0

    def send_next(sock: socket.socket) -> None:
        nonlocal sent
        sock.sendall(requests_in_turn[sent % len(requests_in_turn)])  # ~1 kB: fits the socket buffer
        sent += 1

    for _ in range(connections):
        sock = connect(port)
        sock.setblocking(False)
        parsers[sock] = Answer()
        selector.register(sock, selectors.EVENT_READ)
        send_next(sock)
    seen: Counter[tuple[int, str]] = Counter()
    counted = 0
    started = time.perf_counter()
    window_start, window_end = started + warmup, started + warmup + seconds
    while (now := time.perf_counter()) < window_end:
        for key, _ in selector.select(timeout=1.0):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the backend closed a connection")
            answers = parsers[sock].feed(data)
            if not answers:
                continue
            now = time.perf_counter()
            if window_start <= now < window_end:
                counted += len(answers)
                seen.update((status, body.decode(errors="replace")) for status, body in answers)
            if now < window_end:
                send_next(sock)
    for sock in parsers:
        selector.unregister(sock)
        sock.close()
    return {"answered": counted, "seconds": seconds, "answers": _answers(seen)}


def _answers(seen: Counter[tuple[int, str]]) -> list[dict[str, Any]]:
    return [{"status": status, "body": body, "count": count} for (status, body), count in seen.items()]


def run_apart(mode: str, port: int, request: Mapping[str, Any], *options: str) -> Any:
    """Runs this client in a process of its own with `request` (what `main` reads from standard input)
    and returns what it printed."""
    command = [sys.executable, "-m", "benchmarks.load_client", mode, "--port", str(port), *options]
    done = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def only_answer(result: Mapping[str, Any], expected: str, server: str) -> None:
    """Every answer counted must be the expected 200: a fast wrong answer is no result."""
    wrong = [answer for answer in result["answers"] if (answer["status"], answer["body"]) != (200, expected)]
    if wrong:
        raise RuntimeError(f"unexpected answers from {server}: {wrong}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["latency", "throughput"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--requests", type=int, default=3000, help="latency: requests timed")
    parser.add_argument("--warmup", type=int, default=200, help="latency: requests sent before timing")
    parser.add_argument("--warmup-seconds", type=float, default=1.0, help="throughput: before the window")
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput: length of the timed window")
    parser.add_argument("--connections", type=int, default=4, help="throughput: concurrent connections")
    parser.add_argument("--gap-ms", type=float, default=0.0, help="latency: pause between requests")
    args = parser.parse_args(argv)
    spec = json.load(sys.stdin)
    bodies = spec["bodies"] if "bodies" in spec else [spec["body"]]
    if not bodies:
        parser.error("give a body, or a non-empty list of bodies")
    requests = [request_bytes("127.0.0.1", args.port, spec["path"], spec["headers"], body) for body in bodies]
    if args.mode == "latency":
        result = latency(args.port, requests, args.requests, args.warmup, args.gap_ms / 1000)
    else:
        result = throughput(args.port, requests, args.seconds, args.connections, args.warmup_seconds)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
