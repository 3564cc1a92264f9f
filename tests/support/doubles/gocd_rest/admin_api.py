"""The part of GoCD's REST API that this project's tools talk to: the values' preconfigure script
(tests/unit/deploy/test_chart_preconfigure.py, over real HTTP on loopback, with the real bash and curl) and
`migrate-profiles` (tests/test_migrate_*.py, through `responses`: `route`). What is stored, who
sees what and every answer's JSON come from tests/support/doubles/gocd_rest/admin_model.py, which names its
sources.

Modelled on gocd/gocd (at the commit tests/support/doubles/gocd_rest/admin_model.py names; the chart's
appVersion is 26.1.0):
- Before any controller: ModeAwareFilter answers 503 to all but GET and HEAD in maintenance mode;
  SparkPreFilter answers 404 text/plain to an Accept header that is no API
  version (ApiVersion), except for `/api/v1/health`; the security filters (AccessTokenAuthentication-
  Filter, AuthorizeFilterChain) let anyone reach health and version, any signed-in user the profiles
  and plugin info, only administrators the rest of `/api/admin/**`. Every POST with a body needs a JSON
  Content-Type, else 415 (ApiController.verifyContentType).
- `GET /api/v1/health`: ServerHealthController `show`, `{"health": "OK"}`. Before the server is up
  nothing listens at all (Jetty starts last), so the tests start this app late.
- `GET /api/version`: VersionControllerV1 `show` (VersionRepresenter).
- `GET /api/admin/plugin_info/:id`: PluginInfosControllerV7 `show`: 404 (RecordNotFoundException,
  notFoundMessage, JSON `{"message": ...}` by RoutesHelper.httpException) for a plugin GoCD does not
  have, else PluginInfoRepresenter, `status.state` `active` or `invalid` (BadPluginInfo) or `disabled`.
  An API version this GoCD does not serve (`AdminState.plugin_info_versions`; v7 since 20.4.0) reaches
  no controller: Rails' catch-all, ApplicationController#unresolved, answers 404 with its sentence alone
  (tests/support/doubles/gocd_rest/admin_model.py says how).
- `GET /api/admin/config/server/site_urls`: ServerSiteUrlsConfigControllerV1 `index` (administrators).
- `GET|POST /api/admin/elastic/cluster_profiles`, `GET .../:cluster_id`: ClusterProfilesControllerV1
  `index` (filtered by permission, 200), `create` (haltIfEntityWithSameIdExists: 422
  entityAlreadyExistsMessage("Cluster Profile", id) with the entity; the plugin not loaded: 422
  "Plugin with id `x` is not found." on `plugin_id`, ClusterProfilesService.validatePluginProperties;
  an invalid setting: 422 entityConfigValidationFailed("clusterProfile", ...) with the entity and its
  errors), `getClusterProfile` (404, or 403 checkUserHasPermissions).
- `GET|POST /api/elastic/profiles`, `GET .../:profile_id`: ElasticProfileControllerV2 `index`, `create`
  (entityAlreadyExistsMessage("elasticProfile", id); haltIfSpecifiedClusterProfileDoesntExists: 422
  "No Cluster Profile exists with the specified cluster_profile_id 'x'." with no `data`), `show`.
- `POST`/`GET /api/admin/pipelines[/:name]`: PipelineConfigControllerV11 `create`: the group is required
  (getOrHaltForGroupName); a pipeline is paused only with `X-pause-pipeline: true`.
- `GET /api/admin/pipeline_groups`: PipelineGroupsControllerV1 `index` with PipelineGroupsRepresenter,
  pretty-printed as GoCD's JSON writer does (the script must not depend on the spacing).

The plugin's validation is this project's own (profiles.validation, and for a blank go_server_url the
check executors/profile_requests.py makes against GoCD's secure site URL), as the bridge jar forwards it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import requests
import responses
from flask import Flask, Response, request
from werkzeug.serving import make_server

from profiles import validation
from profiles.errors import ProfileError
from profiles.server_url import pods_server_url
from tests.support.doubles.gocd_rest.admin_model import (
    ACCEPTS,
    EVERYONE,
    JSON_EXPECTED,
    MAINTENANCE,
    PLUGIN_ID,
    SECURE_CLUSTER_KEYS,
    SECURE_ELASTIC_KEYS,
    AdminState,
    User,
    already_exists,
    cluster_profile_json,
    cluster_profiles_json,
    cluster_settings,
    elastic_profile_json,
    elastic_profiles_json,
    elastic_settings,
    message_json,
    plain_values,
    plugin_info_json,
    site_urls_json,
    validation_failed,
)
from tests.support.doubles.gocd_rest.jsonwriters import gson_pretty
from tests.support.doubles.gocd_rest.sentences import (
    BEARER_WITHOUT_SECURITY,
    INVALID_TOKEN,
    LATEST,
    NOT_AUTHENTICATED,
    NOT_AUTHORIZED_RESOURCE,
    NOT_FOUND,
    WRONG_URL,
)

__all__ = ["PLUGIN_ID", "AdminState", "answering", "app", "route", "serving"]

NO_CLUSTER = "No Cluster Profile exists with the specified cluster_profile_id '{}'."
_lock = threading.Lock()  # one server's state at a time, as GoCD's config lock does
_MEDIA = "application/vnd.go.cd+json; charset=utf-8"
# Where the filter chain lets anyone through, and where any signed-in user (else: administrators only).
_OPEN = ("/go/api/v1/health", "/go/api/version")
_USERS = ("/go/api/admin/plugin_info", "/go/api/admin/elastic/cluster_profiles", "/go/api/elastic/profiles",
          "/go/api/admin/pipelines", "/go/api/admin/pipeline_groups")  # fmt: skip


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value), status, content_type=_MEDIA)


def _message(status: int, text: str, data: dict[str, Any] | None = None) -> Response:
    return _json(message_json(text, data), status)


def _filter_refusal(status: int, text: str, *, challenge: bool = False) -> Response:
    """A security filter's refusal: ContentTypeNegotiationMessageRenderer's body, `{"message": M}` pretty-
    printed by Gson (JsonErrorMessageRenderer), typed as the Accept header's API version when it names
    one, else application/json; an anonymous caller also gets a Basic challenge."""
    accept = request.headers.get("Accept", "")
    versioned = re.fullmatch(r"application/vnd\.go\.cd\.v\d+\+json", accept)
    answer = Response(
        gson_pretty({"message": text}), status, content_type=accept if versioned else "application/json"
    )
    if challenge:
        answer.headers["WWW-Authenticate"] = 'Basic realm="GoCD"'
    return answer


def _user() -> User:
    user: User = request.environ["gocd.user"]  # put there by the gate, before every route
    return user


def app(state: AdminState) -> Flask:
    api = Flask(__name__)

    @api.before_request
    def gate() -> Response | None:
        path = request.path
        # The security filters run first (AuthenticationFilterChain, AuthorizeFilterChain), then Spark's
        # routes check the Accept header. A bearer token is looked up before security is asked about
        # (AccessTokenAuthenticationFilter.extractAuthTokenCredential), so an unknown one is refused
        # whether security is on or off.
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        if token is not None and token not in state.tokens:
            return _filter_refusal(401, INVALID_TOKEN)
        if not state.require_auth:
            if token is not None:
                return _filter_refusal(401, BEARER_WITHOUT_SECURITY)
            user = EVERYONE
        elif token is None:
            if path.startswith(_OPEN):
                user = User("anonymous")
            else:  # VerifyAuthorityFilter via BasicAuthenticationWithChallengeFailureResponseHandler
                return _filter_refusal(401, NOT_AUTHENTICATED, challenge=True)
        else:
            user = state.tokens[token]
        if not user.admin and not path.startswith(_OPEN + _USERS):
            return _filter_refusal(403, NOT_AUTHORIZED_RESOURCE)
        if path != "/go/api/v1/health" and request.headers.get("Accept", "") not in ACCEPTS:
            return Response(WRONG_URL + "\n", 404, content_type="text/plain; charset=utf-8")
        request.environ["gocd.user"] = user
        if state.maintenance and request.method not in ("GET", "HEAD"):
            return _message(503, MAINTENANCE)
        posting = request.method == "POST" and request.content_length
        if posting and (request.mimetype or "").lower() != "application/json":
            return _message(415, JSON_EXPECTED)
        return None

    @api.after_request
    def record(response: Response) -> Response:
        with _lock:
            state.calls.append((request.method, request.path, response.status_code))
        return response

    @api.get("/go/api/v1/health")
    def health() -> Response:
        return _json({"health": "OK"})

    @api.get("/go/api/version")
    def version() -> Response:
        return _json({"version": state.version, "build_number": "20000", "full_version": state.version})

    @api.get("/go/api/admin/plugin_info/<plugin_id>")
    def plugin_info(plugin_id: str) -> Response:
        accept = request.headers.get("Accept", "")
        if accept != LATEST and int(accept.split(".v")[1].split("+")[0]) not in state.plugin_info_versions:
            # ApplicationController#unresolved: the same sentence, from Rails, and no line end.
            return Response(WRONG_URL, 404, content_type="text/html; charset=utf-8")
        plugin = state.plugin(plugin_id)
        if plugin is None:
            return _message(404, NOT_FOUND)
        return _json(plugin_info_json(plugin_id, plugin))

    @api.get("/go/api/admin/config/server/site_urls")
    def site_urls() -> Response:
        return _json(site_urls_json(state.site_url, state.secure_site_url))

    def refused(action: str, resource: str, kind: str) -> Response:
        """checkUserHasPermissions's 403."""
        text = f"User '{_user().name}' does not have permissions to {action} '{resource}' {kind}(s)."
        return _message(403, text)

    @api.get("/go/api/admin/elastic/cluster_profiles")
    def cluster_profiles() -> Response:
        with _lock:
            seen = [p for p in state.cluster_profiles.values() if _user().may_view(p["id"])]
        return _json(cluster_profiles_json(seen))

    @api.get("/go/api/admin/elastic/cluster_profiles/<cluster_id>")
    def cluster_profile(cluster_id: str) -> Response:
        if not _user().may_view(cluster_id):
            return refused("view", cluster_id, "cluster_profile")
        return one(lambda: state.cluster_profiles, cluster_id, cluster_profile_json)

    @api.post("/go/api/admin/elastic/cluster_profiles")
    def create_cluster_profile() -> Response:
        posted = request.get_json(force=True)
        if not _user().admin:
            return refused("administer", str(posted.get("id")), "cluster_profile")
        with _lock:
            return _create_cluster(state, posted)

    @api.get("/go/api/elastic/profiles")
    def elastic_profiles() -> Response:
        with _lock:
            seen = [p for p in state.elastic_profiles.values() if _user().may_view(p["cluster_profile_id"])]
        return _json(elastic_profiles_json(seen))

    @api.get("/go/api/elastic/profiles/<profile_id>")
    def elastic_profile(profile_id: str) -> Response:
        found = state.elastic_profiles.get(profile_id)
        if found is not None and not _user().may_view(found["cluster_profile_id"]):
            return refused("view", profile_id, "elastic_agent_profile")
        return one(lambda: state.elastic_profiles, profile_id, elastic_profile_json)

    @api.post("/go/api/elastic/profiles")
    def create_elastic_profile() -> Response:
        posted = request.get_json(force=True)
        if not _user().admin:
            return refused("administer", str(posted.get("id")), "elastic_agent_profile")
        with _lock:
            return _create_elastic(state, posted)

    def one(store: Callable[[], dict[str, dict[str, Any]]], key: str,
            represent: Callable[[dict[str, Any]], dict[str, Any]]) -> Response:  # fmt: skip
        with _lock:
            found = store().get(key)
        return _message(404, NOT_FOUND) if found is None else _json(represent(found))

    @api.get("/go/api/admin/pipeline_groups")
    def pipeline_groups() -> Response:
        with _lock:
            groups: dict[str, list[dict[str, str]]] = {}
            for name, pipeline in state.pipelines.items():
                groups.setdefault(pipeline["group"], []).append({"name": name})
        listed = [{"name": group, "pipelines": pipelines} for group, pipelines in groups.items()]
        body = json.dumps({"_links": {}, "_embedded": {"groups": listed}}, indent=2)
        return Response(body, status=200, content_type="application/vnd.go.cd.v1+json; charset=utf-8")

    @api.get("/go/api/admin/pipelines/<name>")
    def pipeline(name: str) -> Response:
        return one(lambda: state.pipelines, name, lambda entity: entity)

    @api.post("/go/api/admin/pipelines")
    def create_pipeline() -> Response:
        body = request.get_json(force=True)
        if not body.get("group"):
            return _message(422, "Pipeline group must be specified for creating a pipeline.")
        entity = body["pipeline"]
        with _lock:
            if entity["name"] in state.pipelines:
                return _message(422, already_exists("pipeline", entity["name"]))
            for stage in entity.get("stages") or []:
                for job in stage.get("jobs") or []:
                    if job.get("elastic_profile_id") not in state.elastic_profiles:
                        return _message(422, f"No profile defined corresponding to profile_id "
                                             f"'{job.get('elastic_profile_id')}'")  # fmt: skip
            state.pipelines[entity["name"]] = {**entity, "group": body["group"]}
            if request.headers.get("X-pause-pipeline", "").lower() == "true":
                state.paused.add(entity["name"])
        return _json(entity)

    return api


