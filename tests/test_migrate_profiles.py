"""`migrate-profiles` against recorded GoCD API answers: what it reads, exactly what it sends, what it
prints, and that no secret (the token, GoCD's encrypted values) is ever printed or logged.

The answers have the shapes of GoCD's own representers (gocd/gocd: ClusterProfilesRepresenter v1,
ElasticProfilesRepresenter v2, ConfigurationPropertyRepresenter, MessageJson for errors)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from elastic_agent.cli import main
from elastic_agent.service import migrate

SERVER = "https://gocd.example.com/go"
CLUSTERS_URL = SERVER + "/api/admin/elastic/cluster_profiles"
ELASTICS_URL = SERVER + "/api/elastic/profiles"
OLD = "cd.go.contrib.elasticagent.kubernetes"
NEW = "cd.go.contrib.elasticagent.kubernetes-reuse"
V1 = "application/vnd.go.cd.v1+json"
V2 = "application/vnd.go.cd.v2+json"

TOKEN = "gocd-pat-5f1c9a0e7d3b42c8a6e1f0b9"
# GoCD's cipher text ("AES:<iv>:<data>"): copied as it is, never decrypted, never shown.
PROD_TOKEN = "AES:cHJvZC10b2tlbi1pdg==:UFJPRC1UT0tFTi1DSVBIRVJURVhU"
PROD_CA = "AES:cHJvZC1jYS1pdg==:UFJPRC1DQS1DSVBIRVJURVhU"
STAGING_TOKEN = "AES:c3RhZ2luZy1pdg==:U1RBR0lORy1UT0tFTi1DSVBIRVI="
SECRETS = (TOKEN, PROD_TOKEN, PROD_CA, STAGING_TOKEN)

POD_YAML = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gocd-agent-{{ POD_POSTFIX }}\nspec:\n  containers:\n"
    "  - name: gocd-agent-container-{{ CONTAINER_POSTFIX }}\n"
    "    image: {{ GOCD_AGENT_IMAGE }}:{{ LATEST_VERSION }}\n"
)


def _links(path: str) -> dict[str, Any]:
    return {"self": {"href": SERVER + path}, "doc": {"href": "https://api.gocd.org/#cluster-profiles"}}


def cluster(id_: str, plugin_id: str, properties: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "_links": _links(f"/api/admin/elastic/cluster_profiles/{id_}"),
        "id": id_,
        "plugin_id": plugin_id,
        "properties": properties,
    }


def elastic(id_: str, cluster_id: str, properties: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "_links": _links(f"/api/elastic/profiles/{id_}"),
        "id": id_,
        "cluster_profile_id": cluster_id,
        "properties": properties,
    }


PROD_PROPERTIES = [
    {"key": "go_server_url", "value": "https://gocd.example.com/go"},
    {"key": "kubernetes_cluster_url", "value": "https://k8s.example.com:6443"},
    {"key": "namespace", "value": "gocd-agents"},
    {"key": "security_token", "encrypted_value": PROD_TOKEN},
    {"key": "kubernetes_cluster_ca_cert", "encrypted_value": PROD_CA},
    {"key": "cluster_request_timeout", "value": "10000"},
    {"key": "pending_pods_count", "value": "10"},
    {"key": "auto_register_timeout", "value": "10"},
]
STAGING_PROPERTIES = [
    {"key": "go_server_url", "value": "https://gocd.example.com/go"},
    {"key": "kubernetes_cluster_url"},  # blank: GoCD lists the key alone
    {"key": "namespace", "value": "staging"},
    {"key": "security_token", "encrypted_value": STAGING_TOKEN},
    {"key": "kubernetes_cluster_ca_cert"},
]
SMALL_PROPERTIES = [
    {"key": "Image", "value": "gocd/gocd-agent-wolfi:v24.3.0"},
    {"key": "MaxMemory", "value": "1G"},
    {"key": "MaxCPU", "value": "0.5"},
    {"key": "Environment", "value": "JAVA_HOME=/opt/java\nMAKE_OPTS=-j8"},
    {"key": "Privileged", "value": "false"},
    {"key": "PodSpecType", "value": "properties"},
]
YAML_PROPERTIES = [
    {"key": "PodSpecType", "value": "yaml"},
    {"key": "PodConfiguration", "value": POD_YAML},
    {"key": "Privileged", "value": "false"},
]
STAGING_AGENT_PROPERTIES = [
    {"key": "Image", "value": "gocd/gocd-agent-wolfi:v24.3.0"},
    {"key": "SpecifiedUsingPodConfiguration", "value": "false"},
]


def cluster_list(*extra: dict[str, Any]) -> dict[str, Any]:
    """Two cluster profiles of the official plugin and one of another plugin (to be left alone)."""
    profiles = [
        cluster("k8s-prod", OLD, PROD_PROPERTIES),
        cluster("k8s-staging", OLD, STAGING_PROPERTIES),
        cluster(
            "docker", "cd.go.contrib.elastic-agent.docker", [{"key": "docker_uri", "value": "unix:///x"}]
        ),
        *extra,
    ]
    return {
        "_links": _links("/api/admin/elastic/cluster_profiles"),
        "_embedded": {"cluster_profiles": profiles},
    }


def elastic_list(*extra: dict[str, Any]) -> dict[str, Any]:
    profiles = [
        elastic("small", "k8s-prod", SMALL_PROPERTIES),
        elastic("yaml-pod", "k8s-prod", YAML_PROPERTIES),
        elastic("staging-agent", "k8s-staging", STAGING_AGENT_PROPERTIES),
        elastic("docker-agent", "docker", [{"key": "Image", "value": "alpine"}]),
        *extra,
    ]
    return {"_links": _links("/api/elastic/profiles"), "_embedded": {"profiles": profiles}}


@pytest.fixture
def gocd() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture(autouse=True)
def not_in_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service account's namespace file, absent (as outside a pod) unless a test writes it."""
    path = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(migrate, "SERVICE_ACCOUNT_NAMESPACE", path)
    return path


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "gocd-token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


