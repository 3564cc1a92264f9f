"""A plugin request written byte by byte on a socket of the served backend, and its answer read back whole.

The body limit is a matter of what is sent before what: a declared length the server must refuse before
the body comes, a chunked body cut off when it grows too long. A client library would send all of it
first, so these tests write the request themselves."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from elastic_agent.simulation.stack import TOKEN, Stack

REQUEST = "/gocd/plugin/cd.go.elastic-agent.create-agent"


def connect(stack: Stack) -> socket.socket:
    assert stack.service is not None
    url = urlsplit(stack.service.url)
    # Generous: the machine is shared; a server waiting for the body would hold the answer forever.
    return socket.create_connection((url.hostname, url.port), timeout=60)


def head(length_header: str) -> bytes:
    return (
        f"POST {REQUEST} HTTP/1.1\r\nHost: backend\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\n{length_header}\r\n\r\n"
    ).encode()


def answer(sock: socket.socket) -> str:
    """Everything the server sends until it closes the connection or the answer is complete."""
    received = b""
    while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < body_length(received):
        data = sock.recv(65536)
        if not data:
            break
        received += data
    return received.decode(errors="replace")


def body_length(received: bytes) -> int:
    for line in received.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0
