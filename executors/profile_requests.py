"""Profile metadata, views, validation and config migration."""

from __future__ import annotations

import logging

from elastic_agent.gocd.messages import MigrateConfigRequest, ValidateProfileRequest
from elastic_agent.gocd.server import GoCDError
from elastic_agent.kube.connect import NO_CLUSTER, can_connect_without_url
from executors.base import RequestContext, Response
from profiles import metadata, validation, views
from profiles.errors import ProfileError
from profiles.server_url import pods_server_url

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)


def cluster_profile_metadata(body: str, ctx: RequestContext) -> Response:
    return Response.json(metadata.cluster_profile_metadata())


def elastic_profile_metadata(body: str, ctx: RequestContext) -> Response:
    return Response.json(metadata.elastic_profile_metadata())


def cluster_profile_view(body: str, ctx: RequestContext) -> Response:
    return Response.json({"template": views.cluster_profile_view()})


def elastic_profile_view(body: str, ctx: RequestContext) -> Response:
    return Response.json({"template": views.elastic_profile_view()})


def validate_cluster_profile(body: str, ctx: RequestContext) -> Response:
    values = ValidateProfileRequest.parse(body, "validate-cluster-profile").values
    problems = validation.validate_cluster_profile(values)
    # The profile alone cannot tell whether a blank URL works: that depends on where the backend runs.
    if (
        _blank(values.get("kubernetes_cluster_url"))
        and not can_connect_without_url()
        and not any(p["key"] == "kubernetes_cluster_url" for p in problems)
    ):
        problems.append({"key": "kubernetes_cluster_url", "message": NO_CLUSTER})
    if _blank(values.get("go_server_url")) and not any(p["key"] == "go_server_url" for p in problems):
        problem = _site_url_problem(ctx)
        if problem is not None:
            problems.append({"key": "go_server_url", "message": problem})
    return Response.json(problems)


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _site_url_problem(ctx: RequestContext) -> str | None:
    """What is wrong with the URL a blank go_server_url stands for, GoCD's secure site URL, asked now (an
    administrator may just have set it); None when it is usable. The official plugin refuses the blank
    at this point too when GoCD has no secure site URL. When GoCD cannot be asked, the profile is not
    refused for it: server-ping and create-agent say so once it is used."""
    try:
        info = ctx.backend.server.refresh(ctx.gocd())
        pods_server_url(info.secure_site_url, info.site_url)
    except ProfileError as error:
        return error.message
    except GoCDError as error:
        log.warning("could not ask GoCD for its secure site URL to check a blank go_server_url: %s", error)
    return None


def validate_elastic_profile(body: str, ctx: RequestContext) -> Response:
    values = ValidateProfileRequest.parse(body, "validate-elastic-agent-profile").values
    return Response.json(validation.validate_elastic_profile(values))


def migrate_config(body: str, ctx: RequestContext) -> Response:
    """Echo the configuration; the one real migration is the legacy `SpecifiedUsingPodConfiguration`
    flag, which becomes `PodSpecType` (what the official plugin's users bring with them).

    GoCD sends it whenever it loads the plugin, that is when the server starts (gocd/gocd's
    `ElasticAgentInformationMigratorImpl`, a plugin post-load hook): the server has forgotten every
    registration key it issued before (`EphemeralAutoRegisterKeyService` keeps them in memory), so the
    banked ones go, and with them what refusals and registrations taught of the keys' lifetime (the
    server may have been restarted with another one: the remedy the refusal's message gives)."""
    request = MigrateConfigRequest.parse(body)
    dropped = ctx.backend.server_started()
    if dropped:
        log.info("GoCD loaded the plugin, so it has just started: %d banked registration keys it has "
                 "forgotten were dropped", dropped)  # fmt: skip
    for profile in request.elastic_agent_profiles:
        properties = profile.get("properties")
        if isinstance(properties, dict) and not properties.get("PodSpecType"):
            legacy = str(properties.get("SpecifiedUsingPodConfiguration") or "").strip().lower()
            if legacy in ("true", "false"):
                properties["PodSpecType"] = "yaml" if legacy == "true" else "properties"
    return Response.json(request.data)
