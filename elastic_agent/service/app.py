"""The HTTP service: the bridge contract's plugin requests, and a Flask application for the rest.

`POST /gocd/plugin/<request-name>` is served by one small WSGI function (`plugin_requests_first`) in
front of Flask, and only there. Why not a Flask route: GoCD asks should-assign-work for every idle
agent and every waiting job, so that request is the backend's hot path, and on it Flask's per-request
machinery (request context, URL map, Request and Response objects, signals) costs several times what the
executor does; the function does only what the answer needs (benchmarks/RESULTS.md section 3 has the
figures). Flask (the application factory, `create_app`) serves `/healthz`, `/metrics` and everything else.
Every answer, of either, says the backend's version (`X-GoCD-Reuse-Backend-Version`), and every
authorized plugin request's `X-GoCD-Reuse-Bridge-Version` is remembered (elastic_agent/gocd/versions.py).

A plugin request that may wait on the network runs on a handler thread (`in_flight.Handlers`) while the
server's thread waits for its answer, so that a graceful stop can answer it with a 503 rather than drop
its connection; the requests answered from memory, the hot path among them, run where they arrive.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import TYPE_CHECKING, Any, NamedTuple

from flask import Flask, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from werkzeug.exceptions import ClientDisconnected
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wsgi import get_content_length, get_input_stream

from elastic_agent.backend import Backend
from elastic_agent.gocd.body import BadRequest
from elastic_agent.gocd.server import GoCDError
from elastic_agent.gocd.shared_token import SharedToken, shared
from elastic_agent.gocd.versions import BACKEND_VERSION_HEADER, BRIDGE_VERSION_ENVIRON
from elastic_agent.kube.connect import ConnectError
from elastic_agent.kube.port import ClusterError, Unreachable
from elastic_agent.pool.key_lifetime import figures as key_figures
from elastic_agent.pool.remote_file import RemoteFileError
from elastic_agent.service.in_flight import Handlers
from elastic_agent.service.metrics import Metrics
from executors.base import Incident, RequestContext, new_incident
from executors.base import Response as PluginResponse
from executors.dispatch import EXECUTORS, FROM_MEMORY, PREFIX, executor_for
from profiles.errors import ProfileError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from prometheus_client import Counter, Histogram

log = logging.getLogger(__name__)

PLUGIN_PATH = "/gocd/plugin/"
TEXT = "text/plain"
JSON = "application/json"
CONTENT_TYPES = {TEXT: "text/plain; charset=utf-8", JSON: JSON}
# GoCD's largest bodies are migrate-config and the status reports' profile lists: kilobytes, a few
# hundred for many profiles with pod templates. Anything past this is refused before it is read.
MAX_BODY_BYTES = 8 * 1024 * 1024


def create_app(
    backend: Backend,
    token: str | SharedToken,
    metrics: Metrics | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    stopping: threading.Event | None = None,
    handlers: Handlers[PluginAnswer] | None = None,
) -> Flask:
    """`token`: the one the bridge must send (a `TokenFile` follows its file). `stopping`: set once a
    graceful stop has begun (wsgi.RunningService.stop); /readyz says so. `handlers`: the threads that
    run the requests that may wait on the network, which a graceful stop gives up on."""
    metrics = metrics or Metrics()
    metrics.watch_pods(lambda: pod_counts(backend))
    metrics.watch_structures(backend.sizes, backend.size_limits)
    metrics.watch_predictions(backend.forecast.totals)
    metrics.watch_keys(backend.keys, lambda: [key_figures(pool.state) for pool in backend.pools()])
    app = Flask("elastic_agent")
    plugin = PluginRequests(backend, shared(token), metrics)
    stopping = stopping or threading.Event()

    @app.get("/healthz")
    def healthz() -> Response:
        """The bridge contract: 200 once ready to answer requests."""
        return Response("ok\n", mimetype="text/plain")

    # Kubernetes probes. Liveness asks only whether the process answers: a cluster or GoCD that cannot be
    # reached is reported in GoCD's health messages, and restarting the backend would not mend it.
    # Readiness turns 503 while a SIGTERM is being handled.
    @app.get("/livez")
    def livez() -> Response:
        return Response("alive\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        if stopping.is_set():
            return Response("stopping: answering the requests in flight\n", status=503, mimetype="text/plain")
        return Response("ready\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics_page() -> Response:
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    # The documented Flask way to put WSGI middleware in front of the application.
    served = plugin_requests_first(app.wsgi_app, plugin, max_body_bytes, handlers or Handlers())
    app.wsgi_app = served  # type: ignore[method-assign,assignment]
    return app


class PluginAnswer(NamedTuple):
    status: int
    body: str
    mimetype: str


class PluginRequests:
    """`POST /gocd/plugin/<name>`, the bridge contract: token check, executor, answer, metrics."""

    def __init__(self, backend: Backend, token: SharedToken, metrics: Metrics) -> None:
        self._backend = backend
        self._token = token
        self._expected = self._expect(token.current())
        self._metrics = metrics
        # Labelled metric children, looked up once: `labels()` costs a lock and a tuple build per call.
        # Both maps are bounded: known request names (plus "unknown") times the status codes they answer.
        self._latency: dict[str, Histogram] = {}
        self._answered: dict[tuple[str, int], Counter] = {}

    @staticmethod
    def _expect(token: str) -> tuple[str, bytes]:
        return token, f"Bearer {token}".encode()

    @property
    def backend_version(self) -> str:
        return self._backend.versions.backend

    def bridge_version(self, header: str | None) -> None:
        """The jar's version, as an authorized request carried it (None: the jar said none)."""
        self._backend.versions.seen(header)

    def authorized(self, authorization: str) -> bool:
        token, expected = self._expected
        now = self._token.current()
        if now is not token:  # rotated (a TokenFile returns the same str object until its file changes)
            token, expected = self._expected = self._expect(now)
        if hmac.compare_digest(authorization.encode(), expected):
            return True
        self._metrics.unauthorized.inc()
        return False

    def answer(self, name: str, callback_url: str | None, read_body: Callable[[], str]) -> PluginAnswer:
        """The answer to an authorized request."""
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
            body = _ReadOnce(read_body)
            try:
                answer = answer_safely(name, lambda: executor(body(), context), body.seen)
            finally:  # as Histogram.time() does
                latency.observe(max(perf_counter() - started, 0))
            metric_name = name
        return self.counted(metric_name, answer)

    def given_up(self, name: str) -> PluginAnswer:
        """The answer to a request still waiting on the network when a graceful stop gave up on it.

        503, Service Unavailable: nothing failed, the backend went away before the answer was known, and
        the request can be sent again. GoCD takes a create-agent that did not answer 200 as one that
        created nothing and sends it again, with the same job_id, for a job still waiting at its next
        scheduling of the job: the job is not lost, and a re-send is idempotent here. A pod the abandoned
        handler may still create before the process exits carries the labels by which the next backend
        finds it. server-ping comes again at the next interval; a status page is reloaded."""
        short = name.removeprefix(PREFIX)
        log.warning("%s: answered 503, the backend is stopping and the request was still waiting", short)
        text = (
            f"{short}: the plugin's backend is stopping (SIGTERM) and this request was still waiting on the "
            "Kubernetes API or on the GoCD server; it can be sent again once the backend is back."
        )
        return self.counted(name, PluginResponse(503, text))

    def counted(self, metric_name: str, answer: PluginResponse) -> PluginAnswer:
        key = (metric_name, answer.status)
        answered = self._answered.get(key)
        if answered is None:
            child = self._metrics.requests.labels(metric_name, str(answer.status))
            answered = self._answered.setdefault(key, child)
        answered.inc()
        return PluginAnswer(answer.status, answer.body, JSON if answer.body[:1] in ("{", "[") else TEXT)


