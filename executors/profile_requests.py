"""Profile metadata, views, validation and config migration."""

from __future__ import annotations

import json
from typing import Any

from elastic_agent.messages import BadRequest, Body
from executors.base import RequestContext, Response
from profiles import metadata, validation, views


def cluster_profile_metadata(body: str, ctx: RequestContext) -> Response:
    return Response.json(metadata.cluster_profile_metadata())


def elastic_profile_metadata(body: str, ctx: RequestContext) -> Response:
    return Response.json(metadata.elastic_profile_metadata())


def cluster_profile_view(body: str, ctx: RequestContext) -> Response:
    return Response.json({"template": views.cluster_profile_view()})


def elastic_profile_view(body: str, ctx: RequestContext) -> Response:
    return Response.json({"template": views.elastic_profile_view()})


def validate_cluster_profile(body: str, ctx: RequestContext) -> Response:
    return Response.json(validation.validate_cluster_profile(_flat(body, "validate-cluster-profile")))


def validate_elastic_profile(body: str, ctx: RequestContext) -> Response:
    return Response.json(validation.validate_elastic_profile(_flat(body, "validate-elastic-agent-profile")))


def _flat(text: str, where: str) -> dict[str, Any]:
    # Validation reports bad values itself; only a body that is not an object is a bad request.
    return dict(Body.parse(text, where).data)


def migrate_config(body: str, ctx: RequestContext) -> Response:
    """Echo the configuration; the one real migration is the legacy `SpecifiedUsingPodConfiguration`
    flag, which becomes `PodSpecType` (what the official plugin's users bring with them)."""
    data = dict(Body.parse(body, "migrate-config").data)
    for key, default in (("plugin_settings", {}), ("cluster_profiles", []), ("elastic_agent_profiles", [])):
        data.setdefault(key, default)
    profiles = data["elastic_agent_profiles"]
    if not isinstance(profiles, list):
        raise BadRequest("migrate-config: 'elastic_agent_profiles' must be a list.")
    if not isinstance(data["cluster_profiles"], list):
        raise BadRequest("migrate-config: 'cluster_profiles' must be a list.")
    for profile in profiles:
        if not isinstance(profile, dict):
            raise BadRequest("migrate-config: every elastic agent profile must be an object.")
        properties = profile.get("properties")
        if isinstance(properties, dict) and not properties.get("PodSpecType"):
            legacy = str(properties.get("SpecifiedUsingPodConfiguration") or "").strip().lower()
            if legacy in ("true", "false"):
                properties["PodSpecType"] = "yaml" if legacy == "true" else "properties"
    return Response(200, json.dumps(data))
