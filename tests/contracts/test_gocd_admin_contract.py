"""The GoCD admin API double (tests/support/doubles/gocd_rest/admin_api.py,
tests/support/doubles/gocd_rest/admin_model.py) held against gocd/gocd: one test per endpoint this project
calls for profiles, each comparing the double's answers with the fields the real representer writes, listed
here from the source (gocd/gocd at the commit tests/support/doubles/gocd_rest/admin_model.py names; the file
named in each test). A field the double added, dropped or typed differently would make migrate-profiles' tests
pass against a server that does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support.doubles.gocd_rest.admin_api import app
from tests.support.doubles.gocd_rest.admin_model import (
    ADMIN,
    OFFICIAL_PLUGIN_ID,
    PLUGIN_ID,
    UNSECURED_ENCRYPTED,
    AdminState,
    Plugin,
    User,
    encrypt,
)
from tests.support.doubles.gocd_rest.sentences import NOT_AUTHORIZED_RESOURCE, NOT_FOUND, WRONG_URL

ADMIN_TOKEN, USER_TOKEN = "admin-token", "user-token"
V1, V2, V6, V7 = (f"application/vnd.go.cd.v{n}+json" for n in (1, 2, 6, 7))
CLUSTERS, ELASTICS = "/go/api/admin/elastic/cluster_profiles", "/go/api/elastic/profiles"

# ConfigurationPropertyRepresenter.toJSON (api/api-base/.../ConfigurationPropertyRepresenter.java)
PROPERTY_ALWAYS = {"key"}
PROPERTY_SOMETIMES = {"value", "encrypted_value", "errors"}
# MessageJson.create (api/api-base/.../util/MessageJson.java)
MESSAGE = {"message"}
MESSAGE_WITH_ENTITY = {"message", "data"}


@pytest.fixture
def state() -> AdminState:
    gocd = AdminState(
        require_auth=True,
        tokens={ADMIN_TOKEN: ADMIN, USER_TOKEN: User("developer")},
        plugins={PLUGIN_ID: "active", OFFICIAL_PLUGIN_ID: "active"},
        secure_site_url="https://gocd.example.com/go",
    )
    gocd.cluster_profiles["k8s"] = {
        "id": "k8s",
        "plugin_id": OFFICIAL_PLUGIN_ID,
        "properties": [
            {"key": "go_server_url", "value": "https://gocd.example.com/go"},
            {"key": "namespace"},
            {"key": "security_token", "encrypted_value": encrypt("t0ken")},
        ],
    }
    gocd.elastic_profiles["small"] = {
        "id": "small",
        "cluster_profile_id": "k8s",
        "properties": [{"key": "Image", "value": "gocd/gocd-agent-wolfi:v25.4.0"}, {"key": "MaxMemory"}],
    }
    return gocd


@pytest.fixture
def client(state: AdminState) -> FlaskClient:
    return app(state).test_client()


def call(client: FlaskClient, method: str, path: str, accept: str, token: str = ADMIN_TOKEN,
         body: dict[str, Any] | None = None) -> tuple[int, Any]:  # fmt: skip
    headers = {"Accept": accept, "Authorization": f"bearer {token}"}
    reply = client.open(path, method=method, headers=headers, json=body)
    return reply.status_code, reply.get_json(silent=True)


def links(answer: dict[str, Any], names: set[str]) -> None:
    assert set(answer["_links"]) == names
    assert all(set(link) == {"href"} and isinstance(link["href"], str) for link in answer["_links"].values())


def properties(entity: dict[str, Any]) -> None:
    assert isinstance(entity["properties"], list)
    for entry in entity["properties"]:
        assert PROPERTY_ALWAYS <= set(entry) <= PROPERTY_ALWAYS | PROPERTY_SOMETIMES
        assert not ({"value", "encrypted_value"} <= set(entry)), "never both"
        assert all(isinstance(entry[k], str) and entry[k] for k in {"value", "encrypted_value"} & set(entry))


def test_cluster_profiles_get_has_clusterprofilesrepresenters_fields_and_filters_by_permission(
    client: FlaskClient,
) -> None:
    """api/api-cluster-profiles-v1/.../representers/ClusterProfilesRepresenter.java and
    ClusterProfileRepresenter.java; ClusterProfilesControllerV1.index: a user without permission gets
    200 and an empty list, not a refusal."""
    status, answer = call(client, "GET", CLUSTERS, V1)
    assert status == 200
    assert set(answer) == {"_links", "_embedded"}
    links(answer, {"self", "doc"})
    assert set(answer["_embedded"]) == {"cluster_profiles"}
    [profile] = answer["_embedded"]["cluster_profiles"]
    assert set(profile) == {"_links", "id", "plugin_id", "properties"}  # "errors" only with errors
    links(profile, {"self", "doc", "find"})
    assert isinstance(profile["id"], str) and isinstance(profile["plugin_id"], str)
    properties(profile)
    assert profile["properties"][1] == {"key": "namespace"}  # blank: the key alone
    assert set(profile["properties"][2]) == {"key", "encrypted_value"}  # secure: cipher text only

    assert call(client, "GET", CLUSTERS, V1, USER_TOKEN) == (
        200,
        {**answer, "_embedded": {"cluster_profiles": []}},
    )


def test_cluster_profiles_post_answers_the_entity_or_422_with_gocds_messages(
    client: FlaskClient, state: AdminState
) -> None:
    """ClusterProfilesControllerV1.create (api/api-cluster-profiles-v1/.../ClusterProfilesControllerV1.java),
    CrudController.handleCreateOrUpdateResponse, HaltApiMessages.entityAlreadyExistsMessage,
    ConfigurationPropertyBuilder.create (config/config-api/.../builder/ConfigurationPropertyBuilder.java)."""
    posted = {"id": "new", "plugin_id": PLUGIN_ID, "properties": [
        {"key": "go_server_url"}, {"key": "security_token", "value": "plain"}]}  # fmt: skip
    status, answer = call(client, "POST", CLUSTERS, V1, body=posted)
    assert status == 200 and set(answer) == {"_links", "id", "plugin_id", "properties"}
    properties(answer)
    stored = state.cluster_profiles["new"]["properties"]
    assert stored[1]["key"] == "security_token" and set(stored[1]) == {"key", "encrypted_value"}  # encrypted

    status, answer = call(client, "POST", CLUSTERS, V1, body=posted)
    assert status == 422 and set(answer) == MESSAGE_WITH_ENTITY
    assert (
        answer["message"]
        == "Failed to add Cluster Profile 'new'. Another Cluster Profile with the same name already exists."
    )
    assert set(answer["data"]) == {"_links", "id", "plugin_id", "properties", "errors"}

    hidden = {"id": "hidden", "plugin_id": PLUGIN_ID, "properties": [
        {"key": "go_server_url", "value": "https://gocd.example.com/go"},
        {"key": "namespace", "encrypted_value": encrypt("agents")}]}  # fmt: skip
    status, answer = call(client, "POST", CLUSTERS, V1, body=hidden)
    assert status == 422 and set(answer) == MESSAGE_WITH_ENTITY
    assert answer["message"].startswith("Validations failed for clusterProfile 'hidden'. Error(s): [")
    assert answer["data"]["properties"][1]["errors"] == {"encrypted_value": [UNSECURED_ENCRYPTED]}
    assert "hidden" not in state.cluster_profiles

    elsewhere = {"id": "elsewhere", "plugin_id": "not.loaded", "properties": []}
    status, answer = call(client, "POST", CLUSTERS, V1, body=elsewhere)
    assert status == 422 and answer["data"]["errors"] == {
        "plugin_id": ["Plugin with id `not.loaded` is not found."]
    }

    status, answer = call(client, "POST", CLUSTERS, V1, USER_TOKEN, body={**posted, "id": "mine"})
    assert status == 403 and answer == {
        "message": "User 'developer' does not have permissions to administer 'mine' cluster_profile(s)."
    }


def test_elastic_profiles_get_has_elasticprofilesrepresenters_fields_and_filters_by_permission(
    client: FlaskClient,
) -> None:
    """api/api-elastic-profile-v2/.../representers/ElasticProfilesRepresenter.java (its `_links` has
    `find` too) and ElasticProfileRepresenter.java: no plugin id, the cluster profile's instead;
    ElasticProfileControllerV2.index filters by permission."""
    status, answer = call(client, "GET", ELASTICS, V2)
    assert status == 200
    assert set(answer) == {"_links", "_embedded"}
    links(answer, {"self", "doc", "find"})
    assert set(answer["_embedded"]) == {"profiles"}
    [profile] = answer["_embedded"]["profiles"]
    assert set(profile) == {"_links", "id", "cluster_profile_id", "properties"}
    links(profile, {"self", "doc", "find"})
    properties(profile)
    assert call(client, "GET", ELASTICS, V2, USER_TOKEN)[1]["_embedded"] == {"profiles": []}


def test_elastic_profiles_post_keeps_settings_as_gocd_does_and_refuses_a_missing_cluster_profile(
    client: FlaskClient, state: AdminState
) -> None:
    """ElasticProfileControllerV2.create (api/api-elastic-profile-v2/.../ElasticProfileControllerV2.java):
    haltIfSpecifiedClusterProfileDoesntExists answers the sentence alone; ElasticProfile.
    encryptSecureConfigurations (config/config-api/.../elastic/ElasticProfile.java) drops an encrypted
    value of a key the plugin does not declare secure: 200, saved blank."""
    state.cluster_profiles["mine"] = {"id": "mine", "plugin_id": PLUGIN_ID, "properties": []}
    posted = {"id": "hidden", "cluster_profile_id": "mine", "properties": [
        {"key": "PodSpecType", "value": "properties"}, {"key": "Image", "value": "alpine:3"},
        {"key": "Environment", "encrypted_value": encrypt("A=1")}]}  # fmt: skip
    status, answer = call(client, "POST", ELASTICS, V2, body=posted)
    assert status == 200 and set(answer) == {"_links", "id", "cluster_profile_id", "properties"}
    assert state.elastic_profiles["hidden"]["properties"][2] == {"key": "Environment"}

    status, answer = call(
        client, "POST", ELASTICS, V2, body={**posted, "id": "lost", "cluster_profile_id": "gone"}
    )
    assert status == 422 and answer == {
        "message": "No Cluster Profile exists with the specified cluster_profile_id 'gone'."
    }

    status, answer = call(client, "POST", ELASTICS, V2, body=posted)
    assert status == 422 and set(answer) == MESSAGE_WITH_ENTITY
    assert (
        answer["message"]
        == "Failed to add elasticProfile 'hidden'. Another elasticProfile with the same name already exists."
    )


def test_plugin_info_get_has_plugininforepresenters_fields_and_404_for_a_plugin_gocd_lacks(
    client: FlaskClient, state: AdminState
) -> None:
    """api/api-plugin-infos-v7/.../representers/PluginInfoRepresenter.java with
    extensions/ElasticAgentExtensionRepresenter.java and PluggableInstanceSettingsRepresenter.java;
    PluginInfosControllerV7.show: RecordNotFoundException (404, notFoundMessage), BadPluginInfo for an
    invalid jar (status.messages, no extensions); any signed-in user may read it."""
    status, answer = call(client, "GET", f"/go/api/admin/plugin_info/{PLUGIN_ID}", V7, USER_TOKEN)
    assert status == 200
    assert set(answer) == {
        "_links",
        "id",
        "status",
        "plugin_file_location",
        "bundled_plugin",
        "about",
        "extensions",
    }
    links(answer, {"self", "doc", "find"})  # "image" only for a plugin with an icon
    assert answer["status"] == {"state": "active"} and isinstance(answer["bundled_plugin"], bool)
    assert set(answer["about"]) == {"name", "version", "target_go_version", "description",
                                    "target_operating_systems", "vendor"}  # fmt: skip
    [extension] = answer["extensions"]
    assert set(extension) == {"type", "elastic_agent_profile_settings", "supports_cluster_profiles",
                              "cluster_profile_settings", "capabilities"}  # fmt: skip
    assert extension["type"] == "elastic-agent" and extension["supports_cluster_profiles"] is True
    assert set(extension["capabilities"]) == {"supports_plugin_status_report", "supports_agent_status_report",
                                              "supports_cluster_status_report"}  # fmt: skip
    for settings in (extension["cluster_profile_settings"], extension["elastic_agent_profile_settings"]):
        assert set(settings) == {"configurations", "view"} and set(settings["view"]) == {"template"}
        assert all(set(c) == {"key", "metadata"} and set(c["metadata"]) == {"secure", "required"}
                   for c in settings["configurations"])  # fmt: skip

    state.plugins[PLUGIN_ID] = Plugin("invalid", ("Plugin with ID (x) is not valid.",))
    status, answer = call(client, "GET", f"/go/api/admin/plugin_info/{PLUGIN_ID}", V7)
    assert status == 200 and answer["status"] == {
        "state": "invalid",
        "messages": ["Plugin with ID (x) is not valid."],
    }
    assert answer["extensions"] == []

    assert call(client, "GET", "/go/api/admin/plugin_info/absent", V7) == (404, {"message": NOT_FOUND})


def test_plugin_info_of_a_version_this_gocd_lacks_is_rails_unresolved_404_without_json(
    client: FlaskClient, state: AdminState
) -> None:
    """An older GoCD (20.3.0: api-plugin-infos-v6 only) with v7 asked: the Accept is a real ApiVersion, so
    SparkPreFilter lets it pass; no Spark route is registered for it, so SparkFilter hands it to Rails,
    whose catch-all (config/application.rb `match "*url"`) is ApplicationController#unresolved:
    render_error_template with shared/error.erb, the sentence alone, 404. No JSON, no `message`."""
    state.plugin_info_versions = frozenset({6})
    reply = client.get(
        f"/go/api/admin/plugin_info/{PLUGIN_ID}",
        headers={"Accept": V7, "Authorization": f"bearer {ADMIN_TOKEN}"},
    )
    assert reply.status_code == 404 and reply.get_json(silent=True) is None
    assert reply.get_data(as_text=True) == WRONG_URL
    status, answer = call(client, "GET", f"/go/api/admin/plugin_info/{PLUGIN_ID}", V6)
    assert status == 200 and answer["status"] == {"state": "active"}


def test_site_urls_get_has_serversiteurlsconfigrepresenters_fields_and_refuses_a_user_not_an_administrator(
    client: FlaskClient, state: AdminState
) -> None:
    """api/api-server-site-urls-config-v1/.../representers/ServerSiteUrlsConfigRepresenter.java: both URLs
    always, as text, "" when not set (ServerSiteUrlConfig.toString); only administrators reach it
    (AuthorizeFilterChain `/api/admin/**` ROLE_SUPERVISOR: VerifyAuthorityFilter's 403)."""
    status, answer = call(client, "GET", "/go/api/admin/config/server/site_urls", V1)
    assert status == 200
    assert set(answer) == {"_links", "site_url", "secure_site_url"}
    links(answer, {"doc", "self"})
    assert answer["site_url"] == "" and answer["secure_site_url"] == "https://gocd.example.com/go"

    assert call(client, "GET", "/go/api/admin/config/server/site_urls", V1, USER_TOKEN) == (
        403,
        {"message": NOT_AUTHORIZED_RESOURCE},
    )
    assert set(call(client, "GET", CLUSTERS, V1, "unknown")[1]) == MESSAGE  # 401, a sentence
    # The security filters run before Spark's routes: an anonymous caller is refused before its Accept
    # header is looked at; a signed-in one with no API version in it gets SparkPreFilter's 404.
    anonymous = app(state).test_client().get(CLUSTERS, headers={"Accept": "application/json"})
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == 'Basic realm="GoCD"'
    signed_in = {"Accept": "application/json", "Authorization": f"bearer {ADMIN_TOKEN}"}
    reply = app(state).test_client().get(CLUSTERS, headers=signed_in)
    assert reply.status_code == 404 and reply.mimetype == "text/plain"  # SparkPreFilter: no API version