def serve_lists(gocd: responses.RequestsMock, clusters: dict[str, Any], elastics: dict[str, Any]) -> None:
    gocd.get(CLUSTERS_URL, json=clusters, content_type=V1 + "; charset=utf-8")
    gocd.get(ELASTICS_URL, json=elastics, content_type=V2 + "; charset=utf-8")


def echo_posts(gocd: responses.RequestsMock) -> None:
    """GoCD answers a successful create with the entity it stored."""

    def echo(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        body = request.body
        text = body.decode() if isinstance(body, bytes) else str(body or "")
        return 200, {"ETag": '"cbc5f2d5b9c13a2cc1b1efb3d8a6155d"'}, text

    gocd.add_callback(responses.POST, CLUSTERS_URL, callback=echo, content_type=V1 + "; charset=utf-8")
    gocd.add_callback(responses.POST, ELASTICS_URL, callback=echo, content_type=V2 + "; charset=utf-8")


def run(token_file: Path, *options: str) -> int:
    return main(["migrate-profiles", "--server", SERVER, "--token-file", str(token_file), *options])


def posts(gocd: responses.RequestsMock) -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(call.request.url), json.loads(call.request.body or b""))
        for call in gocd.calls
        if call.request.method == "POST"
    ]


EXPECTED_CLUSTERS = {
    "k8s-prod-reuse": {"id": "k8s-prod-reuse", "plugin_id": NEW, "properties": PROD_PROPERTIES},
    "k8s-staging-reuse": {"id": "k8s-staging-reuse", "plugin_id": NEW, "properties": STAGING_PROPERTIES},
}
EXPECTED_ELASTICS = {
    "small-reuse": {
        "id": "small-reuse",
        "cluster_profile_id": "k8s-prod-reuse",
        "properties": SMALL_PROPERTIES,
    },
    "yaml-pod-reuse": {
        "id": "yaml-pod-reuse",
        "cluster_profile_id": "k8s-prod-reuse",
        "properties": YAML_PROPERTIES,
    },
    "staging-agent-reuse": {
        "id": "staging-agent-reuse",
        "cluster_profile_id": "k8s-staging-reuse",
        "properties": STAGING_AGENT_PROPERTIES,
    },
}


