"""The service benchmark's load client: it reads answers right however they are cut, and its two modes
count what the server answered."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import redirect_stdout
from typing import Any

import pytest

from benchmarks import load_client
from elastic_agent.service.wsgi import WsgiServer

HEADERS = {"Authorization": "Bearer t", "X-GoCD-Callback-URL": "http://127.0.0.1:1/go"}


def test_answers_are_split_by_content_length_however_the_bytes_arrive() -> None:
    stream = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nfalse"
        b"HTTP/1.1 401 UNAUTHORIZED\r\ncontent-length: 0\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue"
    )
    expected = [(200, b"false"), (401, b""), (200, b"true")]
    for step in (1, 2, 7, len(stream)):
        parser = load_client.Answer()
        got = [answer for at in range(0, len(stream), step) for answer in parser.feed(stream[at : at + step])]
        assert got == expected, step


@pytest.mark.parametrize(
    ("head", "complaint"),
    [(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "chunked"), (b"HTTP/1.1 200 OK", "Content-Length")],
)
def test_an_answer_without_content_length_is_refused(head: bytes, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        load_client.Answer().feed(head + b"\r\n\r\nfalse")


def test_the_request_carries_the_headers_and_the_body() -> None:
    request = load_client.request_bytes("127.0.0.1", 8155, "/gocd/plugin/x", HEADERS, '{"é": 1}')
    head, body = request.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /gocd/plugin/x HTTP/1.1",
        b"Host: 127.0.0.1:8155",
        b"Content-Length: 9",  # bytes, not characters
        b"Authorization: Bearer t",
        b"X-GoCD-Callback-URL: http://127.0.0.1:1/go",
    ]
    assert body == '{"é": 1}'.encode()


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A waitress server that answers each POST with its body, upper-cased."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])).upper()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    server = WsgiServer(app, "127.0.0.1", 0, threads=2)
    server.start()
    yield server.port
    server.stop(answers_by=time.monotonic() + 1)


def run(argv: list[str], spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(spec)))
    out = io.StringIO()
    with redirect_stdout(out):
        assert load_client.main(argv) == 0
    return json.loads(out.getvalue())


def test_latency_times_each_request_after_the_warm_up(
    echo_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {"path": "/x", "headers": HEADERS, "body": "false"}
    result = run(
        ["latency", "--port", str(echo_port), "--requests", "50", "--warmup", "5"], spec, monkeypatch
    )
    assert len(result["latencies"]) == 50 and all(0 < t < 5 for t in result["latencies"])
    assert result["answers"] == [{"status": 200, "body": "FALSE", "count": 55}]


def test_latency_sends_several_bodies_in_turn_at_the_pace_asked(
    echo_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {"path": "/x", "headers": HEADERS, "bodies": ["a", "b", "c"]}
    argv = ["latency", "--port", str(echo_port), "--requests", "3", "--warmup", "0", "--gap-ms", "100"]
    started = time.perf_counter()
    result = run(argv, spec, monkeypatch)
    assert time.perf_counter() - started >= 0.2  # two pauses between three requests
    assert len(result["latencies"]) == 3
    assert sorted(a["body"] for a in result["answers"]) == ["A", "B", "C"]


def test_throughput_counts_the_answers_of_the_window(echo_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"path": "/x", "headers": HEADERS, "body": "false"}
    argv = ["throughput", "--port", str(echo_port), "--seconds", "0.5", "--connections", "3",
            "--warmup-seconds", "0.1"]  # fmt: skip
    result = run(argv, spec, monkeypatch)
    assert result["seconds"] == 0.5 and result["answered"] > 10
    assert result["answers"] == [{"status": 200, "body": "FALSE", "count": result["answered"]}]


def test_throughput_sends_several_bodies_in_turn(echo_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"path": "/x", "headers": HEADERS, "bodies": ["a", "b"]}
    argv = ["throughput", "--port", str(echo_port), "--seconds", "0.5", "--connections", "2",
            "--warmup-seconds", "0.1"]  # fmt: skip
    result = run(argv, spec, monkeypatch)
    counts = {a["body"]: a["count"] for a in result["answers"]}
    assert set(counts) == {"A", "B"} and abs(counts["A"] - counts["B"]) <= 2