def plugin_requests_first(
    flask_app: WSGIApplication,
    plugin: PluginRequests,
    max_body_bytes: int,
    handlers: Handlers[PluginAnswer],
) -> WSGIApplication:
    """Serves `POST /gocd/plugin/...` (see the module's docstring); everything else goes to Flask."""
    known = {PLUGIN_PATH + name: name for name in EXECUTORS}  # one lookup for the common case
    hand_over = EXECUTORS.keys() - FROM_MEMORY  # an unknown name is answered from memory too (404)
    version = backend_version_header(plugin.backend_version)

    def authorized(environ: WSGIEnvironment, name: str, length: int) -> PluginAnswer:
        if length > max_body_bytes:
            return _too_large(plugin, name, max_body_bytes)
        callback_url = environ.get("HTTP_X_GOCD_CALLBACK_URL")
        if name in hand_over:
            return handlers.answer(
                lambda: plugin.answer(name, callback_url, lambda: _read(environ, length, max_body_bytes)),
                lambda: plugin.given_up(name),
            )
        return plugin.answer(name, callback_url, lambda: _read(environ, length, max_body_bytes))

    def wsgi(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        name = known.get(path)
        if name is None:
            if not path.startswith(PLUGIN_PATH):
                return flask_app(environ, _with_header(start_response, version))
            name = path[len(PLUGIN_PATH) :]
        length = _declared_length(environ)
        if environ.get("REQUEST_METHOD") != "POST":
            answer = PluginAnswer(405, "plugin requests are sent with POST (the bridge contract)\n", TEXT)
        elif not plugin.authorized(environ.get("HTTP_AUTHORIZATION", "")):
            answer = PluginAnswer(401, "missing or wrong token\n", TEXT)
        else:
            plugin.bridge_version(environ.get(BRIDGE_VERSION_ENVIRON))
            answer = authorized(environ, name, length)
        body = answer.body.encode()
        headers = [
            ("Content-Type", CONTENT_TYPES[answer.mimetype]),
            ("Content-Length", str(len(body))),
            version,
        ]
        start_response(status_line(answer.status), headers)
        return [body]

    return wsgi


def backend_version_header(version: str) -> tuple[str, str]:
    """The header every answer carries: this backend's version, for the jar to compare with its own."""
    return BACKEND_VERSION_HEADER, version


def _with_header(start_response: StartResponse, header: tuple[str, str]) -> StartResponse:
    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
        return start_response(status, [*headers, header], exc_info)

    return start


class BodyTooLarge(Exception):
    pass


class BodyCutShort(Exception):
    pass


def _declared_length(environ: WSGIEnvironment) -> int:
    """werkzeug's reading of the header (" 3" is 3, "²" nothing): the stream `_read` reads is cut at
    that length, so the limit must be checked against the same number."""
    return get_content_length(environ) or 0


def _read(environ: WSGIEnvironment, length: int, limit: int) -> str:
    """The body as werkzeug reads it. A declared `length` was checked against `limit` already; a body
    without one is read in steps (not with read(limit), which would allocate `limit` bytes every time)
    and refused once it runs past `limit`."""
    stream = get_input_stream(environ, max_content_length=None)
    try:
        if length:
            return stream.read().decode(errors="replace")
        chunks: list[bytes] = []
        size = 0
        while chunk := stream.read(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
    except ClientDisconnected:  # fewer bytes than the declared length: the client went away
        raise BodyCutShort from None
    return b"".join(chunks).decode(errors="replace")


def _too_large(plugin: PluginRequests, name: str, limit: int) -> PluginAnswer:
    text = too_large(name, limit)
    return plugin.counted(name if executor_for(name) else "unknown", PluginResponse(413, text))


def too_large(name: str, limit: int) -> str:
    """The one log line and the sentence of a refused body (here, and in waitress: wsgi.py)."""
    short = name.removeprefix(PREFIX)
    log.warning("refused %s: its body is larger than %d bytes", short, limit)
    return f"{short}: the request body is larger than {limit} bytes, more than any GoCD request needs."


def status_line(status: int) -> str:
    """The status line werkzeug writes for a numeric status."""
    reason = HTTP_STATUS_CODES.get(status)
    return f"{status} {reason.upper()}" if reason else f"{status} UNKNOWN"


class _ReadOnce:
    """The request body, read when the executor asks; an incident's log hides what it held."""

    def __init__(self, read: Callable[[], str]) -> None:
        self._read = read
        self._text: str | None = None

    def __call__(self) -> str:
        if self._text is None:
            self._text = self._read()
        return self._text

    def seen(self) -> str | None:
        return self._text


def answer_safely(
    name: str, run: Callable[[], PluginResponse], request: Callable[[], object] = lambda: None
) -> PluginResponse:
    """Ordinary bad input and unreachable systems become answers with a sentence and one log line;
    nothing escapes, and only a bug (an unexpected exception) logs a traceback, with the values of
    `request()` (the body, once read) hidden from it."""
    short = name.removeprefix(PREFIX)
    try:
        return run()
    except BadRequest as error:
        return _refused(400, str(error))
    except BodyTooLarge:
        return _refused(413, f"{short}: the request body is too large for a GoCD request.")
    except BodyCutShort:
        return _refused(400, f"{short}: the request body ended before its declared Content-Length.")
    except ProfileError as error:
        # Logged by field only: a message may quote what was typed there, a secret included.
        log.warning("refused %s (422): the profile's %s is not valid", short, error.key or "settings")
        return PluginResponse(422, f"{short}: the profile is not valid: {error}")
    except RemoteFileError as error:
        return _refused(422, f"{short}: the remote pod template could not be used: {error}")
    except ConnectError as error:
        # Settings that name no cluster are the cluster profile's fault, not a passing outage: a 422.
        log.warning("refused %s (422): the cluster profile names no usable cluster", short)
        return PluginResponse(422, f"{short}: the cluster profile cannot be used: {error}")
    except ClusterError as error:
        # An outage's failures are DEBUG: the port's OutageTracker has logged the outage once; so are the
        # repeats of a refusal the create-agent executor has logged at its first occurrence.
        level = logging.DEBUG if isinstance(error, Unreachable) or error.repeated else logging.WARNING
        log.log(level, "%s: Kubernetes: %s", short, error)
        return PluginResponse(503, f"{short}: the Kubernetes cluster could not do it: {error}")
    except GoCDError as error:
        log.warning("%s: %s", short, error)
        return PluginResponse(502, f"{short}: {error}")
    except Incident as incident:
        return _unexpected(short, incident.incident)
    except Exception:
        return _unexpected(short, new_incident(short, request()))


def _refused(status: int, text: str) -> PluginResponse:
    """`text` names the request already, and never quotes a value that may be a secret."""
    log.warning("refused (%d): %s", status, text)
    return PluginResponse(status, text)


def _unexpected(short: str, incident: str) -> PluginResponse:
    return PluginResponse(
        500, f"{short} failed unexpectedly; the backend log has details (incident {incident})."
    )


def pod_counts(backend: Backend) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pool in backend.pools():
        for record in pool.records():
            counts[record.state.value] = counts.get(record.state.value, 0) + 1
    return counts