def test_creates_a_copy_of_each_profile_with_exactly_the_same_settings(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    echo_posts(gocd)

    assert run(token_file) == 0

    # Each cluster profile, then its elastic profiles; the other plugin's profiles are not touched.
    assert posts(gocd) == [
        (CLUSTERS_URL, EXPECTED_CLUSTERS["k8s-prod-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["small-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["yaml-pod-reuse"]),
        (CLUSTERS_URL, EXPECTED_CLUSTERS["k8s-staging-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["staging-agent-reuse"]),
    ]
    # Secrets went back as GoCD's cipher text, never as a value.
    sent = json.dumps(posts(gocd))
    assert PROD_TOKEN in sent and PROD_CA in sent and STAGING_TOKEN in sent
    prod_token = next(p for p in posts(gocd)[0][1]["properties"] if p["key"] == "security_token")
    assert prod_token == {"key": "security_token", "encrypted_value": PROD_TOKEN}
    # Nothing but GET and POST: the old profiles are never changed.
    assert {call.request.method for call in gocd.calls} == {"GET", "POST"}

    for call in gocd.calls:
        headers = call.request.headers
        assert headers["Authorization"] == f"bearer {TOKEN}"
        assert headers["Accept"] == (V1 if "cluster_profiles" in str(call.request.url) else V2)
        if call.request.method == "POST":
            assert headers["Content-Type"] == "application/json"
            assert "If-Match" not in headers

    out = capsys.readouterr().out
    assert "cluster profile 'k8s-prod' -> 'k8s-prod-reuse': created." in out
    assert "  elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': created." in out
    assert "security_token (secret kept)" in out and "kubernetes_cluster_ca_cert (secret kept)" in out
    assert "docker" not in out
    assert "Summary: created 5 profiles; 0 skipped (they exist already); 0 not migrated." in out
    assert "Reuse" not in json.dumps(posts(gocd))  # Reuse stays this plugin's default (false)


def test_a_dry_run_prints_the_plan_and_sends_nothing(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    echo_posts(gocd)

    assert run(token_file, "--dry-run") == 0

    assert [call.request.method for call in gocd.calls] == ["GET", "GET"]
    out = capsys.readouterr().out
    assert "Dry run: nothing is sent to GoCD." in out
    assert "cluster profile 'k8s-staging' -> 'k8s-staging-reuse': would be created." in out
    assert (
        "    settings: go_server_url, kubernetes_cluster_url, namespace, security_token (secret kept), "
        "kubernetes_cluster_ca_cert (secret kept), cluster_request_timeout, pending_pods_count, "
        "auto_register_timeout"
    ) in out
    assert "security_token (secret kept), kubernetes_cluster_ca_cert (blank)\n" in out  # k8s-staging
    assert "  elastic profile 'staging-agent' -> 'staging-agent-reuse' on cluster profile " in out
    assert "Summary: would create 5 profiles;" in out and "Dry run: nothing was sent to GoCD." in out


def test_reuse_sets_reuse_true_on_every_migrated_elastic_profile(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    echo_posts(gocd)

    assert run(token_file, "--reuse", "--suffix", "_v2") == 0

    sent = posts(gocd)
    for url, body in sent:
        if url == ELASTICS_URL:
            assert body["id"].endswith("_v2") and body["cluster_profile_id"].endswith("_v2")
            assert body["properties"][-1] == {"key": "Reuse", "value": "true"}
            assert [p for p in body["properties"] if p["key"] == "Reuse"] == [
                {"key": "Reuse", "value": "true"}
            ]
        else:
            assert "Reuse" not in json.dumps(body)  # a cluster profile has no such setting
    assert sum(url == ELASTICS_URL for url, _ in sent) == 3
    assert "Reuse=true (--reuse)" in capsys.readouterr().out


def test_a_rerun_skips_the_profiles_that_exist_already(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done_cluster = cluster("k8s-prod-reuse", NEW, PROD_PROPERTIES)
    done_elastic = elastic("small-reuse", "k8s-prod-reuse", SMALL_PROPERTIES)
    serve_lists(gocd, cluster_list(done_cluster), elastic_list(done_elastic))
    echo_posts(gocd)

    assert run(token_file) == 0

    assert [body["id"] for _, body in posts(gocd)] == [
        "yaml-pod-reuse",
        "k8s-staging-reuse",
        "staging-agent-reuse",
    ]
    out = capsys.readouterr().out
    assert "cluster profile 'k8s-prod' -> 'k8s-prod-reuse': exists already, skipped." in out
    assert (
        "elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': exists already" in out
    )
    assert "Summary: created 3 profiles; 2 skipped (they exist already); 0 not migrated." in out


def test_a_new_id_taken_by_another_plugin_is_reported_not_overwritten(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = cluster("k8s-staging-reuse", "cd.go.contrib.elastic-agent.docker", [])
    serve_lists(gocd, cluster_list(taken), elastic_list())
    echo_posts(gocd)

    assert run(token_file) == 1

    assert [body["id"] for _, body in posts(gocd)] == ["k8s-prod-reuse", "small-reuse", "yaml-pod-reuse"]
    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-staging' -> 'k8s-staging-reuse': not migrated: a cluster profile "
        "'k8s-staging-reuse' of another plugin (cd.go.contrib.elastic-agent.docker) exists already: choose "
        "another --suffix."
    ) in out
    assert (
        "'staging-agent-reuse' on cluster profile 'k8s-staging-reuse': not migrated: its cluster profile"
        in out
    )


def test_settings_are_checked_with_this_plugins_validation_before_anything_is_sent(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd_cluster = cluster(
        "k8s-odd",
        OLD,
        [*STAGING_PROPERTIES, {"key": "legacy_setting", "value": "x"}],  # not a setting of this plugin
    )
    bad_elastic = elastic("huge", "k8s-prod", [*SMALL_PROPERTIES[:1], {"key": "MaxMemory", "value": "lots"}])
    hidden_image = elastic("hidden", "k8s-prod", [{"key": "Image", "encrypted_value": "AES:aXY=:aW1hZ2U="}])
    serve_lists(gocd, cluster_list(odd_cluster), elastic_list(bad_elastic, hidden_image))
    echo_posts(gocd)

    assert run(token_file) == 1

    sent = {body["id"]: body for _, body in posts(gocd)}
    assert "huge-reuse" not in sent and "hidden-reuse" not in sent  # GoCD would refuse them or drop a value
    assert sent["k8s-odd-reuse"]["properties"] == STAGING_PROPERTIES  # the unknown key is left out
    out = capsys.readouterr().out
    assert "    left out: setting legacy_setting is not one of this plugin's, so it is left out." in out
    assert "elastic profile 'huge' -> 'huge-reuse' on cluster profile 'k8s-prod-reuse': not migrated: " in out
    assert "setting MaxMemory: " in out
    assert "setting Image is encrypted in GoCD, but this plugin keeps it in plain text" in out
    assert "Summary: created 6 profiles; 0 skipped (they exist already); 2 not migrated." in out


# --- GoCD's error answers ------------------------------------------------------------------------------


def test_a_refused_token_is_one_sentence_and_nothing_is_sent(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, status=401, json={"message": "You are not authenticated!"})

    assert run(token_file) == 2

    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "error: GoCD refused the token: check --token-file (a personal access token of an admin). "
        "GoCD said: You are not authenticated!"
    )
    assert len(gocd.calls) == 1
    assert "Traceback" not in captured.err


def test_a_wrong_url_says_to_give_the_servers_url_ending_in_go(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(
        CLUSTERS_URL,
        status=404,
        json={
            "message": "Either the resource you requested was not found, or you are not authorized to "
            "perform this action."
        },
    )

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert f"error: GoCD has no API at {CLUSTERS_URL} (404): is the URL the server's, ending in /go" in err


def test_a_422_names_the_profile_and_each_field_and_the_rest_goes_on(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    refused = {
        "message": "Validations failed for clusterProfile 'k8s-prod-reuse'. "
        "Error(s): [Plugin not installed.].",
        "data": {
            "id": "k8s-prod-reuse",
            "plugin_id": NEW,
            "properties": [
                {
                    "key": "go_server_url",
                    "value": "https://gocd.example.com/go",
                    "errors": {"go_server_url": ["GoCD server URL must be reachable from the pods"]},
                },
                {"key": "security_token", "encrypted_value": PROD_TOKEN},
            ],
            "errors": {"plugin_id": ["Plugin not installed."]},
        },
    }
    gocd.post(
        CLUSTERS_URL,
        status=422,
        json=refused,
        match=[responses.matchers.json_params_matcher(EXPECTED_CLUSTERS["k8s-prod-reuse"])],
    )
    echo_posts(gocd)

    assert run(token_file) == 1

    assert [body["id"] for _, body in posts(gocd)] == [
        "k8s-prod-reuse",
        "k8s-staging-reuse",
        "staging-agent-reuse",
    ]
    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-prod' -> 'k8s-prod-reuse': failed: GoCD refused to create cluster profile "
        "'k8s-prod-reuse' (422). GoCD said: Validations failed for clusterProfile 'k8s-prod-reuse'. "
        "Error(s): [Plugin not installed.]. Field plugin_id: Plugin not installed. "
        "Setting go_server_url: GoCD server URL must be reachable from the pods."
    ) in out
    assert (
        "  elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': not migrated: its "
        "cluster profile 'k8s-prod-reuse' was not migrated."
    ) in out
    assert "Summary: created 2 profiles; 0 skipped (they exist already); 3 not migrated." in out


def test_an_elastic_profile_refused_with_422_names_its_field(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    gocd.post(
        ELASTICS_URL,
        status=422,
        json={
            "message": "Your request could not be processed. No Cluster Profile exists with the specified "
            "cluster_profile_id 'k8s-prod-reuse'.",
            "data": {
                "id": "small-reuse",
                "cluster_profile_id": "k8s-prod-reuse",
                "properties": [],
                "errors": {
                    "cluster_profile_id": [
                        "No Cluster Profile exists with the specified cluster_profile_id 'k8s-prod-reuse'."
                    ]
                },
            },
        },
        match=[responses.matchers.json_params_matcher(EXPECTED_ELASTICS["small-reuse"])],
    )
    echo_posts(gocd)

    assert run(token_file) == 1

    out = capsys.readouterr().out
    assert (
        "elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': failed: GoCD " in out
    )
    assert "refused to create elastic agent profile 'small-reuse' (422)." in out
    assert "Field cluster_profile_id: No Cluster Profile exists with the specified cluster_profile_id" in out


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (
            403,
            "You are not authorized to perform this action.",
            "needs the personal access token of a system administrator",
        ),
        (503, "Server is in maintenance mode.", "GoCD is not taking requests at"),
    ],
)
def test_a_refusal_every_create_would_get_stops_the_migration_at_the_first(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    status: int,
    message: str,
    expected: str,
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    gocd.post(CLUSTERS_URL, status=status, json={"message": message})

    assert run(token_file) == 2

    assert len(posts(gocd)) == 1  # not repeated for every profile
    captured = capsys.readouterr()
    assert expected in captured.err and f"GoCD said: {message}" in captured.err
    assert "Stopped at the error above; nothing more was sent." in captured.out


def test_a_redirect_is_not_followed_and_says_where_it_leads(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, status=302, headers={"Location": "https://sso.example.com/login?session=s3cr3t"})

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert (
        f"error: GoCD answered GET {CLUSTERS_URL} with a redirect to https://sso.example.com/login: give the "
        "URL it redirects to as --server"
    ) in err
    assert "s3cr3t" not in err and len(gocd.calls) == 1


def test_a_create_that_gocd_answers_without_a_body_counts_as_created(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, cluster_list(), elastic_list())
    gocd.post(CLUSTERS_URL, status=200, body="")
    gocd.post(ELASTICS_URL, status=200, body="")

    assert run(token_file) == 0
    assert "Summary: created 5 profiles;" in capsys.readouterr().out


def test_no_answer_names_the_url_and_nothing_else(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, body=requests.ConnectionError("Failed to establish a new connection: [Errno 111]"))

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: could not reach GoCD at {CLUSTERS_URL}: the connection failed (refused, or the host is "
        "unknown) (is --server right, and is the server up?)"
    )


def test_an_answer_that_is_not_gocds_is_said_so(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, body="<html>a proxy's page</html>", content_type="text/html")

    assert run(token_file) == 2

    assert "is not JSON: is --server the GoCD server's URL, ending in /go" in capsys.readouterr().err


# --- options -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "suffix", "expected"),
    [
        ("https://admin:hunter2@gocd.example.com/go", "-reuse", "must not carry a user name or password"),
        ("gocd.example.com/go", "-reuse", "must be an http:// or https:// URL"),
        (SERVER, "", "--suffix must be letters, digits"),
        (SERVER, "/x", "--suffix must be letters, digits"),
    ],
)
def test_bad_options_are_one_line_and_nothing_is_asked(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    server: str,
    suffix: str,
    expected: str,
) -> None:
    code = main(
        ["migrate-profiles", "--server", server, "--token-file", str(token_file), f"--suffix={suffix}"]
    )

    assert code == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1
    assert "hunter2" not in err
    assert not gocd.calls


def test_an_empty_or_missing_token_file_is_one_line(
    gocd: responses.RequestsMock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    assert run(empty) == 2
    assert f"the token file {empty} is empty" in capsys.readouterr().err
    assert run(tmp_path / "missing") == 2
    assert "cannot read the token file" in capsys.readouterr().err
    assert not gocd.calls


# --- secrets -------------------------------------------------------------------------------------------


def test_no_secret_is_printed_or_logged(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The token and GoCD's encrypted values go only into requests; not into output or logs, also when
    GoCD echoes them back in an error answer."""
    caplog.set_level(logging.DEBUG)
    serve_lists(gocd, cluster_list(), elastic_list())
    echoed = {
        "message": "Validations failed.",
        "data": {**EXPECTED_CLUSTERS["k8s-staging-reuse"], "errors": {"id": ["taken"]}},
    }
    gocd.post(
        CLUSTERS_URL,
        status=422,
        json=echoed,
        match=[responses.matchers.json_params_matcher(EXPECTED_CLUSTERS["k8s-staging-reuse"])],
    )
    echo_posts(gocd)

    assert run(token_file, "--reuse") == 1
    assert run(token_file, "--dry-run") == 0

    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    assert "(secret kept)" in captured.out
    for secret in SECRETS:
        assert secret not in shown
    assert "Field id: taken." in captured.out


def test_a_plain_http_server_is_warned_about(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get("http://gocd.internal:8153/go/api/admin/elastic/cluster_profiles", status=401, json={})

    code = main(
        ["migrate-profiles", "--server", "http://gocd.internal:8153/go/", "--token-file", str(token_file)]
    )

    assert code == 2
    err = capsys.readouterr().err
    assert "warning: --server is http://, so the token travels unencrypted" in err
    assert "GoCD refused the token" in err and TOKEN not in err


# --- namespaces: what the old profile meant ------------------------------------------------------------

# The official plugin reads a blank namespace as the GoCD server pod's own; GoCD lists a blank one as the
# key alone, and a profile saved before the field existed has no key at all.
HOME_PROPERTIES = [
    {"key": "go_server_url", "value": "https://gocd.example.com/go"},
    {"key": "namespace"},
]
NO_KEY_PROPERTIES = [{"key": "go_server_url", "value": "https://gocd.example.com/go"}]


def blank_lists() -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        cluster_list(cluster("k8s-home", OLD, HOME_PROPERTIES), cluster("k8s-old", OLD, NO_KEY_PROPERTIES)),
        elastic_list(elastic("home-agent", "k8s-home", STAGING_AGENT_PROPERTIES)),
    )


def namespace_sent(gocd: responses.RequestsMock, id_: str) -> list[dict[str, str]]:
    body = next(body for _, body in posts(gocd) if body["id"] == id_)
    return [p for p in body["properties"] if p["key"] == "namespace"]


def test_a_blank_namespace_is_written_out_as_the_gocd_servers_given_with_server_namespace(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, *blank_lists())
    echo_posts(gocd)

    assert run(token_file, "--server-namespace", "gocd", "--dry-run") == 0
    out = capsys.readouterr().out
    for id_ in ("k8s-home", "k8s-old"):
        assert (
            f"cluster profile '{id_}' -> '{id_}-reuse': would be created.\n"
            "    settings: go_server_url, namespace\n"
            "    namespace: blank in the old profile, which the official plugin reads as the GoCD server's "
            "namespace: gocd (from --server-namespace); written out in the new profile\n"
        ) in out
    assert "    namespace: gocd-agents, as in the old profile\n" in out

    assert run(token_file, "--server-namespace", "gocd") == 0
    # Not blank (this plugin's `default`): the namespace the old profile's pods really ran in.
    assert namespace_sent(gocd, "k8s-home-reuse") == [{"key": "namespace", "value": "gocd"}]
    assert namespace_sent(gocd, "k8s-old-reuse") == [{"key": "namespace", "value": "gocd"}]
    home = next(body for _, body in posts(gocd) if body["id"] == "k8s-home-reuse")
    assert [p["key"] for p in home["properties"]] == ["go_server_url", "namespace"]  # in its place
    assert namespace_sent(gocd, "k8s-prod-reuse") == [{"key": "namespace", "value": "gocd-agents"}]


def test_a_blank_namespace_outside_a_pod_without_server_namespace_is_reported_not_created(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_lists(gocd, *blank_lists())
    echo_posts(gocd)

    assert run(token_file) == 1

    sent = [body["id"] for _, body in posts(gocd)]
    assert "k8s-home-reuse" not in sent and "k8s-old-reuse" not in sent and "home-agent-reuse" not in sent
    assert "k8s-prod-reuse" in sent and "k8s-staging-reuse" in sent  # the others go on
    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-home' -> 'k8s-home-reuse': not migrated: its namespace is blank, which the "
        "official plugin reads as the GoCD server's own namespace (this plugin would read it as 'default'), "
        "and that is not known here: this command is not running inside a pod (no "
    ) in out
    assert "give --server-namespace NS, the namespace the GoCD server runs in (or --namespace NS)." in out
    assert (
        "  elastic profile 'home-agent' -> 'home-agent-reuse' on cluster profile 'k8s-home-reuse': not "
        "migrated: its cluster profile 'k8s-home-reuse' was not migrated."
    ) in out
    assert "Summary: created 5 profiles; 0 skipped (they exist already); 3 not migrated." in out


def test_inside_a_pod_a_blank_namespace_is_the_pods_service_account_namespace(
    gocd: responses.RequestsMock,
    token_file: Path,
    not_in_a_pod: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    not_in_a_pod.parent.mkdir()
    not_in_a_pod.write_text("gocd-server-ns", encoding="utf-8")  # as Kubernetes writes it: no newline
    serve_lists(gocd, *blank_lists())
    echo_posts(gocd)

    assert run(token_file) == 0

    assert namespace_sent(gocd, "k8s-home-reuse") == [{"key": "namespace", "value": "gocd-server-ns"}]
    assert namespace_sent(gocd, "k8s-old-reuse") == [{"key": "namespace", "value": "gocd-server-ns"}]
    assert (
        "namespace: gocd-server-ns (from this pod's service account, " + str(not_in_a_pod) + ")"
    ) in capsys.readouterr().out


def test_a_namespace_the_official_plugin_also_uses_is_warned_about_and_namespace_moves_the_new_pods(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other_cluster = [
        {"key": "go_server_url", "value": "https://gocd.example.com/go"},
        {"key": "kubernetes_cluster_url", "value": "https://k8s.other.example.com:6443/"},
        {"key": "namespace", "value": "gocd-agents"},  # same name, another cluster: nothing shared
    ]
    clusters = cluster_list(cluster("k8s-home", OLD, HOME_PROPERTIES), cluster("k8s-far", OLD, other_cluster))
    serve_lists(gocd, clusters, elastic_list())
    echo_posts(gocd)

    # The blank one is the GoCD server's namespace, gocd-agents, so it shares with k8s-prod too.
    assert run(token_file, "--server-namespace", "gocd-agents", "--dry-run") == 0
    out = capsys.readouterr().out
    warning = (
        "    warning: namespace gocd-agents is also where the official plugin's cluster profiles "
        "'k8s-prod', 'k8s-home' put their pods: both plugins' pods share that namespace, its resource "
        "quotas and its RBAC (Roles, RoleBindings); give --namespace NS to put the new profiles' pods in "
        "another one.\n"
    )
    prod = out.split("cluster profile 'k8s-prod'")[1].split("  elastic profile")[0]
    assert warning in prod
    assert "namespace staging is also where the official plugin's cluster profile 'k8s-staging' puts" in out
    # A blank URL is the GoCD server's own cluster, which may be any; two URLs that differ are two clusters.
    far = out.split("cluster profile 'k8s-far'")[1]
    assert "cluster profiles 'k8s-home', 'k8s-far' put their pods" in far and "k8s-prod" not in far
    assert "Summary: would create 7 profiles; 0 skipped (they exist already); 0 not migrated." in out

    assert run(token_file, "--server-namespace", "gocd-agents", "--namespace", "reuse-agents") == 0
    out = capsys.readouterr().out
    assert "warning" not in out
    assert (
        "    namespace: reuse-agents (from --namespace); blank in the old profile, which the official plugin "
        "reads as the GoCD server's namespace: gocd-agents (from --server-namespace)\n"
    ) in out
    assert "    namespace: reuse-agents (from --namespace); gocd-agents in the old profile\n" in out
    for _, body in posts(gocd):
        if "plugin_id" in body:
            assert [p for p in body["properties"] if p["key"] == "namespace"] == [
                {"key": "namespace", "value": "reuse-agents"}
            ]


@pytest.mark.parametrize("option", ["--namespace", "--server-namespace"])
def test_a_namespace_option_that_is_no_namespace_name_is_one_line(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    assert run(token_file, option, "GoCD_Agents") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}: 'GoCD_Agents' is not a Kubernetes namespace name")
    assert len(err.strip().splitlines()) == 1 and not gocd.calls


# --- the token from standard input ---------------------------------------------------------------------


def test_token_file_dash_reads_the_token_from_standard_input(
    gocd: responses.RequestsMock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Piped in (from a Secret, say), the token is never written to a file that would have to be
    deleted afterwards."""
    caplog.set_level(logging.DEBUG)
    serve_lists(gocd, cluster_list(), elastic_list())
    monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n"))

    assert run(Path("-"), "--dry-run") == 0

    assert [call.request.headers["Authorization"] for call in gocd.calls] == [f"bearer {TOKEN}"] * 2
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err + caplog.text

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert run(Path("-")) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --token-file -: standard input holds no token (pipe it in, one line)"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("two words\n"))
    assert run(Path("-")) == 2
    assert "must hold the token alone, on one line" in capsys.readouterr().err
    assert len(gocd.calls) == 2
