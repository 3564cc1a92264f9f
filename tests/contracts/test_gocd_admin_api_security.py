"""The admin API double's security (tests/support/doubles/gocd_rest/admin_api.py) answers as GoCD's filters do
(server/.../newsecurity: AuthenticationFilterChain, AccessTokenAuthenticationFilter, AuthorizeFilterChain,
VerifyAuthorityFilter), since the preconfigure's tests rely on it: health and version stay anonymous,
the admin API refuses an anonymous caller with 401 and a Basic challenge, a token GoCD does not know is
refused on every API path, and any token is refused while security is off."""

from __future__ import annotations

import json

import pytest
from werkzeug.test import TestResponse

from tests.support.doubles.gocd_rest.admin_api import PLUGIN_ID, AdminState, app
from tests.support.doubles.gocd_rest.admin_model import ADMIN

TOKEN = "a1" * 20
PLUGIN_INFO = f"/go/api/admin/plugin_info/{PLUGIN_ID}"


def get(state: AdminState, path: str, token: str | None = None, accept: str = "application/vnd.go.cd+json"
        ) -> TestResponse:  # fmt: skip
    headers = {"Accept": accept, **({"Authorization": f"Bearer {token}"} if token else {})}
    return app(state).test_client().get(path, headers=headers)


@pytest.mark.parametrize("path", ["/go/api/v1/health", "/go/api/version"])
def test_health_and_version_stay_anonymous_with_security_on(path: str) -> None:
    assert get(AdminState(require_auth=True), path).status_code == 200


def test_an_anonymous_admin_call_gets_401_with_gocds_message_and_a_basic_challenge() -> None:
    answer = get(AdminState(require_auth=True), PLUGIN_INFO)
    assert answer.status_code == 401
    assert answer.get_data(as_text=True) == '{\n  "message": "You are not authenticated!"\n}', "Gson, pretty"
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="GoCD"'
    assert answer.mimetype == "application/json", "vnd.go.cd+json without a version is not in GoCD's map"
    versioned = get(AdminState(require_auth=True), PLUGIN_INFO, accept="application/vnd.go.cd.v7+json")
    assert versioned.mimetype == "application/vnd.go.cd.v7+json"


def test_an_admin_token_opens_the_admin_api_with_security_on() -> None:
    answer = get(AdminState(require_auth=True, tokens={TOKEN: ADMIN}), PLUGIN_INFO, TOKEN)
    assert answer.status_code == 200 and json.loads(answer.get_data())["id"] == PLUGIN_ID


@pytest.mark.parametrize("security_enabled", [True, False])
@pytest.mark.parametrize("path", [PLUGIN_INFO, "/go/api/v1/health"])
def test_a_token_gocd_does_not_know_is_refused_everywhere_security_on_or_off(
    path: str, security_enabled: bool
) -> None:
    answer = get(AdminState(require_auth=security_enabled, tokens={TOKEN: ADMIN}), path, "b2" * 20)
    assert answer.status_code == 401 and "WWW-Authenticate" not in answer.headers
    assert json.loads(answer.get_data()) == {"message": "Invalid Personal Access Token."}


def test_with_security_off_any_token_is_refused_and_anonymous_calls_pass() -> None:
    state = AdminState(tokens={TOKEN: ADMIN})
    answer = get(state, PLUGIN_INFO, TOKEN)
    assert answer.status_code == 401
    assert json.loads(answer.get_data())["message"] == (
        "Bearer authentication credentials are not required, since security has been disabled on this server."
    )
    assert get(state, PLUGIN_INFO).status_code == 200
