"""Rotating the bridge contract's shared token (the Secret behind `--token-file`) without a restart.

The jar reads its token file again at every request (bridge/README.md, sidecar mode); the backend, run
with `--token-file`, must follow the same file, both for the requests it accepts and for the callbacks
it sends, or a rotation would refuse every request until the sidecar was restarted.
"""

from __future__ import annotations

import http.server
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from elastic_agent.gocd.server import GoCDServers
from elastic_agent.token_file import TokenFile, TokenFileError
from tests.support.backend_process import BackendProcess

ICON = "/gocd/plugin/cd.go.elastic-agent.get-icon"


def write_atomically(path: Path, text: str) -> None:
    """As kubelet updates a Secret volume: the new content takes the old one's place in one step."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text)
    os.replace(temporary, path)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("first-token\n")
    return path


@pytest.fixture
def sidecar(token_file: Path) -> Iterator[str]:
    """`python -m elastic_agent serve --token-file`, as the sidecar runs; yields its URL."""
    backend = BackendProcess(["--log-level", "INFO", "--token-file", str(token_file)])
    try:
        yield backend.url
    finally:
        assert backend.terminate() == 0
    logged = "".join(backend.stderr)
    assert "first-token" not in logged and "second-token" not in logged


def status_with(url: str, token: str) -> int:
    return requests.post(url + ICON, headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code


def test_a_rotated_token_file_is_expected_from_the_next_request(sidecar: str, token_file: Path) -> None:
    assert status_with(sidecar, "first-token") == 200
    write_atomically(token_file, "second-token\n")
    assert status_with(sidecar, "second-token") == 200
    assert status_with(sidecar, "first-token") == 401


def test_a_token_file_rewritten_in_place_is_expected_from_the_next_request(
    sidecar: str, token_file: Path
) -> None:
    token_file.write_text("second-token\n")
    assert status_with(sidecar, "second-token") == 200
    assert status_with(sidecar, "first-token") == 401


def test_a_token_file_gone_or_empty_mid_rotation_keeps_the_token_read_before(
    token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = TokenFile(token_file)
    token_file.unlink()
    assert token.current() == "first-token"
    token_file.write_text("")
    assert token.current() == "first-token"
    token_file.write_text("second-token")
    assert token.current() == "second-token"
    with caplog.at_level(logging.INFO):
        write_atomically(token_file, "third-token\n")
        assert token.current() == "third-token"
    assert all("third-token" not in record.getMessage() for record in caplog.records)


def test_a_token_file_that_is_empty_at_start_is_refused_with_its_name(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    with pytest.raises(TokenFileError, match=f"the token file {empty} is empty"):
        TokenFile(empty)


class RecordingBridge(http.server.BaseHTTPRequestHandler):
    """The jar's callback endpoint, reduced to recording the Authorization header of each call."""

    seen: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append(self.headers.get("Authorization", ""))
        body = b"[]"  # list-agents: no agents
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_callbacks_carry_the_token_the_file_holds_now(token_file: Path) -> None:
    RecordingBridge.seen = []
    bridge = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingBridge)
    threading.Thread(target=bridge.serve_forever, daemon=True).start()
    try:
        servers = GoCDServers(TokenFile(token_file), None)
        gocd = servers.for_callback(f"http://127.0.0.1:{bridge.server_address[1]}")
        gocd.list_agents()
        write_atomically(token_file, "second-token\n")
        gocd.list_agents()
    finally:
        bridge.shutdown()
        bridge.server_close()
    assert RecordingBridge.seen == ["Bearer first-token", "Bearer second-token"]
