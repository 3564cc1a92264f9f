"""Bad input as a new user or a broken client sends it: a sentence and a 4xx or 503, one log line per
refused request, no traceback, and a healthy service afterwards. Over real HTTP."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from elastic_agent.service.app import MAX_BODY_BYTES
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode, server_ping_body
from elastic_agent.simulation.stack import TOKEN, Stack
from tests.support.plugin_calls import create_body, post


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(start_gocd=False)


def backend_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("elastic_agent", "executors"))]


def test_a_body_nested_a_hundred_thousand_deep_is_refused_with_one_line_and_no_traceback(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for _ in range(20):
        answer = post(stack, REQUEST_PREFIX + "should-assign-work", "[" * 100_000)
        assert answer.status_code == 400 and "nested too deeply" in answer.text, answer.text
    refused = backend_records(caplog)
    assert len(refused) == 20, [r.getMessage() for r in refused]
    assert not any(r.exc_info for r in refused), "tracebacks are for bugs"
    assert post(stack, REQUEST_PREFIX + "get-capabilities", "").status_code == 200


def test_a_body_larger_than_the_limit_is_refused_before_it_is_read(stack: Stack) -> None:
    big = "x" * (MAX_BODY_BYTES + 1)
    answer = post(stack, REQUEST_PREFIX + "create-agent", big)
    assert answer.status_code == 413
    assert f"larger than {MAX_BODY_BYTES} bytes" in answer.text and answer.text[0].isalpha()


def test_a_body_without_a_length_that_runs_past_the_limit_is_refused(stack: Stack) -> None:
    assert stack.service is not None

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    headers = {"Authorization": f"Bearer {TOKEN}", "X-GoCD-Callback-URL": stack.callback_url}
    url = f"{stack.service.url}/gocd/plugin/{REQUEST_PREFIX}create-agent"
    answer = requests.post(url, data=chunks(), headers=headers, timeout=30)
    assert answer.status_code == 413 and "larger than" in answer.text


@pytest.fixture
def nowhere_to_connect(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Outside a cluster (no service account) and without a kubeconfig."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))


def test_a_cluster_profile_without_a_url_outside_a_cluster_says_what_to_configure(
    stack: Stack, nowhere_to_connect: None, caplog: pytest.LogCaptureFixture
) -> None:
    profile = stack.cluster_profile()
    del profile["kubernetes_cluster_url"]
    problems = post(stack, REQUEST_PREFIX + "validate-cluster-profile", encode(profile)).json()
    assert [p["key"] for p in problems] == ["kubernetes_cluster_url"]
    assert "set kubernetes_cluster_url" in problems[0]["message"]

    body = create_body(stack, stack.elastic_profile()).replace(
        encode(stack.cluster_profile()), encode(profile)
    )
    answer = post(stack, REQUEST_PREFIX + "create-agent", body)
    # The profile names no cluster: its fault, not a passing outage (422, not 503).
    assert answer.status_code == 422 and "set kubernetes_cluster_url" in answer.text, answer.text
    assert not any(r.exc_info for r in backend_records(caplog))

    console = [line for lines in stack.gocd.orphan_console.values() for line in lines]
    assert any(
        "could not create an agent pod" in line and "set kubernetes_cluster_url" in line for line in console
    )

    post(stack, REQUEST_PREFIX + "server-ping", encode(server_ping_body([profile])))
    health = [message.message for message in stack.gocd.health_messages]
    assert any("set kubernetes_cluster_url" in message for message in health), health
