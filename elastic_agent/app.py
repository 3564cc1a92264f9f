"""The HTTP service: Flask application factory; routes stay thin and hand over to the executors."""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import TYPE_CHECKING, NamedTuple

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wsgi import get_input_stream

from elastic_agent.backend import Backend
from elastic_agent.gocd import GoCDError
from elastic_agent.kube.port import ClusterError
from elastic_agent.messages import BadRequest
from elastic_agent.metrics import Metrics
from elastic_agent.remote_file import RemoteFileError
from executors.base import RequestContext
from executors.base import Response as PluginResponse
from executors.dispatch import PREFIX, executor_for, request_names
from profiles.errors import ProfileError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from prometheus_client import Counter, Histogram

log = logging.getLogger(__name__)

PLUGIN_PATH = "/gocd/plugin/"
TEXT = "text/plain"
JSON = "application/json"
# The Content-Type header Flask's Response(mimetype=...) sends for each (werkzeug adds the charset to text/*).
CONTENT_TYPES = {TEXT: "text/plain; charset=utf-8", JSON: JSON}


def create_app(backend: Backend, token: str, metrics: Metrics | None = None) -> Flask:
    if not token:
        raise ValueError("a token is required")
    metrics = metrics or Metrics()
    metrics.watch_pods(lambda: pod_counts(backend))
    app = Flask("elastic_agent")
    app.config["BACKEND"] = backend
    plugin = PluginRequests(backend, token, metrics)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics_page() -> Response:
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    @app.post(PLUGIN_PATH + "<path:name>")
    def plugin_request(name: str) -> Response:
        answer = plugin.answer(
            name,
            request.headers.get("Authorization", ""),
            request.headers.get("X-GoCD-Callback-URL"),
            lambda: request.get_data(as_text=True),
        )
        return Response(answer.body, status=answer.status, mimetype=answer.mimetype)

    # The documented Flask way to put WSGI middleware in front of the application.
    app.wsgi_app = plugin_fast_path(app.wsgi_app, plugin)  # type: ignore[method-assign,assignment]
    return app


class PluginAnswer(NamedTuple):
    status: int
    body: str
    mimetype: str


class PluginRequests:
    """`POST /gocd/plugin/<name>`, the bridge contract: token check, executor, answer, metrics. The
    Flask route and the fast path share it, so both answer exactly alike."""

    def __init__(self, backend: Backend, token: str, metrics: Metrics) -> None:
        self._backend = backend
        self._expected = f"Bearer {token}".encode()
        self._metrics = metrics
        # Labelled metric children, looked up once: `labels()` costs a lock and a tuple build per call.
        # Both maps are bounded: known request names (plus "unknown") times the status codes they answer.
        self._latency: dict[str, Histogram] = {}
        self._answered: dict[tuple[str, int], Counter] = {}

    def answer(
        self, name: str, authorization: str, callback_url: str | None, read_body: Callable[[], str]
    ) -> PluginAnswer:
        if not hmac.compare_digest(authorization.encode(), self._expected):
            self._metrics.unauthorized.inc()
            return PluginAnswer(401, "missing or wrong token\n", TEXT)
        executor = executor_for(name)
        if executor is None:
            answer = PluginResponse(404, f"'{name}' is not a request this plugin knows.")
            metric_name = "unknown"
        else:
            context = RequestContext(self._backend, callback_url)
            latency = self._latency.get(name)
            if latency is None:
                latency = self._latency.setdefault(name, self._metrics.latency.labels(name))
            started = perf_counter()
            try:
                answer = answer_safely(name, lambda: executor(read_body(), context))
            finally:  # as Histogram.time() does
                latency.observe(max(perf_counter() - started, 0))
            metric_name = name
        key = (metric_name, answer.status)
        answered = self._answered.get(key)
        if answered is None:
            child = self._metrics.requests.labels(metric_name, str(answer.status))
            answered = self._answered.setdefault(key, child)
        answered.inc()
        return PluginAnswer(answer.status, answer.body, JSON if answer.body[:1] in ("{", "[") else TEXT)


def plugin_fast_path(flask_app: WSGIApplication, plugin: PluginRequests) -> WSGIApplication:
    """Serves `POST /gocd/plugin/<known request name>` without Flask; everything else goes to Flask.

    Why: GoCD asks should-assign-work for every idle agent and every waiting job, so that one request
    is the backend's hot path. Measured in process with 5,000 pods (WSGI call to answer), the Flask
    route took about 300 us, of which the executor 30 to 60 us and the rest Flask's per-request
    machinery (request context, URL map, Request and Response objects, signals); this path takes
    about 50 us. Over HTTP, waitress adds about 300 us of CPU per request either way.

    It answers exactly as the Flask route does (the route stays for every other path, including
    unknown request names): the same PluginRequests (token check, executor, error mapping, metrics),
    the body read as werkzeug reads it, and the status line and headers Flask's Response sends.
    It skips Flask's hooks: should the app gain before/after-request hooks or error handlers that
    plugin requests need, they must be applied here as well (or this shortcut removed).
    """
    paths = {PLUGIN_PATH + name: name for name in request_names()}

    def wsgi(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        name = paths.get(environ.get("PATH_INFO", "")) if environ.get("REQUEST_METHOD") == "POST" else None
        if name is None:
            return flask_app(environ, start_response)
        answer = plugin.answer(
            name,
            environ.get("HTTP_AUTHORIZATION", ""),
            environ.get("HTTP_X_GOCD_CALLBACK_URL"),
            lambda: get_input_stream(environ).read().decode(errors="replace"),
        )
        body = answer.body.encode()
        headers = [("Content-Type", CONTENT_TYPES[answer.mimetype]), ("Content-Length", str(len(body)))]
        start_response(status_line(answer.status), headers)
        return [body]

    return wsgi


def status_line(status: int) -> str:
    """The status line werkzeug writes for a numeric status."""
    reason = HTTP_STATUS_CODES.get(status)
    return f"{status} {reason.upper()}" if reason else f"{status} UNKNOWN"


def answer_safely(name: str, run: Callable[[], PluginResponse]) -> PluginResponse:
    """Ordinary bad input and unreachable systems become answers with a sentence; nothing escapes."""
    short = name.removeprefix(PREFIX)
    try:
        return run()
    except BadRequest as error:
        return PluginResponse(400, str(error))
    except ProfileError as error:
        return PluginResponse(422, f"{short}: the profile is not valid: {error}")
    except RemoteFileError as error:
        return PluginResponse(422, f"{short}: the remote pod template could not be used: {error}")
    except ClusterError as error:
        log.warning("%s: Kubernetes: %s", short, error)
        return PluginResponse(503, f"{short}: the Kubernetes cluster could not do it: {error}")
    except GoCDError as error:
        log.warning("%s: %s", short, error)
        return PluginResponse(502, f"{short}: {error}")
    except Exception:
        incident = uuid.uuid4().hex[:8]
        log.exception("%s failed unexpectedly (incident %s)", short, incident)
        return PluginResponse(
            500, f"{short} failed unexpectedly; the backend log has details (incident {incident})."
        )


def pod_counts(backend: Backend) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pool in backend.pools():
        for record in pool.records():
            counts[record.state.value] = counts.get(record.state.value, 0) + 1
    return counts
