"""`migrate-profiles` off the happy path, before anything is planned: a token that sees no profile, this
plugin not installed or not loaded, and settings GoCD keeps encrypted that this plugin keeps plain; each
as GoCD answers it (the double, tests/support/doubles/gocd_rest/admin_api.py, whose sources
tests/support/doubles/gocd_rest/admin_model.py names)."""

from __future__ import annotations

from pathlib import Path

import pytest
import responses

from elastic_agent.gocd.rest_api import RETRIES
from tests.support.doubles.gocd_rest.admin_api import route
from tests.support.doubles.gocd_rest.admin_model import (
    PLUGIN_ID,
    Plugin,
    User,
    encrypt,
    message_json,
)
from tests.support.migrate_world import (
    NEW,
    OLD,
    PROD_PROPERTIES,
    SERVER,
    SITE_URLS_URL,
    TOKEN,
    asked,
    cluster,
    elastic,
    posts,
    run,
    server,
)

# --- encrypted values of settings this plugin keeps in plain text -------------------------------------


def test_an_encrypted_setting_this_plugin_keeps_plain_is_reported_as_gocd_would_treat_it(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GoCD refuses a cluster profile with `encrypted_value` for a key the plugin does not declare
    secure (422, ConfigurationPropertyBuilder.create), and saves such a setting of an elastic profile
    blank (ElasticProfile.encryptSecureConfigurations): neither is sent (the double does both:
    tests/contracts/test_gocd_admin_contract.py)."""
    hidden_namespace = cluster(
        "k8s-hidden", OLD, [*PROD_PROPERTIES[:2], {"key": "namespace", "encrypted_value": encrypt("ns")}]
    )
    hidden_image = elastic("hidden", "k8s-prod", [{"key": "Image", "encrypted_value": encrypt("alpine")}])
    route(gocd, server(hidden_namespace, elastics=(hidden_image,)), SERVER)

    assert run(token_file) == 1

    sent = {body["id"] for _, body in posts(gocd)}
    assert "k8s-hidden-reuse" not in sent and "hidden-reuse" not in sent
    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-hidden' -> 'k8s-hidden-reuse': not migrated: setting namespace is encrypted "
        "in GoCD, but this plugin keeps it in plain text (it is not secure), and GoCD refuses an encrypted "
        'value for such a setting of a cluster profile (422: "encrypted_value cannot be specified to a '
        'unsecured property."): copy this profile by hand.'
    ) in out
    assert (
        "elastic profile 'hidden' -> 'hidden-reuse' on cluster profile 'k8s-prod-reuse': not migrated: "
        "setting Image is encrypted in GoCD, but this plugin keeps it in plain text (it is not secure), and "
        "GoCD would save such a setting of an elastic profile blank, dropping its encrypted value: copy this "
        "profile by hand;"
    ) in out


# --- what GoCD shows the token, and whether this plugin is there ----------------------------------------


def test_a_token_that_sees_no_profile_is_told_that_an_administrators_token_is_needed(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GoCD lists a user who is not an administrator only what a role grants: here nothing, with 200
    (ClusterProfilesControllerV1.index); site_urls, for administrators only, tells why."""
    state = server()
    state.tokens = {TOKEN: User("developer")}
    route(gocd, state, SERVER)

    assert run(token_file, "--dry-run") == 2

    assert asked(gocd) == [
        "GET /api/admin/elastic/cluster_profiles",
        "GET /api/elastic/profiles",
        "GET /api/admin/config/server/site_urls",
    ]
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"error: GoCD at {SERVER} lists no cluster profile to this token. GoCD lists to each user only the "
        "profiles that user may see (none at all to a user who is not an administrator and has no role that "
        "grants it), and this token's user is not a system administrator: GoCD refused it "
        "/api/admin/config/server/site_urls, which only administrators may read. To migrate, give the "
        "personal access token of a system administrator."
    )


def test_an_administrator_on_a_server_without_profiles_is_told_there_is_nothing_to_migrate(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = server()
    state.cluster_profiles.clear()
    state.elastic_profiles.clear()
    route(gocd, state, SERVER)

    assert run(token_file) == 0

    assert capsys.readouterr().out.strip() == (
        f"GoCD at {SERVER} has no cluster profiles at all (the token is a system administrator's, to whom "
        "GoCD lists every profile): nothing to migrate."
    )
    assert not posts(gocd)


def test_when_it_cannot_be_told_whether_the_token_is_an_administrators_an_empty_list_is_still_an_error(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(RETRIES + 1):  # a lasting failure: the client retries a failed read RETRIES times
        gocd.get(SITE_URLS_URL, status=500, json=message_json("An error occurred."))
    state = server()
    state.tokens = {TOKEN: User("developer")}
    route(gocd, state, SERVER)

    assert run(token_file) == 2

    err = capsys.readouterr().err
    assert "lists no cluster profile to this token" in err
    assert (
        "whether this token's user is a system administrator could not be checked (GoCD failed on GET" in err
    )
    assert "If GoCD has profiles of the official plugin, give the personal access token of a system" in err


def test_a_server_with_profiles_of_other_plugins_only_has_nothing_to_migrate(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = server()
    for id_ in ("k8s-prod", "k8s-staging"):
        del state.cluster_profiles[id_]
    route(gocd, state, SERVER)

    assert run(token_file) == 0
    assert "has no cluster profiles of the official plugin" in capsys.readouterr().out
    assert not posts(gocd)


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (
            None,
            f"error: this plugin ({PLUGIN_ID}) is not installed on GoCD at {SERVER}: GoCD has no plugin of "
            f'that id, and would refuse every new profile ("Plugin with id `{PLUGIN_ID}` is not found."). '
            "Install its jar first (docs/install.md, step 4), then run this again. Nothing was sent.",
        ),
        (
            Plugin(
                "invalid", ("Plugin with ID (x) is not valid: Incompatible with current operating system.",)
            ),
            f"error: GoCD has this plugin ({PLUGIN_ID}) but has not loaded it: its state is invalid: GoCD "
            "said: Plugin with ID (x) is not valid: Incompatible with current operating system. GoCD would "
            "refuse every new profile of it: fix the jar (the GoCD server's log says more) and restart GoCD, "
            "then run this again. Nothing was sent.",
        ),
    ],
    ids=["absent", "invalid"],
)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_without_this_plugin_loaded_nothing_is_promised_nor_sent(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    plugin: Plugin | None,
    expected: str,
    dry_run: bool,
) -> None:
    """PluginInfosControllerV7.show: 404 for a plugin GoCD does not have, `status.state` invalid for a jar
    it could not load; GoCD would refuse every profile of it."""
    state = server()
    del state.plugins[NEW]
    if plugin is not None:
        state.plugins[NEW] = plugin
    route(gocd, state, SERVER)

    assert run(token_file, *(["--dry-run"] if dry_run else [])) == 2

    captured = capsys.readouterr()
    assert captured.err.strip() == expected
    assert "would be created" not in captured.out and not posts(gocd)
