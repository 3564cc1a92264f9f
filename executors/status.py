"""Status reports: plugin, cluster and agent pages as HTML views."""

from __future__ import annotations

from elastic_agent.gocd.messages import (
    AgentStatusReportRequest,
    ClusterStatusReportRequest,
    PluginStatusReportRequest,
)
from elastic_agent.gocd.status_pages import render_agent_status, render_cluster_status, render_plugin_status
from executors.base import RequestContext, Response


def plugin_status_report(body: str, ctx: RequestContext) -> Response:
    # The body lists the cluster profiles; the page shows the clusters this backend is connected to.
    PluginStatusReportRequest.parse(body)
    backend = ctx.backend
    return Response.json(
        {"view": render_plugin_status(backend.pools(), backend.health.messages(), backend.clock)}
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
