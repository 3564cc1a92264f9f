"""Regression tests for the leaks the secrets audit (tests/real/test_secrets_audit.py) found: messages that
quoted what they refused, and log lines that showed a URL's credentials.

Each message here reaches a job's console or GoCD's health messages (create-agent answers with it), and
the text it quoted could be a resolved `{{SECRET:...}}`.
"""

from __future__ import annotations

import logging

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.port import ClusterError
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.request_log import shown_target
from executors.server_ping import _where
from profiles.cluster import ClusterProfile
from profiles.validation import validate_cluster_profile, validate_elastic_profile
from tests.support.secret_values import (
    ALIAS_SECRET,
    INVALID_ENV_SECRET,
    KEY_LINES,
    PRIVATE_KEY,
    REMOTE_QUERY_SECRET,
    REMOTE_USER_SECRET,
    TAG_SECRET,
    URL_USER_SECRET,
    TemplateServer,
    closed_port,
    template_with,
)


def _messages(problems: list[dict[str, str]]) -> str:
    return " ".join(problem["message"] for problem in problems)


@pytest.mark.parametrize(
    ("environment", "where"),
    [
        (f"SSH_KEY={PRIVATE_KEY}", "line 2 is not NAME=value: it has no '='"),
        (f"DB_PASSWORD {INVALID_ENV_SECRET}", "line 1 is not NAME=value"),
        ("DB_PASSWORD s3cretWithoutAnEqualsSign", "line 1 is not NAME=value: it has no '='"),
        (f"1DB_PASSWORD={INVALID_ENV_SECRET}", "line 1 is not NAME=value: a name is"),
        (f"A=1\n{KEY_LINES[0][:20]}+/x={INVALID_ENV_SECRET}", "line 2 is not NAME=value: a name is"),
    ],
)
def test_an_environment_line_that_is_not_name_value_is_refused_by_its_number_without_quoting_it(
    environment: str, where: str
) -> None:
    message = _messages(validate_elastic_profile({"Image": "gocd/agent:v1", "Environment": environment}))
    assert where in message
    for secret in (INVALID_ENV_SECRET, *KEY_LINES, KEY_LINES[0][:20], "s3cretWithoutAnEqualsSign"):
        assert secret not in message


@pytest.mark.parametrize("value", [TAG_SECRET, ALIAS_SECRET])
def test_a_secret_read_as_a_yaml_tag_or_alias_is_refused_by_its_place_without_quoting_it(value: str) -> None:
    message = _messages(
        validate_elastic_profile({"PodSpecType": "yaml", "PodConfiguration": template_with(value)})
    )
    assert "not valid YAML (line 11, column 14)" in message
    assert value[1:] not in message


def test_yaml_messages_still_quote_the_one_character_they_stumble_on() -> None:
    template = template_with("'x'").replace("spec:\n", "spec:\n\t\n")
    message = _messages(validate_elastic_profile({"PodSpecType": "yaml", "PodConfiguration": template}))
    assert "'\\t'" in message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"ftp://agent:{REMOTE_USER_SECRET}@t.example.test/pod.yaml?token={REMOTE_QUERY_SECRET}",
            "'ftp://t.example.test/pod.yaml' is not an http:// or https:// URL",
        ),
        (
            f"https://agent:{REMOTE_USER_SECRET}@t.example.test/p y?token={REMOTE_QUERY_SECRET}",
            "'https://t.example.test/p y' is not a valid URL: it contains spaces",
        ),
        (
            f"https://agent:{REMOTE_USER_SECRET}@t.example.test:port/?token={REMOTE_QUERY_SECRET}",
            "not a valid URL: its host or port cannot be read",
        ),
    ],
)
def test_a_refused_url_is_named_without_its_user_info_or_query(url: str, shown: str) -> None:
    message = _messages(validate_elastic_profile({"PodSpecType": "remote", "RemoteFile": url}))
    message += _messages(
        validate_cluster_profile(
            {"go_server_url": "https://g.example.test/go", "kubernetes_cluster_url": url}
        )
    )
    assert shown in message
    assert REMOTE_USER_SECRET not in message and REMOTE_QUERY_SECRET not in message


def test_kubernetes_errors_and_health_messages_name_the_cluster_without_its_user_info() -> None:
    url = f"http://admin:{URL_USER_SECRET}@127.0.0.1:{closed_port()}"
    port = KubeCluster(connect(url=url, token="t"), "default", {"app": "x"}, ManualClock())
    with pytest.raises(ClusterError) as refused:
        port.create_pod({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert "cannot reach the Kubernetes API at http://127.0.0.1:" in str(refused.value)
    assert URL_USER_SECRET not in str(refused.value) and URL_USER_SECRET not in port.url
    profile = ClusterProfile.from_properties(
        {"go_server_url": "https://g.example.test/go", "kubernetes_cluster_url": url}
    )
    assert _where(profile).startswith("The Kubernetes cluster http://127.0.0.1:")
    assert URL_USER_SECRET not in _where(profile)


def test_a_remote_template_fetch_at_debug_logs_its_request_line_without_the_access_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    templates = TemplateServer()
    caplog.set_level(logging.DEBUG, logger="urllib3")  # the Kubernetes client puts it at WARNING
    try:
        url = f"http://127.0.0.1:{templates.port}/pod.yaml?access_token={REMOTE_QUERY_SECRET}&v=2"
        RemoteFileFetcher(ManualClock()).fetch(url)
    finally:
        templates.stop()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("urllib3")]
    assert any('"GET /pod.yaml?access_token=hidden&v=hidden HTTP/1.1" 200' in line for line in lines), lines
    assert not any(REMOTE_QUERY_SECRET in line for line in lines)


def test_request_lines_keep_the_kubernetes_api_parameters() -> None:
    target = "/api/v1/namespaces/ci/pods?labelSelector=a%3Db&watch=true&resourceVersion=12&token=s3cret"
    assert (
        shown_target(target)
        == "/api/v1/namespaces/ci/pods?labelSelector=a%3Db&watch=true&resourceVersion=12&token=hidden"
    )
    assert shown_target("/pod.yaml?s3cret") == "/pod.yaml?s3cret=hidden"
    assert shown_target("/no/query") == "/no/query"
