"""Status reports: plugin, cluster and agent pages as HTML views."""

from __future__ import annotations

from elastic_agent.gocd.messages import (
    AgentStatusReportRequest,
    ClusterStatusReportRequest,
    PluginStatusReportRequest,
)
from elastic_agent.gocd.versions import HEALTH_KEY as VERSION_HEALTH_KEY
from elastic_agent.status.agent import render_agent_status
from elastic_agent.status.pages import render_cluster_status, render_plugin_status
from executors.base import RequestContext, Response


def plugin_status_report(body: str, ctx: RequestContext) -> Response:
    # The body lists the cluster profiles; the page shows the clusters this backend is connected to.
    PluginStatusReportRequest.parse(body)
    backend = ctx.backend
    # The versions' difference, if any, is shown at the top, from this very request's header: not again
    # among the health messages (where the last server-ping put it).
    health = backend.health.messages(without=(VERSION_HEALTH_KEY,))
    versions = backend.versions.current()
    rows = backend.forecast.rows()
    return Response.json(
        {"view": render_plugin_status(backend.pools(), health, backend.clock, versions, rows)}
    )


def cluster_status_report(body: str, ctx: RequestContext) -> Response:
    request = ClusterStatusReportRequest.parse(body)
    pool = ctx.backend.known_pool(request.cluster)
    return Response.json({"view": render_cluster_status(pool, ctx.backend.clock)})


def agent_status_report(body: str, ctx: RequestContext) -> Response:
    request = AgentStatusReportRequest.parse(body)
    pool = ctx.backend.known_pool(request.cluster)
    job_id = request.job.job_id if request.job else None
    return Response.json({"view": render_agent_status(pool, request.agent_id, job_id, ctx.backend.clock)})