def _plugin_problems(state: AdminState, plugin_id: str, values: dict[str, str]) -> dict[str, list[str]]:
    """The plugin's validate-cluster-profile answer, by key: this project's validation, and a blank
    go_server_url checked against this server's secure site URL (executors/profile_requests.py)."""
    found: dict[str, list[str]] = {}
    if plugin_id != PLUGIN_ID:
        return found  # other plugins are never posted to by the tools under test
    for problem in validation.validate_cluster_profile(values):
        found.setdefault(problem["key"], []).append(problem["message"])
    if not (values.get("go_server_url") or "").strip() and "go_server_url" not in found:
        try:
            pods_server_url(state.secure_site_url, state.site_url)
        except ProfileError as error:
            found["go_server_url"] = [error.message]
    return found


def _taken(entity: dict[str, Any], posted: dict[str, Any], noun: str, entity_type: str,
           represent: Callable[[dict[str, Any]], dict[str, Any]]) -> Response:  # fmt: skip
    """haltIfEntityWithSameIdExists of both controllers: 422, the posted entity echoed with an id error."""
    name = entity["id"]
    unique = f"{noun} ids should be unique. {noun} with id '{name}' already exists."
    echoed = {**entity, "properties": posted.get("properties") or [], "errors": {"id": [unique]}}
    return _message(422, already_exists(entity_type, name), represent(echoed))


