"""`migrate-profiles` against what changes or differs under it: a profile someone else creates between
the listing and the create (GoCD's 422 "already exists"), and a GoCD too old for the plugin info API
version it asks, whose 404 is no word about the plugin. Each as GoCD answers it (the double,
tests/support/doubles/gocd_rest/admin_api.py, whose sources tests/support/doubles/gocd_rest/admin_model.py
names)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import responses

from tests.support.doubles.gocd_rest.admin_api import answering, route
from tests.support.doubles.gocd_rest.admin_model import AdminState
from tests.support.migrate_world import (
    CLUSTERS_URL,
    ELASTICS_URL,
    EXPECTED_CLUSTERS,
    EXPECTED_ELASTICS,
    NEW,
    SERVER,
    posts,
    run,
    server,
)


def someone_else_creates_first(
    gocd: responses.RequestsMock, state: AdminState, url: str, store: dict[str, dict], entity: dict
) -> None:
    """The first POST to `url` finds `entity` created a moment before by another admin, then meets the
    double's create controller (haltIfEntityWithSameIdExists)."""
    answer = answering(state, SERVER)

    def meanwhile(request: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        store[entity["id"]] = entity
        return answer(request)

    gocd.add_callback(responses.POST, url, callback=meanwhile, content_type=None)


def test_a_cluster_profile_created_meanwhile_for_this_plugin_is_skipped_and_its_elastic_profiles_go_on(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = server()
    someone_else_creates_first(
        gocd, state, CLUSTERS_URL, state.cluster_profiles, EXPECTED_CLUSTERS["k8s-prod-reuse"]
    )
    route(gocd, state, SERVER)

    assert run(token_file) == 0

    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-prod' -> 'k8s-prod-reuse': created by someone else meanwhile (GoCD says it "
        "exists already), skipped.\n"
    ) in out
    assert "failed" not in out
    assert "Summary: created 4 profiles; 1 skipped (they exist already); 0 not migrated." in out
    assert set(state.elastic_profiles) >= {"small-reuse", "yaml-pod-reuse", "staging-agent-reuse"}


@pytest.mark.parametrize(
    ("owner", "status", "expected"),
    [
        ("k8s-prod-reuse", 0, "created by someone else meanwhile (GoCD says it exists already), skipped."),
        (
            "docker",
            1,
            "not migrated: elastic profile 'small-reuse' of another plugin "
            "(cd.go.contrib.elastic-agent.docker) was created meanwhile (GoCD says it exists already): "
            "choose another --suffix.",
        ),
    ],
    ids=["this-plugins", "another-plugins"],
)
def test_an_elastic_profile_created_meanwhile_is_skipped_when_it_is_this_plugins_and_not_migrated_else(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    owner: str,
    status: int,
    expected: str,
) -> None:
    state = server()
    taken = {**EXPECTED_ELASTICS["small-reuse"], "cluster_profile_id": owner}
    someone_else_creates_first(gocd, state, ELASTICS_URL, state.elastic_profiles, taken)
    route(gocd, state, SERVER)

    assert run(token_file) == status

    out = capsys.readouterr().out
    assert (
        f"  elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': {expected}\n"
    ) in out
    assert "failed" not in out
    assert [body["id"] for _, body in posts(gocd)].count("small-reuse") == 1  # a create is never repeated


def test_a_gocd_without_the_plugin_info_api_version_is_told_so_not_that_the_plugin_is_missing(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GoCD 20.3 serves plugin info v6 only: v7 reaches Rails' catch-all, a 404 that says nothing about
    the plugin. GoCD 26.1 without the plugin answers 404 with its JSON message: not installed."""
    route(gocd, server(plugin_info_versions=frozenset({6}), version="20.3.0"), SERVER)

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: GoCD at {SERVER} does not have version 7 of the plugin info API (GET "
        f"/api/admin/plugin_info/{NEW} answered 404 without GoCD's JSON, as a GoCD older than 20.4.0 or a "
        "proxy in front of it does), so whether this plugin is installed cannot be checked; nothing is "
        "known to be wrong with the plugin. This command needs GoCD 20.4.0 or later: upgrade GoCD (or let "
        "the proxy pass /api/admin/plugin_info/), then run this again. Nothing was sent."
    )
    assert "not installed" not in err and not posts(gocd)

    gocd.reset()
    state = server()
    del state.plugins[NEW]
    route(gocd, state, SERVER)

    assert run(token_file) == 2
    assert "is not installed on GoCD" in capsys.readouterr().err
