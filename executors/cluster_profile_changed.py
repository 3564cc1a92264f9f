"""cluster-profile-changed (undocumented): GoCD tells which cluster profile was created, updated or
deleted. Pools pick up new settings at the next request anyway; a deleted profile's pods are left to the
pings of the profiles that remain (they never touch another cluster's pods) and to the administrator."""

from __future__ import annotations

import logging

from elastic_agent.messages import BadRequest, Body
from executors.base import RequestContext, Response

log = logging.getLogger(__name__)


def cluster_profile_changed(body: str, ctx: RequestContext) -> Response:
    parsed = Body.parse(body, "cluster-profile-changed")
    status = parsed.string("status")
    if status not in ("created", "updated", "deleted"):
        raise BadRequest("cluster-profile-changed: 'status' must be created, updated or deleted.")
    log.info("a cluster profile was %s", status)
    return Response.text("")