def _create_cluster(state: AdminState, posted: dict[str, Any]) -> Response:
    profile_id, plugin_id = str(posted.get("id")), str(posted.get("plugin_id"))
    entity: dict[str, Any] = {"id": profile_id, "plugin_id": plugin_id}
    if profile_id in state.cluster_profiles:
        return _taken(entity, posted, "Cluster Profile", "Cluster Profile", cluster_profile_json)
    secure = SECURE_CLUSTER_KEYS.get(plugin_id, frozenset())
    entity["properties"] = cluster_settings(posted.get("properties") or [], secure)
    plugin = state.plugin(plugin_id)
    if plugin is None or plugin.state != "active":
        entity["errors"] = {"plugin_id": [f"Plugin with id `{plugin_id}` is not found."]}
    else:
        for key, messages in _plugin_problems(state, plugin_id, plain_values(entity["properties"])).items():
            setting = next((s for s in entity["properties"] if s["key"] == key), None)
            target = entity if setting is None else setting
            target.setdefault("errors", {}).setdefault(key, []).extend(messages)
    errors = [m for where in (entity, *entity["properties"]) for ms in (where.get("errors") or {}).values()
              for m in ms]  # fmt: skip
    if errors:
        text = validation_failed("clusterProfile", profile_id, ", ".join(dict.fromkeys(errors)))
        return _message(422, text, cluster_profile_json(entity))
    state.cluster_profiles[profile_id] = entity
    return _json(cluster_profile_json(entity))


