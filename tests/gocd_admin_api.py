"""The part of GoCD's REST API that a fresh server's preconfigure script talks to, for the tests of the
values' `server.preconfigureCommand` (docker/helm/values-gocd.yaml). Served over real HTTP on loopback,
so the script runs with the real bash and curl, as in the GoCD server container.

Modelled on gocd/gocd (the tag the chart's appVersion names, 26.1.0):
- `GET /api/v1/health`: api/api-server-health-v1/.../ServerHealthController.java `show`, `{"health": "OK"}`.
  Before the server is up nothing listens at all (Jetty starts last), so the tests start this app late.
- `GET /api/version`: api/api-version-v1/.../VersionControllerV1.java `show` with VersionRepresenter.
- `GET /api/admin/plugin_info/:id`: api/api-plugin-infos-v7/.../PluginInfosControllerV7.java `show`: 404
  (RecordNotFoundException) for a plugin not loaded, else the plugin with `status.state` (`active`, or
  `invalid` for a plugin GoCD could not load).
- `POST`/`GET /api/admin/elastic/cluster_profiles[/:id]`: ClusterProfilesControllerV1 `create`,
  `getClusterProfile`: 422 `entityAlreadyExistsMessage` for an id in use (HaltApiMessages); the plugin's
  own validation (ClusterProfilesService.validatePluginProperties: "Plugin with id `x` is not found."
  for a plugin not loaded), failed validation 422 with the errors in the entity.
- `POST`/`GET /api/elastic/profiles[/:id]`: ElasticProfileControllerV2 `create`, `show`: the same, and
  422 "No Cluster Profile exists with the specified cluster_profile_id 'x'." (haltIfSpecifiedClusterProfile
  DoesntExists).
- `POST`/`GET /api/admin/pipelines[/:name]`: PipelineConfigControllerV11 `create`: the group is required
  (getOrHaltForGroupName); a pipeline is paused only with `X-pause-pipeline: true`.
- `GET /api/admin/pipeline_groups`: PipelineGroupsControllerV1 `index` with PipelineGroupsRepresenter:
  `{"_embedded": {"groups": [{"name": ..., "pipelines": [{"name": ...}]}]}}`, pretty-printed as GoCD's
  JSON writer does (the script must not depend on the spacing).
- Every POST with a body needs a JSON Content-Type, else 415 (ApiController.verifyContentType), and an
  Accept header of GoCD's media type (its routes match on it; anything else is 404).

The plugin's validation is this project's own (profiles.validation), as the bridge jar would forward it.

Security is off, as on a fresh server (no authorization configured); `security_enabled` models the server
after an administrator turned it on, as GoCD's filters decide before any controller runs:
- Authentication (server/.../newsecurity/filterchains/AuthenticationFilterChain.java, chain `/api/**`):
  AccessTokenAuthenticationFilter reads `Authorization: Bearer <token>` on every API path, health
  included. A token GoCD does not know gets 401 "Invalid Personal Access Token." (AccessTokenService
  .findByAccessToken throws InvalidAccessTokenException), security on or off; a valid one on a server
  with security off gets 401 "Bearer authentication credentials are not required, since security has
  been disabled on this server." (filterWhenSecurityDisabled). No header: AssumeAnonymousUserFilter
  makes the caller `anonymous`, who holds every authority with security off and only ROLE_ANONYMOUS
  with it on (server/.../security/AuthorityGranter.java).
- Authorization (AuthorizeFilterChain.java): `/api/version` and `/api/v1/health/**` allow everyone
  (allowAllAccessFilter), so the chart's probes stay anonymous; the admin endpoints here need ROLE_USER
  and VerifyAuthorityFilter answers an anonymous caller 401 "You are not authenticated!" through
  BasicAuthenticationWithChallengeFailureResponseHandler, which adds `WWW-Authenticate: Basic
  realm="GoCD"`.
- Both 401 bodies are ContentTypeNegotiationMessageRenderer's: `{"message": ...}` pretty-printed by
  Gson (JsonErrorMessageRenderer), typed `application/vnd.go.cd.vN+json` when the Accept header names
  such a version and `application/json` otherwise (`application/vnd.go.cd+json` is not in its map).
`admin_tokens` are the tokens of administrators. Not modelled: tokens of non-admin users (the controllers'
checkUserHasPermissions answers them 403 on writes), revoked tokens, and Basic authentication (password
plugins).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, request
from werkzeug.serving import make_server

from profiles import validation

PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes-reuse"
MEDIA_TYPE = "application/vnd.go.cd"
PUBLIC_PATHS = {"/go/api/version", "/go/api/v1/health"}  # AuthorizeFilterChain: allowAllAccessFilter


@dataclass
class AdminState:
    """What the server holds: its profiles and pipelines as posted, and what it was asked."""

    version: str = "26.1.0"
    plugins: dict[str, str] = field(default_factory=lambda: {PLUGIN_ID: "active"})
    security_enabled: bool = False
    admin_tokens: set[str] = field(default_factory=set)
    cluster_profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    elastic_profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    lock: threading.Lock = field(default_factory=threading.Lock)


def _message(status: int, text: str, data: Any = None) -> Response:
    body: dict[str, Any] = {"message": text}
    if data is not None:
        body["data"] = data
    return Response(json.dumps(body), status, mimetype="application/vnd.go.cd+json")


def _json(value: Any) -> Response:
    return Response(json.dumps(value), 200, mimetype="application/vnd.go.cd+json")


def _properties(entity: dict[str, Any]) -> dict[str, str]:
    return {p["key"]: p.get("value", "") for p in entity.get("properties") or []}


def _invalid(kind: str, entity: dict[str, Any], errors: list[dict[str, str]]) -> Response:
    """422 with the entity and its errors (handleCreateOrUpdateResponse of the controllers)."""
    by_key: dict[str, list[str]] = {}
    for error in errors:
        by_key.setdefault(error["key"] or "plugin", []).append(error["message"])
    return _message(422, f"Validations failed for {kind} '{entity.get('id')}'. Error(s): {by_key}",
                    {**entity, "errors": by_key})  # fmt: skip


def _unauthorized(text: str, challenge: bool) -> Response:
    """A 401 of GoCD's security filters, rendered for the request's Accept header."""
    accept = request.headers.get("Accept", "").split(";")[0].strip().lower()
    versioned = re.fullmatch(r"application/vnd\.go\.cd\.v([1-9][0-9]?)\+json", accept)
    mimetype = accept if versioned else "application/json"
    answer = Response(json.dumps({"message": text}, indent=2), 401, content_type=f"{mimetype};charset=utf-8")
    if challenge:
        answer.headers["WWW-Authenticate"] = 'Basic realm="GoCD"'
    return answer


def _authentication_refused(state: AdminState) -> Response | None:
    """What GoCD's authentication and authorization filters answer before any controller, or None."""
    header = request.headers.get("Authorization", "")
    bearer = re.fullmatch(r"bearer (.*)", header, re.IGNORECASE)
    if bearer:
        if bearer.group(1) not in state.admin_tokens:
            return _unauthorized("Invalid Personal Access Token.", challenge=False)
        if not state.security_enabled:
            return _unauthorized("Bearer authentication credentials are not required, since security has "
                                 "been disabled on this server.", challenge=False)  # fmt: skip
        return None
    public = request.path in PUBLIC_PATHS or request.path.startswith("/go/api/v1/health/")
    if state.security_enabled and not public:
        return _unauthorized("You are not authenticated!", challenge=True)
    return None


