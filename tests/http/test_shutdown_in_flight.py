"""SIGTERM while a request waits on a network that never answers: the request still gets an answer, a 503
with a sentence, before the process exits 0; never a dropped connection.

The backend runs as its own process (`python -m elastic_agent serve`, tests/support/backend_process.py). What
it waits on is a loopback TCP socket that accepts connections and never says a word: as the Kubernetes API
(create-agent waits for the cluster's first pod list) or as GoCD's callback endpoint (create-agent asks
server-info before it knows which pods are its own). The handler threads that make this possible are
tested in tests/unit/service/test_in_flight_handlers.py."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from elastic_agent.service.wsgi import STOP_WITHIN_S
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, create_agent_body, encode
from tests.support.backend_process import BackendProcess
from tests.support.live_stack import wait_until

TOKEN = "in-flight-token"
CREATE = REQUEST_PREFIX + "create-agent"
ELASTIC = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties", "Reuse": "true"}
JOB = {
    "pipeline_name": "build",
    "pipeline_counter": 1,
    "pipeline_label": "1",
    "stage_name": "test",
    "stage_counter": "1",
    "job_name": "unit",
    "job_id": 4242,
}
# How long the process may take from SIGTERM to its exit: its own bound and room for a shared machine.
EXIT_DEADLINE_S = STOP_WITHIN_S + 10.0


class Silent:
    """A loopback TCP port that accepts every connection and never answers (nor closes) one."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the test is over
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self._socket.close()
        for connection in self.accepted:
            connection.close()


class _ServerInfoOnly(BaseHTTPRequestHandler):
    """GoCD's callback endpoint, reduced to what create-agent needs: server-info; anything else 200."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"server_id": "in-flight-server"}' if "server-info" in self.path else b""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def silent() -> Iterator[Silent]:
    port = Silent()
    yield port
    port.close()


@pytest.fixture
def callbacks() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ServerInfoOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _create_agent_in_flight(cluster_url: str, callback_url: str, silent: Silent) -> tuple[int, str, str]:
    """Starts the backend, sends create-agent, SIGTERMs the backend once the request waits on `silent`;
    the answer's status and body, and how the process ended."""
    backend = BackendProcess(env={"GOCD_ELASTIC_AGENT_TOKEN": TOKEN})
    try:
        cluster = {"go_server_url": "https://gocd.example.test/go", "kubernetes_cluster_url": cluster_url,
                   "security_token": "cluster-token", "namespace": "default"}  # fmt: skip
        body = encode(create_agent_body("a-key", ELASTIC, cluster, None, JOB)).encode()
        address = urlsplit(backend.url)
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
        connection.request(
            "POST",
            f"/gocd/plugin/{CREATE}",
            body=body,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "X-GoCD-Extension-Version": "5.0",
                "X-GoCD-Callback-URL": callback_url,
                "Content-Type": "application/json",
            },
        )
        wait_until(lambda: silent.accepted, 20, "the backend to wait on the silent port")
        backend.process.terminate()  # SIGTERM
        try:
            answer = connection.getresponse()
            status, text = answer.status, answer.read().decode()
        except (ConnectionError, http.client.HTTPException) as error:  # RemoteDisconnected, reset
            status, text = 0, f"no answer: {type(error).__name__}"
        finally:
            connection.close()
        returncode = backend.process.wait(EXIT_DEADLINE_S)
        return status, text, f"exit {returncode}: {''.join(backend.stderr[-5:])}"
    finally:
        backend.kill()


def _assert_a_503_with_a_sentence(status: int, text: str, ended: str) -> None:
    assert status == 503, (status, text, ended)
    assert "stopping" in text and text.rstrip().endswith("."), text
    with pytest.raises(json.JSONDecodeError):  # a sentence for people, not a GoCD answer
        json.loads(text)
    assert ended.startswith("exit 0:"), ended


@pytest.mark.slow
def test_sigterm_answers_a_create_agent_waiting_on_a_cluster_that_never_answers(
    silent: Silent, callbacks: str
) -> None:
    _assert_a_503_with_a_sentence(*_create_agent_in_flight(silent.url, callbacks, silent))


@pytest.mark.slow
def test_sigterm_answers_a_create_agent_waiting_on_a_callback_that_never_answers_server_info(
    silent: Silent,
) -> None:
    # The cluster is never reached: without GoCD's server id the backend cannot tell its pods.
    _assert_a_503_with_a_sentence(*_create_agent_in_flight("http://127.0.0.1:9", silent.url, silent))
