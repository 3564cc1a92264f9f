"""The server side of the plugin's calls back into GoCD (docs/architecture.md, "Calls into GoCD").

`ServerApi.submit(api, version, body)` is GoCD's `GoApplicationAccessor.submit` answered by the simulated
server: an in-process simulation hands it to the plugin directly. `CallbackApp` puts it behind the bridge
contract (`POST /gocd/server/<api-name>`, bearer token, `X-GoCD-API-Version`), and `CallbackServer` serves
that app on loopback from a background thread. Both take a `CallbackInterceptor`, the seam through which
the fault matrix makes the endpoint fail or acts at an exact call of the plugin (the tests'
tests/support/doubles/gocd_callback_faults.py); without one, every call is answered.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import socket
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, Protocol

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from elastic_agent.simulation.gocd_model import HealthMessage, SimulatedGoCD

ServerAnswer = tuple[int, str]


class DropConnection(ConnectionAbortedError):
    """Raised inside the WSGI app: the server treats it as a dropped connection and sends nothing."""


class CallbackInterceptor(Protocol):
    """What the callback app asks of the faults it was given, at each call (`api` is the API's name)."""

    def refusal(self, api: str) -> ServerAnswer | None:
        """The answer instead of GoCD's, or None; may raise DropConnection."""

    def run_hooks(self, api: str, body: str, *, after: bool) -> None:
        """Before GoCD carries the call out, and after; may raise DropConnection."""

    def record(self, api: str, outcome: str) -> None: ...


LIST_AGENTS = "go.processor.elastic-agents.list-agents"
DISABLE_AGENTS = "go.processor.elastic-agents.disable-agents"
DELETE_AGENTS = "go.processor.elastic-agents.delete-agents"
SERVER_INFO = "go.processor.server-info.get"
ADD_HEALTH_MESSAGES = "go.processor.server-health.add-messages"
APPEND_CONSOLE_LOG = "go.processor.console-log.append"

_SERVER_PATH_PREFIX = "/gocd/server/"
# Version 1.0 of console-log.append takes the version 2.0 keys in camelCase.
_CONSOLE_KEYS_V1 = {
    "pipeline_name": "pipelineName",
    "pipeline_counter": "pipelineCounter",
    "stage_name": "stageName",
    "stage_counter": "stageCounter",
    "job_name": "jobName",
    "text": "text",
}


class BadRequestBody(ValueError):
    """The plugin sent a body the API cannot read."""


class ServerApi:
    """Dispatches server calls by API name and version to the model."""

    def __init__(self, model: SimulatedGoCD) -> None:
        self._model = model
        handlers: dict[str, dict[str, Callable[[Any], ServerAnswer]]] = {
            LIST_AGENTS: {"1.0": self._list_agents},
            DISABLE_AGENTS: {"1.0": self._disable_agents},
            DELETE_AGENTS: {"1.0": self._delete_agents},
            SERVER_INFO: {"1.0": self._server_info},
            ADD_HEALTH_MESSAGES: {"1.0": self._add_health_messages},
            APPEND_CONSOLE_LOG: {"1.0": self._append_console_v1, "2.0": self._append_console_v2},
        }
        self._handlers = handlers

    def knows(self, api_name: str) -> bool:
        return api_name in self._handlers

    def submit(self, api_name: str, api_version: str, body: str) -> ServerAnswer:
        versions = self._handlers.get(api_name)
        if versions is None:
            return 404, f"No such API: {api_name}"
        handler = versions.get(api_version)
        if handler is None:
            # GoCD's submit() throws here; the bridge turns the exception into a 500 with its message.
            supported = ", ".join(sorted(versions))
            return 500, f"{api_name} does not support version {api_version!r} (supported: {supported})"
        try:
            return handler(json.loads(body) if body.strip() else None)
        except (ValueError, BadRequestBody) as error:
            # Say what was wrong, never echo the body: it may carry secrets.
            self._model.record_protocol_error(f"{api_name}: {error}")
            return 400, f"Bad request body for {api_name}: {error}"

    def _list_agents(self, _body: Any) -> ServerAnswer:
        return 200, self._model.list_agents_json()

    def _disable_agents(self, body: Any) -> ServerAnswer:
        self._model.disable_agents(_agent_ids(body))
        return 200, ""

    def _delete_agents(self, body: Any) -> ServerAnswer:
        self._model.delete_agents(_agent_ids(body))
        return 200, ""

    def _server_info(self, _body: Any) -> ServerAnswer:
        return 200, json.dumps(self._model.server_info())

    def _add_health_messages(self, body: Any) -> ServerAnswer:
        if not isinstance(body, list):
            raise BadRequestBody("expected a list of {type, message} objects")
        messages = []
        for item in body:
            if not isinstance(item, dict) or item.get("type") not in ("warning", "error"):
                raise BadRequestBody("each message needs a type of warning or error")
            if not isinstance(item.get("message"), str):
                raise BadRequestBody("each message needs a message string")
            messages.append(HealthMessage(item["type"], item["message"]))
        self._model.replace_health_messages(messages)
        return 200, ""

    def _append_console_v1(self, body: Any) -> ServerAnswer:
        return self._append_console(body, _CONSOLE_KEYS_V1)

    def _append_console_v2(self, body: Any) -> ServerAnswer:
        return self._append_console(body, {key: key for key in _CONSOLE_KEYS_V1})

    def _append_console(self, body: Any, keys: dict[str, str]) -> ServerAnswer:
        if not isinstance(body, dict):
            raise BadRequestBody("expected an object")
        missing = [wire for wire in keys.values() if body.get(wire) is None]
        if missing:
            raise BadRequestBody(f"missing {', '.join(missing)}")
        # Counters may arrive as numbers or strings; the job is the same either way.
        pipeline, counter, stage, stage_counter, job = (
            str(body[keys[field]])
            for field in ("pipeline_name", "pipeline_counter", "stage_name", "stage_counter", "job_name")
        )
        job_key = (pipeline, counter, stage, stage_counter, job)
        if not self._model.append_console(job_key, str(body["text"])):
            self._model.record_protocol_error("console-log.append for a job the server does not know")
        return 200, ""


def _agent_ids(body: Any) -> Iterable[str]:
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise BadRequestBody('expected a list of {"agent_id": ...} objects')
    return [str(item["agent_id"]) for item in body if item.get("agent_id") is not None]


class CallbackApp:
    """WSGI app for `POST /gocd/server/<api-name>`, token-checked, as the bridge contract has it."""

    def __init__(self, api: ServerApi, token: str, faults: CallbackInterceptor | None = None) -> None:
        self._api = api
        self._expected_authorization = f"Bearer {token}".encode()
        self.faults = faults  # read at each call: a test may put faults in while the app serves

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        try:
            status, text = self._answer(environ)
        except DropConnection:
            # Close it for real: the server keeps HTTP/1.1 connections and would wait for the next request
            # on it while the plugin waits for an answer, until the plugin's timeout.
            connection = environ.get("werkzeug.socket")
            if connection is not None:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            raise
        headers = [("Content-Type", "application/json" if status == 200 else "text/plain; charset=utf-8")]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [text.encode("utf-8")]

    def _answer(self, environ: dict[str, Any]) -> ServerAnswer:
        authorization = environ.get("HTTP_AUTHORIZATION", "").encode()
        if not hmac.compare_digest(authorization, self._expected_authorization):
            return 401, "Missing or wrong token"
        path: str = environ.get("PATH_INFO", "")
        if not path.startswith(_SERVER_PATH_PREFIX) or not self._api.knows(path[len(_SERVER_PATH_PREFIX) :]):
            return 404, f"No such API: {path}"
        if environ.get("REQUEST_METHOD") != "POST":
            return 405, "Server calls are POST requests"
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length).decode("utf-8") if length else ""
        version = environ.get("HTTP_X_GOCD_API_VERSION", "")
        api = path[len(_SERVER_PATH_PREFIX) :]
        faults = self.faults
        if faults is None:
            return self._api.submit(api, version, body)
        refused = faults.refusal(api)
        if refused is not None:
            return refused
        faults.run_hooks(api, body, after=False)
        answer = self._api.submit(api, version, body)
        faults.run_hooks(api, body, after=True)
        faults.record(api, str(answer[0]))
        return answer


class _QuietRequestHandler(WSGIRequestHandler):
    # One log line per plugin call would drown test output; failures show up in the model's stats.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class CallbackServer:
    """Serves the callback app on loopback from a daemon thread, one thread per request."""

    def __init__(
        self,
        model: SimulatedGoCD,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: CallbackInterceptor | None = None,
    ) -> None:
        self._app = CallbackApp(ServerApi(model), token, faults)
        self._host, self._port = host, port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start serving and return the callback base URL (what goes in X-GoCD-Callback-URL)."""
        if self._server is None:
            server = make_server(
                self._host, self._port, self._app, threaded=True, request_handler=_QuietRequestHandler
            )
            self._server = server
            # A short poll interval keeps stop() quick: shutdown() waits for the loop to look.
            self._thread = threading.Thread(
                target=server.serve_forever, args=(0.05,), name="gocd-callbacks", daemon=True
            )
            self._thread.start()
        return self.url

    @property
    def faults(self) -> CallbackInterceptor | None:
        return self._app.faults

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the callback server is not running")
        return f"http://{self._host}:{self._server.server_port}"

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
        self._server, self._thread = None, None
