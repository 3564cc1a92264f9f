"""cluster-profile-changed (undocumented): GoCD tells which cluster profile was created, updated or
deleted. Nothing is done here: pools pick up new settings at the next request, and the next server-ping,
which carries every cluster profile there is, retires the pods of a pool whose profile is gone, with
their agents, busy pods once their job is over (executors/server_ping.py). After a restart such pods are
unwatched: their agents are kept and named in a health message (pool/agents_without_pods.py)."""

from __future__ import annotations

import logging

from elastic_agent.gocd.messages import ClusterProfileChangedRequest
from executors.base import RequestContext, Response

log = logging.getLogger(__name__)


def cluster_profile_changed(body: str, ctx: RequestContext) -> Response:
    request = ClusterProfileChangedRequest.parse(body)
    log.info("a cluster profile was %s", request.status)
    return Response.text("")
