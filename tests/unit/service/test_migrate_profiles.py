"""`migrate-profiles` on the happy path, against GoCD's admin API as gocd/gocd has it (the double,
tests/support/doubles/gocd_rest/admin_api.py, through `responses`; tests/support/migrate_world.py): what it
reads, exactly what it sends, what it prints, its options, and that no secret (the token, GoCD's encrypted
values) is ever printed or logged."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import requests
import responses

from elastic_agent.cli import main
from tests.support.doubles.gocd_rest.admin_api import answering, route
from tests.support.doubles.gocd_rest.admin_model import (
    PLUGIN_ID,
)
from tests.support.migrate_world import (
    ACCEPT,
    CLUSTERS_URL,
    ELASTICS_URL,
    EXPECTED_CLUSTERS,
    EXPECTED_ELASTICS,
    NEW,
    OLD,
    PROD_PROPERTIES,
    PROD_TOKEN,
    SECRETS,
    SERVER,
    SMALL_PROPERTIES,
    STAGING_PROPERTIES,
    TOKEN,
    asked,
    cluster,
    elastic,
    posts,
    run,
    server,
)


def test_creates_a_copy_of_each_profile_with_exactly_the_same_settings(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = server()
    route(gocd, state, SERVER)

    assert run(token_file) == 0

    # Each cluster profile, then its elastic profiles; the other plugin's profiles are not touched.
    assert posts(gocd) == [
        (CLUSTERS_URL, EXPECTED_CLUSTERS["k8s-prod-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["small-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["yaml-pod-reuse"]),
        (CLUSTERS_URL, EXPECTED_CLUSTERS["k8s-staging-reuse"]),
        (ELASTICS_URL, EXPECTED_ELASTICS["staging-agent-reuse"]),
    ]
    # Secrets went back as GoCD's cipher text, never as a value, and GoCD kept them so.
    prod_token = next(p for p in posts(gocd)[0][1]["properties"] if p["key"] == "security_token")
    assert prod_token == {"key": "security_token", "encrypted_value": PROD_TOKEN}
    assert state.cluster_profiles["k8s-prod-reuse"]["properties"] == PROD_PROPERTIES
    assert state.elastic_profiles["staging-agent-reuse"]["cluster_profile_id"] == "k8s-staging-reuse"
    # Only GET and POST: the old profiles are never changed; this plugin's info is read before any POST.
    assert {call.request.method for call in gocd.calls} == {"GET", "POST"}
    assert asked(gocd)[:3] == [
        "GET /api/admin/elastic/cluster_profiles",
        "GET /api/elastic/profiles",
        f"GET /api/admin/plugin_info/{PLUGIN_ID}",
    ]

    for call in gocd.calls:
        headers = call.request.headers
        path = str(call.request.url)[len(SERVER) :]
        assert headers["Authorization"] == f"bearer {TOKEN}"
        assert headers["Accept"] == next(
            accept for prefix, accept in ACCEPT.items() if path.startswith(prefix)
        )
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
    route(gocd, server(), SERVER)

    assert run(token_file, "--dry-run") == 0

    assert asked(gocd) == [
        "GET /api/admin/elastic/cluster_profiles",
        "GET /api/elastic/profiles",
        f"GET /api/admin/plugin_info/{PLUGIN_ID}",
    ]
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
    route(gocd, server(), SERVER)

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
    route(gocd, server(done_cluster, elastics=(done_elastic,)), SERVER)

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
    route(gocd, server(taken), SERVER)

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
        [*STAGING_PROPERTIES, {"key": "legacy_setting", "value": "x"}],  # not this plugin's
    )
    bad_elastic = elastic("huge", "k8s-prod", [*SMALL_PROPERTIES[:1], {"key": "MaxMemory", "value": "lots"}])
    route(gocd, server(odd_cluster, elastics=(bad_elastic,)), SERVER)

    assert run(token_file) == 1

    sent = {body["id"]: body for _, body in posts(gocd)}
    assert "huge-reuse" not in sent  # GoCD would refuse it
    assert sent["k8s-odd-reuse"]["properties"] == STAGING_PROPERTIES  # the unknown key is left out
    out = capsys.readouterr().out
    assert "    left out: setting legacy_setting is not one of this plugin's, so it is left out." in out
    assert "elastic profile 'huge' -> 'huge-reuse' on cluster profile 'k8s-prod-reuse': not migrated: " in out
    assert "setting MaxMemory: " in out
    assert "Summary: created 6 profiles; 0 skipped (they exist already); 1 not migrated." in out


# --- options -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "suffix", "expected"),
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
    url: str,
    suffix: str,
    expected: str,
) -> None:
    code = main(["migrate-profiles", "--server", url, "--token-file", str(token_file), f"--suffix={suffix}"])

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
    GoCD echoes them back in an error answer: here another tool creates `k8s-prod-reuse` between this
    command's list and its POST, and GoCD answers 422 with the posted entity, cipher text and all, as
    `data` (ClusterProfilesControllerV1.haltIfEntityWithSameIdExists). The profile made meanwhile is
    another plugin's, so the clash is reported, not skipped."""
    caplog.set_level(logging.DEBUG)
    state = server()
    forward = answering(state, SERVER)

    def made_meanwhile(request: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        taken = cluster("k8s-prod-reuse", "cd.go.contrib.elastic-agent.docker", PROD_PROPERTIES)
        state.cluster_profiles.setdefault("k8s-prod-reuse", taken)
        return forward(request)

    gocd.add_callback(responses.POST, CLUSTERS_URL, callback=made_meanwhile, content_type=None)
    route(gocd, state, SERVER)

    assert run(token_file, "--reuse") == 1
    assert run(token_file, "--dry-run") == 1  # the listing now shows the clash: nothing is sent

    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    assert "(secret kept)" in captured.out
    assert (
        "cluster profile 'k8s-prod-reuse' of another plugin (cd.go.contrib.elastic-agent.docker) was created "
        "meanwhile (GoCD says it exists already)"
    ) in captured.out
    for secret in SECRETS:
        assert secret not in shown
    assert PROD_TOKEN in json.dumps(posts(gocd))  # it was sent, as cipher text


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
    route(gocd, server(), SERVER)
    monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n"))

    assert run(Path("-"), "--dry-run") == 0

    assert [call.request.headers["Authorization"] for call in gocd.calls] == [f"bearer {TOKEN}"] * 3
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
    assert len(gocd.calls) == 3


def test_a_plain_http_server_is_warned_about(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route(gocd, server(), "http://gocd.internal:8153/go")
    revoked = token_file.parent / "revoked"
    revoked.write_text("gocd-pat-revoked\n", encoding="utf-8")

    code = main(
        ["migrate-profiles", "--server", "http://gocd.internal:8153/go/", "--token-file", str(revoked)]
    )

    assert code == 2
    err = capsys.readouterr().err
    assert "warning: --server is http://, so the token travels unencrypted" in err
    assert "GoCD refused the token" in err and "gocd-pat-revoked" not in err