def app(state: AdminState) -> Flask:
    api = Flask(__name__)

    @api.before_request
    def gate() -> Response | None:
        refused = _authentication_refused(state)
        if refused is not None:
            return refused
        accept = request.headers.get("Accept", "")
        if not accept.startswith(MEDIA_TYPE):
            return _message(404, "The url you are trying to reach appears to be incorrect.")
        if request.method == "POST" and request.content_length:
            mime = (request.mimetype or "").lower()
            if mime != "application/json":
                return _message(415, "You must specify a 'Content-Type' of 'application/json'")
        return None

    @api.after_request
    def record(response: Response) -> Response:
        with state.lock:
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
        if plugin_id not in state.plugins:
            return _message(404, "Either the resource you requested was not found, or you are not "
                                 "authorized to perform this action.")  # fmt: skip
        return _json({"id": plugin_id, "status": {"state": state.plugins[plugin_id]}})

    def one(store: Callable[[], dict[str, dict[str, Any]]], key: str) -> Response:
        with state.lock:
            found = store().get(key)
        if found is None:
            return _message(404, "Either the resource you requested was not found, or you are not "
                                 "authorized to perform this action.")  # fmt: skip
        return _json(found)

    @api.get("/go/api/admin/elastic/cluster_profiles/<cluster_id>")
    def cluster_profile(cluster_id: str) -> Response:
        return one(lambda: state.cluster_profiles, cluster_id)

    @api.post("/go/api/admin/elastic/cluster_profiles")
    def create_cluster_profile() -> Response:
        entity = request.get_json(force=True)
        with state.lock:
            if entity["id"] in state.cluster_profiles:
                return _message(422, f"Failed to add cluster profile '{entity['id']}'. Another cluster "
                                     "profile with the same name already exists.")  # fmt: skip
            if state.plugins.get(entity["plugin_id"]) != "active":
                missing = f"Plugin with id `{entity['plugin_id']}` is not found."
                return _invalid("clusterProfile", entity, [{"key": "pluginId", "message": missing}])
            errors = validation.validate_cluster_profile(_properties(entity))
            if errors:
                return _invalid("clusterProfile", entity, errors)
            state.cluster_profiles[entity["id"]] = entity
        return _json(entity)

    @api.get("/go/api/elastic/profiles/<profile_id>")
    def elastic_profile(profile_id: str) -> Response:
        return one(lambda: state.elastic_profiles, profile_id)

    @api.post("/go/api/elastic/profiles")
    def create_elastic_profile() -> Response:
        entity = request.get_json(force=True)
        with state.lock:
            if entity["id"] in state.elastic_profiles:
                return _message(422, f"Failed to add elastic agent profile '{entity['id']}'. Another "
                                     "elastic agent profile with the same name already exists.")  # fmt: skip
            if entity.get("cluster_profile_id") not in state.cluster_profiles:
                return _invalid("elasticProfile", entity, [{
                    "key": "cluster_profile_id",
                    "message": "No Cluster Profile exists with the specified cluster_profile_id "
                               f"'{entity.get('cluster_profile_id')}'.",
                }])  # fmt: skip
            errors = validation.validate_elastic_profile(_properties(entity))
            if errors:
                return _invalid("elasticProfile", entity, errors)
            state.elastic_profiles[entity["id"]] = entity
        return _json(entity)

    @api.get("/go/api/admin/pipeline_groups")
    def pipeline_groups() -> Response:
        with state.lock:
            groups: dict[str, list[dict[str, str]]] = {}
            for name, pipeline in state.pipelines.items():
                groups.setdefault(pipeline["group"], []).append({"name": name})
        listed = [{"name": group, "pipelines": pipelines} for group, pipelines in groups.items()]
        body = json.dumps({"_links": {}, "_embedded": {"groups": listed}}, indent=2)
        return Response(body, status=200, content_type=f"{MEDIA_TYPE}.v1+json; charset=utf-8")

    @api.get("/go/api/admin/pipelines/<name>")
    def pipeline(name: str) -> Response:
        return one(lambda: state.pipelines, name)

    @api.post("/go/api/admin/pipelines")
    def create_pipeline() -> Response:
        body = request.get_json(force=True)
        if not body.get("group"):
            return _message(422, "Pipeline group must be specified for creating a pipeline.")
        entity = body["pipeline"]
        with state.lock:
            if entity["name"] in state.pipelines:
                return _message(422, f"Failed to add pipeline '{entity['name']}'. Another pipeline with "
                                     "the same name already exists.")  # fmt: skip
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
