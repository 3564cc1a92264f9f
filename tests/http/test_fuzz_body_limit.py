"""The body limit (elastic_agent/service/app.py MAX_BODY_BYTES, 8 MiB) over real HTTP, on waitress: a
declared length over it is refused from the headers alone, before one byte of the body is sent or read;
a chunked body without a length is refused once it grows past it; a body of exactly the limit is read
(and answered for what it is)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from elastic_agent.service.app import MAX_BODY_BYTES
from elastic_agent.simulation.stack import Stack
from tests.support.raw_http import answer, connect, head

CHUNK = 64 * 1024


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(start_gocd=False)


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(stack: Stack) -> None:
    with connect(stack) as sock:
        sock.sendall(head(f"Content-Length: {MAX_BODY_BYTES + 1}"))  # and not one byte of the body
        text = answer(sock)
    assert text.startswith("HTTP/1.1 413"), text
    assert f"larger than {MAX_BODY_BYTES} bytes" in text, text


def test_a_chunked_body_that_grows_past_the_limit_is_refused(stack: Stack) -> None:
    chunk = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    with connect(stack) as sock:
        sock.sendall(head("Transfer-Encoding: chunked"))
        sent = 0
        try:
            while sent <= MAX_BODY_BYTES + CHUNK:
                sock.sendall(chunk)
                sent += CHUNK
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while we were still sending: what the test wants to see
        text = answer(sock)
    assert text.startswith("HTTP/1.1 413"), text
    assert f"larger than {MAX_BODY_BYTES} bytes" in text, text


def test_a_body_of_exactly_the_limit_is_read_and_answered_for_what_it_is(stack: Stack) -> None:
    with connect(stack) as sock:
        sock.sendall(head(f"Content-Length: {MAX_BODY_BYTES}") + b" " * MAX_BODY_BYTES)
        text = answer(sock)
    assert text.startswith("HTTP/1.1 400"), text[:200]
    assert "the request body is empty" in text
