"""`POST /gocd/plugin/<name>` is served by one WSGI function in front of Flask: it answers with the
status line and headers a Flask response would carry, reads the body whether or not the server ends the
input stream, counts every answer once, and leaves every other path to Flask."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import EnvironBuilder, run_wsgi_app

from elastic_agent.service.app import status_line
from elastic_agent.simulation.gocd_transport import (
    create_agent_body,
    encode,
    server_ping_body,
    should_assign_work_body,
)
from elastic_agent.simulation.stack import TOKEN, Stack

JOB = {
    "pipeline_name": "p", "pipeline_counter": 1, "pipeline_label": "1", "stage_name": "s",
    "stage_counter": "1", "job_name": "j", "job_id": 1,
}  # fmt: skip
AGENT = {"agent_id": "no-such-pod", "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
Answer = tuple[str, list[tuple[str, str]], bytes]


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(start_gocd=False)


def cases(stack: Stack) -> list[tuple[str, str, str | None]]:
    """(request name, body, token): answers of every kind that leave no state behind."""
    cluster, elastic = stack.cluster_profile(), stack.elastic_profile()
    ask = encode(should_assign_work_body(AGENT, None, elastic, cluster, JOB))
    return [
        ("cd.go.elastic-agent.get-capabilities", "", TOKEN),
        ("cd.go.elastic-agent.get-icon", "", TOKEN),
        ("cd.go.elastic-agent.get-cluster-profile-view", "", TOKEN),
        ("cd.go.elastic-agent.validate-cluster-profile", encode(cluster), TOKEN),
        ("cd.go.elastic-agent.validate-cluster-profile", '{"unexpected": true}', TOKEN),
        ("cd.go.elastic-agent.migrate-config", '{"unexpected": "\u00e9t\u00e9"}', TOKEN),
        ("cd.go.elastic-agent.should-assign-work", ask, TOKEN),
        ("cd.go.elastic-agent.should-assign-work", "{nope", TOKEN),
        ("cd.go.elastic-agent.should-assign-work", "\udcff", TOKEN),
        ("cd.go.elastic-agent.server-ping", encode(server_ping_body([cluster])), TOKEN),
        ("cd.go.elastic-agent.create-agent", encode(create_agent_body("k", {}, cluster, None, JOB)), TOKEN),
        ("cd.go.elastic-agent.should-assign-work", ask, None),
        ("cd.go.elastic-agent.should-assign-work", ask, "wrong"),
        ("cd.go.elastic-agent.should-assign-work", ask, TOKEN + "x"),
        ("go.plugin-settings.get-view", "", TOKEN),
    ]


def environ(stack: Stack, name: str, body: str, token: str | None, terminated: bool) -> dict[str, Any]:
    headers = {"X-GoCD-Extension-Version": "5.0", "X-GoCD-Callback-URL": stack.callback_url}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = body.encode(errors="surrogateescape")
    built = EnvironBuilder(path=f"/gocd/plugin/{name}", method="POST", headers=headers, data=data)
    env = built.get_environ()
    if terminated:  # as waitress says: the server ends the input stream itself
        env["wsgi.input_terminated"] = True
    return env


def call(wsgi: Callable[..., Iterable[bytes]], env: dict[str, Any]) -> Answer:
    body, status, headers = run_wsgi_app(wsgi, env)
    return status, list(headers.items()), b"".join(body)


def samples(app: Flask) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Counters and histogram counts, as /metrics shows them (durations differ from call to call)."""
    _, _, text = call(app.wsgi_app, EnvironBuilder(path="/metrics").get_environ())
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
        if sample.name.endswith(("_total", "_seconds_count"))
    }


@pytest.mark.parametrize("terminated", [True, False])
def test_plugin_requests_are_answered_with_werkzeugs_status_lines_and_counted_once(
    stack: Stack, terminated: bool
) -> None:
    assert stack.service is not None
    app = stack.service.app
    expected = [200, 200, 200, 200, 200, 200, 200, 400, 400, 200, 422, 401, 401, 401, 404]
    for (name, body, token), status in zip(cases(stack), expected, strict=True):
        before = samples(app)
        line, headers, answer = call(app.wsgi_app, environ(stack, name, body, token, terminated))
        after = samples(app)
        assert line == status_line(status), (name, body, token, answer)
        assert dict(headers)["Content-Length"] == str(len(answer))
        json_body = answer[:1] in (b"{", b"[")
        assert dict(headers)["Content-Type"] == (
            "application/json" if json_body else "text/plain; charset=utf-8"
        )
        counted = {
            key: after[key] - before.get(key, 0.0) for key in after if after[key] != before.get(key, 0.0)
        }
        if status == 401:
            assert counted == {("gocd_elastic_agent_unauthorized_requests_total", ()): 1.0}
        else:
            request = (("code", str(status)), ("request", name))
            assert counted == {
                ("gocd_elastic_agent_requests_total", request): 1.0,
                ("gocd_elastic_agent_request_seconds_count", (("request", name),)): 1.0,
            }, (name, counted)
    assert stack.pods() == []


def test_other_paths_and_methods_go_to_flask(stack: Stack) -> None:
    assert stack.service is not None
    app = stack.service.app
    headers = {"Authorization": f"Bearer {TOKEN}"}
    get = EnvironBuilder(path="/gocd/plugin/cd.go.elastic-agent.get-icon", method="GET", headers=headers)
    status, _, body = call(app.wsgi_app, get.get_environ())
    assert status == "405 METHOD NOT ALLOWED" and b"POST" in body
    unknown = EnvironBuilder(path="/gocd/plugin/cd.go.elastic-agent.make-tea", method="POST", headers=headers)
    status, _, body = call(app.wsgi_app, unknown.get_environ())
    assert status == "404 NOT FOUND" and b"make-tea" in body
    assert call(app.wsgi_app, EnvironBuilder(path="/healthz").get_environ())[2] == b"ok\n"


def test_status_lines_are_werkzeugs() -> None:
    assert [status_line(code) for code in (200, 401, 422, 503, 599)] == [
        "200 OK", "401 UNAUTHORIZED", "422 UNPROCESSABLE ENTITY", "503 SERVICE UNAVAILABLE", "599 UNKNOWN",
    ]  # fmt: skip
