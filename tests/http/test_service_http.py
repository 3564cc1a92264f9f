"""The bridge contract over real HTTP: token, health, metrics, and a sentence for every bad request."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import requests

from elastic_agent.simulation.stack import TOKEN, Stack
from executors.dispatch import EXECUTORS
from tests.support.plugin_calls import create_body, post

BODY_REQUESTS = [
    "create-agent",
    "should-assign-work",
    "job-completion",
    "server-ping",
    "validate-cluster-profile",
    "validate-elastic-agent-profile",
    "migrate-config",
    "cluster-status-report",
    "agent-status-report",
    "cluster-profile-changed",
]

BAD_BODIES = ["", "{nope", "[]", '"text"', "42", '{"unexpected": true}']


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(start_gocd=False)


def test_healthz_answers_once_ready(stack: Stack) -> None:
    assert stack.service is not None
    assert requests.get(f"{stack.service.url}/healthz", timeout=5).status_code == 200


@pytest.mark.parametrize("token", [None, "wrong-token", TOKEN + "x"])
def test_missing_or_wrong_token_is_refused_and_nothing_happens(stack: Stack, token: str | None) -> None:
    body = create_body(stack, stack.elastic_profile())
    answer = post(stack, "cd.go.elastic-agent.create-agent", body, token=token)
    assert answer.status_code == 401
    assert stack.pods() == []


def test_unknown_request_names_get_a_plain_404(stack: Stack) -> None:
    answer = post(stack, "cd.go.elastic-agent.make-coffee", "{}")
    assert answer.status_code == 404
    assert "make-coffee" in answer.text and "not a request this plugin knows" in answer.text


@pytest.mark.parametrize("request_name", BODY_REQUESTS)
@pytest.mark.parametrize("body", BAD_BODIES)
def test_bad_bodies_get_a_sentence_and_the_service_stays_healthy(
    stack: Stack, request_name: str, body: str
) -> None:
    answer = post(stack, f"cd.go.elastic-agent.{request_name}", body)
    if request_name.startswith("validate-") and body == '{"unexpected": true}':
        # A well-formed body with an unknown key is a validation result, not a bad request.
        assert answer.status_code == 200
        assert "unexpected" in answer.text
    elif request_name == "migrate-config" and body == '{"unexpected": true}':
        assert answer.status_code == 200, "migrate-config echoes what it receives"
        assert answer.json()["unexpected"] is True
    else:
        assert 400 <= answer.status_code < 500, answer.text
        assert "Traceback" not in answer.text
        assert len(answer.text) > 10 and answer.text[0].isalpha(), answer.text
    assert stack.service is not None
    assert requests.get(f"{stack.service.url}/healthz", timeout=5).status_code == 200


def test_every_request_of_the_protocol_has_an_executor() -> None:
    names = {
        "get-icon",
        "get-capabilities",
        "migrate-config",
        "get-cluster-profile-metadata",
        "get-cluster-profile-view",
        "validate-cluster-profile",
        "get-elastic-agent-profile-metadata",
        "get-elastic-agent-profile-view",
        "validate-elastic-agent-profile",
        "create-agent",
        "should-assign-work",
        "job-completion",
        "server-ping",
        "cluster-status-report",
        "agent-status-report",
        "plugin-status-report",
        "cluster-profile-changed",
    }
    assert {f"cd.go.elastic-agent.{name}" for name in names} <= set(EXECUTORS)
    assert {"go.plugin-settings.get-configuration", "go.plugin-settings.get-view"} <= set(EXECUTORS)


def test_load_time_requests_answer_with_the_documented_shapes(stack: Stack) -> None:
    icon = post(stack, "cd.go.elastic-agent.get-icon", "").json()
    assert icon["content_type"] == "image/svg+xml" and icon["data"]
    capabilities = post(stack, "cd.go.elastic-agent.get-capabilities", "").json()
    assert capabilities == {
        "supports_plugin_status_report": True,
        "supports_agent_status_report": True,
        "supports_cluster_status_report": True,
    }
    for kind in ("cluster-profile", "elastic-agent-profile"):
        metadata = post(stack, f"cd.go.elastic-agent.get-{kind}-metadata", "").json()
        assert metadata and all(set(item) == {"key", "metadata"} for item in metadata)
        view = post(stack, f"cd.go.elastic-agent.get-{kind}-view", "").json()
        for item in metadata:
            assert f'ng-model="{item["key"]}"' in view["template"]
    assert post(stack, "go.plugin-settings.get-configuration", "").json() == {}
    assert post(stack, "go.plugin-settings.get-view", "").status_code == 404


def test_migrate_config_echoes_what_it_receives(stack: Stack) -> None:
    config = {
        "plugin_settings": {},
        "cluster_profiles": [{"id": "c", "plugin_id": "x", "properties": stack.cluster_profile()}],
        "elastic_agent_profiles": [
            {"id": "e", "plugin_id": "x", "cluster_profile_id": "c", "properties": stack.elastic_profile()}
        ],
    }
    answer = post(stack, "cd.go.elastic-agent.migrate-config", json.dumps(config))
    assert answer.status_code == 200
    assert answer.json() == config


def test_migrate_config_turns_the_legacy_flag_into_a_pod_spec_type(stack: Stack) -> None:
    legacy = {"PodConfiguration": "apiVersion: v1", "SpecifiedUsingPodConfiguration": "true"}
    config = {
        "plugin_settings": {},
        "cluster_profiles": [],
        "elastic_agent_profiles": [
            {"id": "e", "plugin_id": "x", "cluster_profile_id": "c", "properties": legacy}
        ],
    }
    migrated = post(stack, "cd.go.elastic-agent.migrate-config", json.dumps(config)).json()
    assert migrated["elastic_agent_profiles"][0]["properties"]["PodSpecType"] == "yaml"


def test_validation_reports_problems_per_key(stack: Stack) -> None:
    problems = post(
        stack,
        "cd.go.elastic-agent.validate-cluster-profile",
        json.dumps({"go_server_url": "http://localhost:8153/go", "idle_timeout": "soon", "colour": "red"}),
    ).json()
    keys = {problem["key"] for problem in problems}
    assert {"go_server_url", "idle_timeout", "colour"} <= keys
    assert (
        post(
            stack, "cd.go.elastic-agent.validate-cluster-profile", json.dumps(stack.cluster_profile())
        ).json()
        == []
    )


def test_an_invalid_profile_at_create_agent_is_a_422_with_the_reason(stack: Stack) -> None:
    body = create_body(stack, {"PodSpecType": "properties"})
    answer = post(stack, "cd.go.elastic-agent.create-agent", body)
    assert answer.status_code == 422
    assert "Image" in answer.text


def test_metrics_need_no_token_and_count_requests(stack: Stack) -> None:
    post(stack, "cd.go.elastic-agent.get-capabilities", "")
    post(stack, "cd.go.elastic-agent.get-capabilities", "", token="bad")
    assert stack.service is not None
    text = requests.get(f"{stack.service.url}/metrics", timeout=5).text
    assert (
        'gocd_elastic_agent_requests_total{code="200",request="cd.go.elastic-agent.get-capabilities"}' in text
    )
    assert "gocd_elastic_agent_unauthorized_requests_total 1.0" in text
    assert 'gocd_elastic_agent_pods{state="idle"}' in text
    assert TOKEN not in text


def test_liveness_and_readiness_answer_and_readiness_turns_503_while_stopping(stack: Stack) -> None:
    assert stack.service is not None
    url = stack.service.url
    assert requests.get(f"{url}/livez", timeout=5).status_code == 200
    assert requests.get(f"{url}/readyz", timeout=5).status_code == 200
    stack.service.stopping.set()  # what a SIGTERM does first
    answer = requests.get(f"{url}/readyz", timeout=5)
    assert answer.status_code == 503 and "stopping" in answer.text
    assert requests.get(f"{url}/livez", timeout=5).status_code == 200, "alive while it stops"


def test_the_probe_command_exits_0_only_when_the_backend_answers_200(stack: Stack) -> None:
    from elastic_agent.cli import main

    assert stack.service is not None
    assert main(["probe", "--url", f"{stack.service.url}/readyz"]) == 0
    assert main(["probe", "--url", f"{stack.service.url}/no-such-endpoint"]) == 1
    assert main(["probe", "--url", "http://127.0.0.1:9/readyz", "--timeout", "0.5"]) == 1
    stack.service.stopping.set()
    assert main(["probe", "--url", f"{stack.service.url}/readyz"]) == 1