def _create_elastic(state: AdminState, posted: dict[str, Any]) -> Response:
    profile_id, cluster_id = str(posted.get("id")), str(posted.get("cluster_profile_id"))
    entity: dict[str, Any] = {"id": profile_id, "cluster_profile_id": cluster_id}
    if profile_id in state.elastic_profiles:
        return _taken(entity, posted, "Elastic profile", "elasticProfile", elastic_profile_json)
    cluster = state.cluster_profiles.get(cluster_id)
    if cluster is None:
        return _message(422, NO_CLUSTER.format(cluster_id))
    secure = SECURE_ELASTIC_KEYS.get(cluster["plugin_id"], frozenset())
    entity["properties"] = elastic_settings(posted.get("properties") or [], secure)
    by_key: dict[str, list[str]] = {}
    if cluster["plugin_id"] == PLUGIN_ID:
        for problem in validation.validate_elastic_profile(plain_values(posted.get("properties") or [])):
            by_key.setdefault(problem["key"] or "plugin", []).append(problem["message"])
    if by_key:
        for setting in entity["properties"]:
            if setting["key"] in by_key:
                setting["errors"] = {setting["key"]: by_key[setting["key"]]}
        joined = ", ".join(m for ms in by_key.values() for m in ms)
        text = validation_failed("elasticProfile", profile_id, joined)
        return _message(422, text, elastic_profile_json(entity))
    state.elastic_profiles[profile_id] = entity
    return _json(elastic_profile_json(entity))


