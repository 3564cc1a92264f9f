"""cluster-profile-changed (undocumented): GoCD tells which cluster profile was created, updated or
deleted. Pools pick up new settings at the next request anyway; a deleted profile's pods are left to the
pings of the profiles that remain (they never touch another cluster's pods) and to the administrator."""

from __future__ import annotations

import logging

from elastic_agent.gocd.messages import ClusterProfileChangedRequest
from executors.base import RequestContext, Response

log = logging.getLogger(__name__)


def cluster_profile_changed(body: str, ctx: RequestContext) -> Response:
    request = ClusterProfileChangedRequest.parse(body)
    log.info("a cluster profile was %s", request.status)
    return Response.text("")
