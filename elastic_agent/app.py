"""The HTTP service: Flask application factory; routes stay thin and hand over to the executors."""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import Callable

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from elastic_agent.backend import Backend
from elastic_agent.gocd import GoCDError
from elastic_agent.kube.port import ClusterError
from elastic_agent.messages import BadRequest
from elastic_agent.metrics import Metrics
from elastic_agent.remote_file import RemoteFileError
from executors.base import RequestContext
from executors.base import Response as PluginResponse
from executors.dispatch import executor_for
from profiles.errors import ProfileError

log = logging.getLogger(__name__)


def create_app(backend: Backend, token: str, metrics: Metrics | None = None) -> Flask:
    if not token:
        raise ValueError("a token is required")
    metrics = metrics or Metrics()
    metrics.watch_pods(lambda: pod_counts(backend))
    app = Flask("elastic_agent")
    app.config["BACKEND"] = backend
    expected = f"Bearer {token}".encode()

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics_page() -> Response:
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    @app.post("/gocd/plugin/<path:name>")
    def plugin_request(name: str) -> Response:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            metrics.unauthorized.inc()
            return Response("missing or wrong token\n", status=401, mimetype="text/plain")
        executor = executor_for(name)
        if executor is None:
            answer = PluginResponse(404, f"'{name}' is not a request this plugin knows.")
            metric_name = "unknown"
        else:
            context = RequestContext(backend, request.headers.get("X-GoCD-Callback-URL"))
            with metrics.latency.labels(name).time():
                answer = answer_safely(name, lambda: executor(request.get_data(as_text=True), context))
            metric_name = name
        metrics.requests.labels(metric_name, str(answer.status)).inc()
        mimetype = "application/json" if answer.body[:1] in ("{", "[") else "text/plain"
        return Response(answer.body, status=answer.status, mimetype=mimetype)

    return app


def answer_safely(name: str, run: Callable[[], PluginResponse]) -> PluginResponse:
    """Ordinary bad input and unreachable systems become answers with a sentence; nothing escapes."""
    short = name.removeprefix("cd.go.elastic-agent.")
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