@contextmanager
def serving(state: AdminState, port: int) -> Iterator[str]:
    """The API on 127.0.0.1:`port` until the block ends; yields its base URL (…/go)."""
    server = make_server("127.0.0.1", port, app(state), threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="gocd-admin-api", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/go"
    finally:
        server.shutdown()
        thread.join(timeout=5)


Answer = Callable[[requests.PreparedRequest], tuple[int, dict[str, str], bytes]]


def answering(state: AdminState, server: str) -> Answer:
    """A `responses` callback answering a request under `server` (…/go) as this double does."""
    client = app(state).test_client()
    prefix = server.rstrip("/")
    origin = prefix[: -len("/go")] if prefix.endswith("/go") else prefix

    def answer(prepared: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        path, _, query = str(prepared.url)[len(origin) :].partition("?")
        body = prepared.body.encode() if isinstance(prepared.body, str) else prepared.body
        reply = client.open(path, method=str(prepared.method), headers=dict(prepared.headers),
                            data=body, query_string=query)  # fmt: skip
        return reply.status_code, dict(reply.headers), reply.get_data()

    return answer


def route(mock: responses.RequestsMock, state: AdminState, server: str) -> None:
    """Every GET and POST under `server` (…/go) answered by this double, through `responses`: requests
    are recorded in `mock.calls`, and an answer registered before this call for the same URL comes
    first, once (fault injection)."""
    answer = answering(state, server)
    matcher = re.compile(re.escape(server.rstrip("/")) + r"(/.*)?$")
    for method in (responses.GET, responses.POST):
        mock.add_callback(method, matcher, callback=answer, content_type=None)
