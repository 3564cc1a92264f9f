"""GoCD's admin REST API as gocd/gocd has it, for the test doubles: who may see what, how a posted
setting is stored, and the JSON each answer carries. tests/support/doubles/gocd_rest/admin_api.py serves it
over HTTP (and into `responses` for tests/test_migrate_*.py); tests/contracts/test_gocd_admin_contract.py
holds its answers against the representers' fields.

Read in gocd/gocd at f17b6f3fc9fc2ca665a5d389470771358b0ea680 (the mirror's HEAD, 2026-08):
- Representers: ClusterProfileRepresenter / ClusterProfilesRepresenter (api-cluster-profiles-v1),
  ElasticProfileRepresenter / ElasticProfilesRepresenter (api-elastic-profile-v2),
  ConfigurationPropertyRepresenter (api-base), PluginInfoRepresenter with
  ElasticAgentExtensionRepresenter (api-plugin-infos-v7), ServerSiteUrlsConfigRepresenter
  (api-server-site-urls-config-v1), MessageJson (api-base). Links are written relative to the server
  (`/go/api/...`), `doc` absolute (api.gocd.org).
- Who sees what: the list actions filter by `doesUserHasPermissions` (AbstractAuthorizationHelper:
  an administrator, or everyone when security is off, sees all; another user what a role of theirs
  grants, often nothing), and answer 200 whatever is left. The filter chain (AuthorizeFilterChain)
  lets any signed-in user reach the profiles and plugin info, but `/api/admin/**` else, site URLs
  included, only administrators: 403 "You are not authorized to access this resource!"
  (VerifyAuthorityFilter, JSON from JsonErrorMessageRenderer). A request without a token while security
  is on: 401 "You are not authenticated!"; an unknown token: 401 "Invalid Personal Access Token."; any
  token while security is off: 401 (AccessTokenAuthenticationFilter).
- Settings: a cluster profile's go through ConfigurationPropertyBuilder.create (PluginProfile.
  addConfigurations): a plain value of a key the plugin declares secure is encrypted, and an
  `encrypted_value` for a key it does not is an error on that setting, so the create fails (422). An
  elastic profile's are kept as posted (ElasticProfile.addConfigurations) and then
  encryptSecureConfigurations: secure keys' plain values are encrypted, other keys' encrypted values
  dropped (ConfigurationProperty.handleSecureValueConfiguration(false)): saved blank, no error. The
  plugin validates the plain values (getConfigurationAsMap(true): encrypted ones decrypted).
- Which keys are secure: this plugin's from profiles/fields.py; the official plugin's from its
  GetClusterProfileMetadataExecutor and GetProfileMetadataExecutor (gocd/kubernetes-elastic-agents
  5.0.2): `security_token` and `kubernetes_cluster_ca_cert` only.
- An Accept header of a real API version (ApiVersion: v1 to v11) that a route does not serve passes
  SparkPreFilter, matches no Spark route (each is registered for its controller's media type), so the
  SparkFilter hands the request on to Rails, whose catch-all route (config/application.rb, `match
  "*url"`) is ApplicationController#unresolved: 404 with "The url you are trying to reach appears to be
  incorrect." rendered by shared/error.erb (the message alone, no JSON). Modelled for plugin info, whose
  v7 came with GoCD 20.4.0 (api-plugin-infos-v7; 20.3.0 has v6, 19.3.0 v5): `plugin_info_versions`.
Not modelled: ETags, role policies beyond "may view these cluster profiles (and their elastic
profiles)", the bodies of other routes an Accept version does not match, the content type Rails gives
the catch-all's page for a GoCD media type (not found in the source: text/html is assumed; a client must
not depend on it).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS

PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes-reuse"
OFFICIAL_PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes"
DOCS = "https://api.gocd.org/current/"

# LocalizedMessage and the filters' sentences of the admin API alone (those of every API: sentences.py).
MAINTENANCE = "Server is in maintenance mode, please try later."  # ModeAwareFilter
JSON_EXPECTED = "You must specify a 'Content-Type' of 'application/json'"
UNSECURED_ENCRYPTED = "encrypted_value cannot be specified to a unsecured property."
# ApiVersion: the Accept headers GoCD takes at all; each route answers its own version and the latest.
ACCEPTS = frozenset(
    {"application/vnd.go.cd+json"} | {f"application/vnd.go.cd.v{n}+json" for n in range(1, 12)}
)


def already_exists(entity_type: str, name: str) -> str:
    return f"Failed to add {entity_type} '{name}'. Another {entity_type} with the same name already exists."


def validation_failed(tag: str, name: str, errors: str) -> str:
    return f"Validations failed for {tag} '{name}'. Error(s): [{errors}]. Please correct and resubmit."


SECURE_CLUSTER_KEYS = {
    PLUGIN_ID: frozenset(f.key for f in CLUSTER_FIELDS if f.secure),
    OFFICIAL_PLUGIN_ID: frozenset({"security_token", "kubernetes_cluster_ca_cert"}),
}
SECURE_ELASTIC_KEYS = {
    PLUGIN_ID: frozenset(f.key for f in ELASTIC_FIELDS if f.secure),
    OFFICIAL_PLUGIN_ID: frozenset(),
}


@dataclass(frozen=True)
class User:
    """A token's user: an administrator, or one whose roles let them view these cluster profiles and
    their elastic profiles ("*": all)."""

    name: str
    admin: bool = False
    views: frozenset[str] = frozenset()

    def may_view(self, cluster_id: str) -> bool:
        return self.admin or "*" in self.views or cluster_id in self.views


ADMIN = User("admin", admin=True)
EVERYONE = User("anonymous", admin=True)  # security off: every caller is an administrator


@dataclass
class Plugin:
    state: str = "active"  # PluginStatus.State lowercased: active, invalid, disabled
    messages: tuple[str, ...] = ()  # status.messages of an invalid plugin


@dataclass
class AdminState:
    """What the server holds (profiles and pipelines in the representers' JSON shape, as saved), who
    may call it, and what it was asked."""

    version: str = "26.1.0"
    plugins: dict[str, str | Plugin] = field(default_factory=lambda: {PLUGIN_ID: "active"})
    require_auth: bool = False  # security on: tokens below, else 401
    maintenance: bool = False  # every request but GET and HEAD: 503 (ModeAwareFilter)
    tokens: dict[str, User] = field(default_factory=dict)
    site_url: str = ""
    secure_site_url: str = ""
    cluster_profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    elastic_profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    plugin_info_versions: frozenset[int] = frozenset({7})  # the plugin info API versions this GoCD serves

    def plugin(self, plugin_id: str) -> Plugin | None:
        found = self.plugins.get(plugin_id)
        return Plugin(found) if isinstance(found, str) else found


def encrypt(value: str) -> str:
    """Cipher text in GoCD's shape ("AES:<iv>:<data>", GoCipher); only the double reads it back."""
    return "AES:ZG91YmxlLWl2:" + base64.b64encode(value.encode()).decode()


def decrypt(cipher: str) -> str | None:
    """The plain value of cipher text `encrypt` made; None for any other (GoCD's own cipher would refuse
    it: ConfigurationProperty.validate, "Encrypted value for property with key ... is invalid")."""
    prefix = "AES:ZG91YmxlLWl2:"
    if not cipher.startswith(prefix):
        return None
    return base64.b64decode(cipher[len(prefix) :]).decode()


def _text(entry: dict[str, Any], name: str) -> str:
    value = entry.get(name)
    return value if isinstance(value, str) else ""


def _stored(entry: dict[str, Any], secure: frozenset[str], *, cluster: bool) -> dict[str, Any]:
    """One posted setting as GoCD stores it. A secure key's plain value is encrypted, its cipher text
    kept, in both kinds. Another key's cipher text: a cluster profile's goes through
    ConfigurationPropertyBuilder.create, which marks it as an error (the create then fails, the errors in
    the echoed entity); an elastic profile's is dropped by ElasticProfile.encryptSecureConfigurations
    (handleSecureValueConfiguration(false)): saved blank."""
    key, value, cipher = _text(entry, "key"), _text(entry, "value"), _text(entry, "encrypted_value")
    if key in secure:
        return {"key": key, "encrypted_value": cipher or encrypt(value)} if cipher or value else {"key": key}
    if cipher and cluster:
        return {"key": key, "encrypted_value": cipher, "errors": {"encrypted_value": [UNSECURED_ENCRYPTED]}}
    return {"key": key, "value": value} if value and not cipher else {"key": key}


def cluster_settings(posted: list[dict[str, Any]], secure: frozenset[str]) -> list[dict[str, Any]]:
    return [_stored(entry, secure, cluster=True) for entry in posted]


def elastic_settings(posted: list[dict[str, Any]], secure: frozenset[str]) -> list[dict[str, Any]]:
    return [_stored(entry, secure, cluster=False) for entry in posted]


def plain_values(settings: list[dict[str, Any]]) -> dict[str, str]:
    """What GoCD sends the plugin to validate: every value, encrypted ones decrypted."""
    values: dict[str, str] = {}
    for entry in settings:
        cipher = _text(entry, "encrypted_value")
        values[_text(entry, "key")] = (decrypt(cipher) or "") if cipher else _text(entry, "value")
    return values


# --- representers ----------------------------------------------------------------------------------


def _property(entry: dict[str, Any]) -> dict[str, Any]:
    """ConfigurationPropertyRepresenter.toJSON: `key`; `value` only when plain and not blank;
    `encrypted_value` only when secure and not blank; `errors` only when there are."""
    out: dict[str, Any] = {"key": entry["key"]}
    for name in ("value", "encrypted_value", "errors"):
        if entry.get(name):
            out[name] = entry[name]
    return out


def _links(self_path: str, doc: str, find: str | None) -> dict[str, Any]:
    links: dict[str, Any] = {"self": {"href": "/go" + self_path}, "doc": {"href": DOCS + doc}}
    if find is not None:
        links["find"] = {"href": "/go" + find}
    return links


CLUSTER_BASE, ELASTIC_BASE = "/api/admin/elastic/cluster_profiles", "/api/elastic/profiles"


def _profile_json(entity: dict[str, Any], base: str, doc: str, id_param: str, owner: str) -> dict[str, Any]:
    """ClusterProfileRepresenter and ElasticProfileRepresenter write the same shape; only the owner
    differs (`plugin_id`, or `cluster_profile_id`: an elastic profile has no plugin of its own)."""
    out = {
        "_links": _links(f"{base}/{entity['id']}", doc, f"{base}/:{id_param}"),
        "id": entity["id"],
        owner: entity[owner],
        "properties": [_property(p) for p in entity.get("properties") or []],
    }
    if entity.get("errors"):
        out["errors"] = entity["errors"]
    return out


def cluster_profile_json(entity: dict[str, Any]) -> dict[str, Any]:
    return _profile_json(entity, CLUSTER_BASE, "#cluster-profiles", "cluster_id", "plugin_id")


def cluster_profiles_json(entities: list[dict[str, Any]]) -> dict[str, Any]:
    """ClusterProfilesRepresenter: its `_links` have no `find`."""
    return {
        "_links": _links(CLUSTER_BASE, "#cluster-profiles", None),
        "_embedded": {"cluster_profiles": [cluster_profile_json(e) for e in entities]},
    }


def elastic_profile_json(entity: dict[str, Any]) -> dict[str, Any]:
    return _profile_json(entity, ELASTIC_BASE, "#elastic-agent-profiles", "profile_id", "cluster_profile_id")


def elastic_profiles_json(entities: list[dict[str, Any]]) -> dict[str, Any]:
    """ElasticProfilesRepresenter: its `_links` have `find` too."""
    return {
        "_links": _links(ELASTIC_BASE, "#elastic-agent-profiles", f"{ELASTIC_BASE}/:profile_id"),
        "_embedded": {"profiles": [elastic_profile_json(e) for e in entities]},
    }


def plugin_info_json(plugin_id: str, plugin: Plugin) -> dict[str, Any]:
    """PluginInfoRepresenter: an elastic agent plugin's info. An invalid one (BadPluginInfo) has its
    status messages, no `about` when its descriptor had none, and no extensions."""
    base = "/api/admin/plugin_info"
    status: dict[str, Any] = {"state": plugin.state}
    if plugin.state == "invalid":
        status["messages"] = list(plugin.messages)
    out: dict[str, Any] = {
        "_links": _links(f"{base}/{plugin_id}", "#plugin-info", f"{base}/:id"),
        "id": plugin_id,
        "status": status,
        "plugin_file_location": f"/godata/plugins/external/{plugin_id}.jar",
        "bundled_plugin": False,
    }
    if plugin.state == "invalid":
        out["extensions"] = []
        return out
    out["about"] = {
        "name": "Kubernetes Elastic Agent Plugin",
        "version": "1.0",
        "target_go_version": "19.3.0",
        "description": "GoCD elastic agents on Kubernetes",
        "target_operating_systems": [],
        "vendor": {"name": "example", "url": "https://example.com"},
    }
    cluster = [
        {"key": f.key, "metadata": {"secure": f.secure, "required": f.required}} for f in CLUSTER_FIELDS
    ]
    elastic = [
        {"key": f.key, "metadata": {"secure": f.secure, "required": f.required}} for f in ELASTIC_FIELDS
    ]
    out["extensions"] = [
        {
            "type": "elastic-agent",
            "elastic_agent_profile_settings": {"configurations": elastic, "view": {"template": "<div/>"}},
            "supports_cluster_profiles": True,
            "cluster_profile_settings": {"configurations": cluster, "view": {"template": "<div/>"}},
            "capabilities": {
                "supports_plugin_status_report": True,
                "supports_agent_status_report": True,
                "supports_cluster_status_report": True,
            },
        }
    ]
    return out


def site_urls_json(site_url: str, secure_site_url: str) -> dict[str, Any]:
    """ServerSiteUrlsConfigRepresenter: both URLs always, "" when not set (ServerSiteUrlConfig.toString)."""
    return {
        "_links": {
            "doc": {"href": DOCS + "#siteurls-config"},
            "self": {"href": "/go/api/admin/config/server/site_urls"},
        },
        "site_url": site_url,
        "secure_site_url": secure_site_url,
    }


def message_json(text: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """MessageJson.create: `message`, and the entity as `data` when one is given."""
    return {"message": text} if data is None else {"message": text, "data": data}
