"""The waitress settings of the service: still honoured by the installed waitress, and answers of every
size still arrive whole."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import requests

from elastic_agent.service.wsgi import (
    SEND_BYTES,
    WsgiServer,
    build_backend,
    serve_in_background,
    waitress_options,
)


def test_the_service_runs_with_send_bytes_and_without_a_deprecation_warning() -> None:
    # When this fails, waitress dropped `send_bytes`: the service still works, but answers concurrent
    # requests about half as fast (see SEND_BYTES in elastic_agent/service.py); find another way.
    assert waitress_options() == {"send_bytes": SEND_BYTES}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        service = serve_in_background(build_backend("a-token", None), "a-token")
    try:
        assert service.server.server.adj.send_bytes == SEND_BYTES
        assert not [w for w in caught if "send_bytes" in str(w.message)]
        assert requests.get(f"{service.url}/healthz", timeout=5).status_code == 200
    finally:
        service.stop()


def chunks(size: int) -> Iterator[bytes]:
    for index in range(0, size, 7_000):
        yield bytes([65 + (index // 7_000) % 26]) * min(7_000, size - index)


def sized_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    size = int(environ["PATH_INFO"].strip("/"))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(size))])
    return chunks(size)


@pytest.mark.parametrize("size", [0, 5, SEND_BYTES - 1, SEND_BYTES, SEND_BYTES + 1, 250_000])
def test_answers_below_and_above_send_bytes_arrive_whole(size: int) -> None:
    server = WsgiServer(sized_app, "127.0.0.1", 0, threads=2)
    server.start()
    try:
        port = server.port
        with requests.Session() as session:  # keep-alive: answers one after another on one connection
            for _ in range(3):
                answer = session.get(f"http://127.0.0.1:{port}/{size}", timeout=10)
                assert answer.status_code == 200
                assert answer.content == b"".join(chunks(size))
    finally:
        server.stop(answers_by=time.monotonic() + 1)
