"""create-agent, should-assign-work and job-completion: the life of one agent pod."""

from __future__ import annotations

import logging

from elastic_agent.kube.port import ClusterError
from elastic_agent.messages import CreateAgentRequest, JobCompletionRequest, ShouldAssignWorkRequest
from executors.base import RequestContext, Response
from profiles.cluster import ClusterProfile
from profiles.elastic import ElasticProfile
from profiles.pod_template import render_pod_template

log = logging.getLogger(__name__)


def create_agent(body: str, ctx: RequestContext) -> Response:
    request = CreateAgentRequest.parse(body)
    cluster = ClusterProfile.from_properties(request.cluster_profile)
    elastic = ElasticProfile.from_properties(request.elastic_profile)
    gocd = ctx.gocd()
    try:
        pool = ctx.backend.pool(cluster, gocd)
        template = render_pod_template(elastic, ctx.backend.remote_files.fetch)
        outcome = pool.create_agent(request, template, reuse=elastic.reuse)
    except ClusterError as error:
        ctx.backend.report_cluster_problem(cluster, f"Creating agent pods fails: {error}")
        ctx.console(request.job, f"could not create an agent pod: {error}")
        raise
    except Exception as error:
        ctx.console(request.job, f"could not create an agent pod: {error}")
        raise
    ctx.backend.report_cluster_ok(cluster)
    log.info("create-agent for job %s: %s", request.job.job_id, outcome.message)
    if outcome.created is not None or outcome.message.startswith("waiting"):
        ctx.console(request.job, outcome.message)
    return Response.text("")


def should_assign_work(body: str, ctx: RequestContext) -> Response:
    request = ShouldAssignWorkRequest.parse(body)
    cluster = ClusterProfile.from_properties(request.cluster_profile)
    pool = ctx.backend.known_pool(cluster)
    # A pool we have never connected to has no pods of ours: nothing can take the job.
    answer = pool is not None and pool.should_assign_work(request.agent.agent_id, request.job)
    return Response.text("true" if answer else "false")


def job_completion(body: str, ctx: RequestContext) -> Response:
    request = JobCompletionRequest.parse(body)
    cluster = ClusterProfile.from_properties(request.cluster_profile)
    gocd = ctx.gocd()
    pool = ctx.backend.pool(cluster, gocd)
    message = pool.job_completed(request.agent_id, request.job, gocd)
    log.info("job-completion of job %s on %s: %s", request.job.job_id, request.agent_id, message)
    return Response.text("")
