"""`migrate-profiles` when GoCD refuses: each refusal as GoCD gives it (the double,
tests/support/doubles/gocd_rest/admin_api.py, for what its code can be made to show: an unknown token,
security off, a user who may not administer, maintenance mode, an id taken meanwhile), or as a `responses`
answer of its own registered before the double (a proxy's page, a refused connection, a redirect, a refusal
this command cannot foresee)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import responses

from elastic_agent.cli import main
from tests.support.doubles.gocd_rest.admin_api import route
from tests.support.doubles.gocd_rest.admin_model import (
    User,
    cluster_profile_json,
    message_json,
    validation_failed,
)
from tests.support.doubles.gocd_rest.sentences import NOT_FOUND
from tests.support.migrate_world import (
    CLUSTERS_URL,
    ELASTICS_URL,
    EXPECTED_CLUSTERS,
    PROD_PROPERTIES,
    SERVER,
    TOKEN,
    posts,
    run,
    server,
)

# --- GoCD's error answers ------------------------------------------------------------------------------


def test_a_refused_token_is_one_sentence_and_nothing_is_sent(
    gocd: responses.RequestsMock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token GoCD does not know: 401 from AccessTokenAuthenticationFilter."""
    route(gocd, server(), SERVER)
    revoked = tmp_path / "revoked"
    revoked.write_text("gocd-pat-revoked\n", encoding="utf-8")

    assert run(revoked) == 2

    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "error: GoCD refused the token: check --token-file (a personal access token of an admin). "
        "GoCD said: Invalid Personal Access Token."
    )
    assert len(gocd.calls) == 1 and "Traceback" not in captured.err


def test_a_token_sent_to_a_server_without_security_is_refused_with_gocds_reason(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With security off GoCD refuses any bearer token (AccessTokenAuthenticationFilter.
    filterWhenSecurityDisabled): the sentence it gives is passed on."""
    state = server()
    state.require_auth = False
    route(gocd, state, SERVER)

    assert run(token_file) == 2

    assert (
        "GoCD said: Bearer authentication credentials are not required, since security has been disabled on "
        "this server."
    ) in capsys.readouterr().err


def test_a_server_without_security_is_migrated_without_a_token(
    gocd: responses.RequestsMock, capsys: pytest.CaptureFixture[str]
) -> None:
    """Security off: no --token-file, no Authorization header, and GoCD answers every call."""
    state = server()
    state.require_auth = False
    route(gocd, state, SERVER)

    assert main(["migrate-profiles", "--server", SERVER]) == 0

    assert posts(gocd) and not any("Authorization" in call.request.headers for call in gocd.calls)
    assert "Traceback" not in capsys.readouterr().err


def test_a_proxys_passing_503_is_retried_and_the_migration_goes_on(
    gocd: responses.RequestsMock, token_file: Path
) -> None:
    """A read refused once by a proxy (the client retries reads with back-off, never a POST)."""
    gocd.get(CLUSTERS_URL, status=503, body="<html>503 Service Temporarily Unavailable</html>")
    route(gocd, server(), SERVER)

    assert run(token_file) == 0

    statuses = [call.response.status_code for call in gocd.calls if call.request.url == CLUSTERS_URL]
    assert statuses[:2] == [503, 200]
    assert posts(gocd)


def test_a_wrong_url_says_to_give_the_servers_url_ending_in_go(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, status=404, json=message_json(NOT_FOUND))

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert f"error: GoCD has no API at {CLUSTERS_URL} (404): is the URL the server's, ending in /go" in err


def test_a_422_names_the_profile_and_each_field_and_the_rest_goes_on(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refusal this command cannot foresee (GoCD's own validation, here a clash made meanwhile), in
    the shape handleCreateOrUpdateResponse gives it: the message and the entity with its errors."""
    refused = {
        **EXPECTED_CLUSTERS["k8s-prod-reuse"],
        "properties": [
            {
                **PROD_PROPERTIES[0],
                "errors": {"go_server_url": ["GoCD server URL must be reachable from the pods"]},
            },
            *PROD_PROPERTIES[1:],
        ],
        "errors": {"plugin_id": ["Plugin not installed."]},
    }
    message = validation_failed("clusterProfile", "k8s-prod-reuse", "Plugin not installed.")
    gocd.post(CLUSTERS_URL, status=422, json=message_json(message, cluster_profile_json(refused)))
    route(gocd, server(), SERVER)

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
        "Error(s): [Plugin not installed.]. Please correct and resubmit. Field plugin_id: Plugin not "
        "installed. Setting go_server_url: GoCD server URL must be reachable from the pods."
    ) in out
    assert (
        "  elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': not migrated: its "
        "cluster profile 'k8s-prod-reuse' was not migrated."
    ) in out
    assert "Summary: created 2 profiles; 0 skipped (they exist already); 3 not migrated." in out


def test_an_elastic_profile_whose_cluster_profile_is_gone_is_refused_with_gocds_sentence(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster profile deleted between the two POSTs: ElasticProfileControllerV2.create halts with
    422 and the sentence alone (haltIfSpecifiedClusterProfileDoesntExists, haltBecauseOfReason: no
    `data`). The first elastic POST gets it; the double answers the others."""
    gone = "No Cluster Profile exists with the specified cluster_profile_id 'k8s-prod-reuse'."
    gocd.post(ELASTICS_URL, status=422, json=message_json(gone))
    route(gocd, server(), SERVER)

    assert run(token_file) == 1

    out = capsys.readouterr().out
    assert (
        "elastic profile 'small' -> 'small-reuse' on cluster profile 'k8s-prod-reuse': failed: GoCD refused "
        f"to create elastic agent profile 'small-reuse' (422). GoCD said: {gone}\n"
    ) in out
    assert "Summary: created 4 profiles; 0 skipped (they exist already); 1 not migrated." in out


@pytest.mark.parametrize(
    ("state", "expected", "said"),
    [
        (
            "developer",
            "needs the personal access token of a system administrator",
            "User 'developer' does not have permissions to administer 'k8s-prod-reuse' cluster_profile(s).",
        ),
        ("maintenance", "GoCD is not taking requests at", "Server is in maintenance mode, please try later."),
    ],
)
def test_a_refusal_every_create_would_get_stops_the_migration_at_the_first(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    state: str,
    expected: str,
    said: str,
) -> None:
    """A user whose role lets them see every profile but not administer them (checkUserHasPermissions,
    403), and a server in maintenance mode (ModeAwareFilter, 503): the first POST's answer ends it."""
    gocd_state = server()
    if state == "developer":
        gocd_state.tokens = {TOKEN: User("developer", views=frozenset({"*"}))}
    else:
        gocd_state.maintenance = True
    route(gocd, gocd_state, SERVER)

    assert run(token_file) == 2

    assert len(posts(gocd)) == 1  # not repeated for every profile
    captured = capsys.readouterr()
    assert expected in captured.err and f"GoCD said: {said}" in captured.err
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


def test_no_answer_names_the_url_and_nothing_else(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, body=requests.ConnectionError("Failed to establish a new connection: [Errno 111]"))

    assert run(token_file) == 2

    assert capsys.readouterr().err.strip() == (
        f"error: could not reach GoCD at {CLUSTERS_URL}: the connection failed (refused, or the host is "
        "unknown) (is --server right, and is the server up?)"
    )


def test_an_answer_that_is_not_gocds_is_said_so(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gocd.get(CLUSTERS_URL, body="<html>a proxy's page</html>", content_type="text/html")

    assert run(token_file) == 2

    assert "is not JSON: is --server the GoCD server's URL, ending in /go" in capsys.readouterr().err
