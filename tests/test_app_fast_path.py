"""The WSGI fast path for `POST /gocd/plugin/<name>` answers byte for byte as the Flask route does, and
counts the same metrics."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import EnvironBuilder, run_wsgi_app

from elastic_agent.app import status_line
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
def test_the_fast_path_answers_and_counts_as_the_flask_route_does(stack: Stack, terminated: bool) -> None:
    assert stack.service is not None
    app = stack.service.app
    flask_route = functools.partial(Flask.wsgi_app, app)  # the application without the fast path
    for name, body, token in cases(stack):
        before = samples(app)
        fast = call(app.wsgi_app, environ(stack, name, body, token, terminated))
        after_fast = samples(app)
        slow = call(flask_route, environ(stack, name, body, token, terminated))
        after_slow = samples(app)
        assert fast == slow, (name, body, token)
        counted_fast = {key: after_fast[key] - before.get(key, 0.0) for key in after_fast}
        counted_slow = {key: after_slow[key] - after_fast.get(key, 0.0) for key in after_slow}
        assert counted_fast == counted_slow and any(counted_fast.values()), (name, token)
    assert stack.pods() == []


def test_other_paths_and_methods_go_to_flask(stack: Stack) -> None:
    assert stack.service is not None
    app = stack.service.app
    headers = {"Authorization": f"Bearer {TOKEN}"}
    get = EnvironBuilder(path="/gocd/plugin/cd.go.elastic-agent.get-icon", method="GET", headers=headers)
    assert call(app.wsgi_app, get.get_environ())[0] == "405 METHOD NOT ALLOWED"
    unknown = EnvironBuilder(path="/gocd/plugin/cd.go.elastic-agent.make-tea", method="POST", headers=headers)
    status, _, body = call(app.wsgi_app, unknown.get_environ())
    assert status == "404 NOT FOUND" and b"make-tea" in body
    assert call(app.wsgi_app, EnvironBuilder(path="/healthz").get_environ())[2] == b"ok\n"


def test_status_lines_are_werkzeugs() -> None:
    assert [status_line(code) for code in (200, 401, 422, 503, 599)] == [
        "200 OK", "401 UNAUTHORIZED", "422 UNPROCESSABLE ENTITY", "503 SERVICE UNAVAILABLE", "599 UNKNOWN",
    ]  # fmt: skip
