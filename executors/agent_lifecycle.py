"""create-agent, should-assign-work and job-completion: the life of one agent pod."""

from __future__ import annotations

import logging
import re

from elastic_agent.gocd.known_server import NoServerUrl
from elastic_agent.gocd.messages import CreateAgentRequest, JobCompletionRequest, ShouldAssignWorkRequest
from elastic_agent.gocd.server import GoCDError
from elastic_agent.kube.port import ClusterError, Unreachable
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.remote_file import RemoteFileError
from executors.base import Incident, RequestContext, Response, new_incident
from profiles.errors import ProfileError

log = logging.getLogger(__name__)

# The API server names the refused object ('pods "k8s-ea-0001" is forbidden: exceeded quota ...'); the
# health message is about the refusal, not the pod, and must read the same at every re-send.
_POD_NAME = re.compile(r'\bpods? "[^"]*"')

# Responses are immutable: the two answers of the most frequent request are built once.
_TRUE, _FALSE = Response.text("true"), Response.text("false")


def create_agent(body: str, ctx: RequestContext) -> Response:
    return create_agent_request(CreateAgentRequest.parse(body), ctx)


def create_agent_request(request: CreateAgentRequest, ctx: RequestContext) -> Response:
    """create-agent on a parsed request (the in-process simulations call this directly)."""
    cluster = request.cluster
    backend = ctx.backend
    gocd = ctx.gocd()
    try:
        spec = backend.spec(
            request.elastic_profile, cluster, request.environment, request.job.pipeline_name, gocd=gocd
        )
        pool = backend.pool(cluster, gocd)
        if backend.forecast.scheduled(request.job, spec, pool.identity.cluster):
            pool.in_background("reading what prediction learned", lambda: backend.forecast.load(pool))
        outcome = pool.create_agent(request.job, spec, request.auto_register_key, gocd)
    except ClusterError as error:
        if not isinstance(error, Unreachable):  # an outage has its one message (kube/outage.py)
            message = f"Creating agent pods fails: {_POD_NAME.sub('a pod', str(error))}"
            # One streak per status: GoCD re-sends create-agent for every waiting job every 2 minutes,
            # and a quota or RBAC refusal is logged and shown once, not once per re-send.
            if not backend.report_cluster_problem(cluster, message, "create", streak=error.status):
                error.repeated = True
        ctx.console(request.job, f"could not create an agent pod: {error}")
        raise
    except (ProfileError, RemoteFileError) as error:  # sentences written for people, without secrets
        # A blank go_server_url GoCD has no usable URL for is told at every re-send; server-ping also
        # shows it in GoCD's health messages (server_ping._report_server_url).
        ctx.console(request.job, f"could not create an agent pod: {error}")
        raise
    except GoCDError:
        raise  # GoCD itself cannot be reached: no console to write to
    except Exception as error:
        values = (request.auto_register_key, request.elastic_profile, request.cluster_profile)
        incident = new_incident("create-agent", values)
        text = f"could not create an agent pod: an unexpected error (incident {incident} in the backend log)"
        ctx.console(request.job, text)
        raise Incident(incident) from error
    if outcome.created is not None and backend.report_cluster_ok(cluster, "create"):
        log.info("creating agent pods works again")
    backend.narrator.decision(f"job {request.job.label}: {outcome.message}")
    ctx.console(request.job, outcome.message)
    if outcome.created is None and spec.wants_warm_pods:
        pool.top_up_warm_pool()
    return Response.text("")


def should_assign_work(body: str, ctx: RequestContext) -> Response:
    return should_assign_work_request(ShouldAssignWorkRequest.parse(body), ctx)


def should_assign_work_request(request: ShouldAssignWorkRequest, ctx: RequestContext) -> Response:
    cluster = request.cluster
    backend = ctx.backend
    gocd = ctx.gocd()
    job = request.job
    try:  # never waits: a remote template never fetched yet is fetched in the background meanwhile
        spec = backend.spec(
            request.elastic_profile, cluster, request.environment, job.pipeline_name, request.spec_key,
            wait=False,
        )  # fmt: skip
    except (RemoteFileError, NoServerUrl):
        # A template being fetched, or a blank go_server_url GoCD has no usable URL for (or was not
        # asked for yet): no pod of this spec can be waiting for the job.
        return _FALSE
    pool = backend.pool_at_once(cluster, gocd)  # never waits: no pool yet, no pod it knows
    answer = pool is not None and pool.should_assign_work(request.agent.agent_id, job, spec, gocd)
    if answer and spec.predict:
        ahead = backend.forecast.assigned(request.agent.agent_id, job)
        if ahead is not None:
            ctx.console(job, ahead)
    return _TRUE if answer else _FALSE


def job_completion(body: str, ctx: RequestContext) -> Response:
    return job_completion_request(JobCompletionRequest.parse(body), ctx)


def job_completion_request(request: JobCompletionRequest, ctx: RequestContext) -> Response:
    """Never waits on the network: GoCD sends it once, from the thread that completed the job."""
    cluster = request.cluster
    backend = ctx.backend
    gocd = ctx.gocd()

    def complete(pool: ClusterPool) -> str:
        record = pool.record(request.agent_id)
        environment = record.environment if record else None
        try:
            spec: JobSpec | None = backend.spec(
                request.elastic_profile, cluster, environment, request.job.pipeline_name, wait=False
            )
        except (RemoteFileError, NoServerUrl):
            spec = None  # the template is being fetched, or GoCD's site URL is unknown: the pod decides
        said = pool.job_completed(request.agent_id, request.job, spec, gocd)
        # The last job of a stage completing is the best sign that the next one is near.
        if (spec is None or spec.predict) and backend.forecast.completed(request.job, spec):
            pool.in_background("starting pods ahead of a predicted stage", lambda: backend.forecast.act(pool))
        return said

    pool = backend.pool_at_once(cluster, gocd, then=complete)
    message = complete(pool) if pool is not None else "the cluster is being connected; it counts then"
    backend.narrator.decision(f"job-completion of {request.job.label} on {request.agent_id}: {message}")
    return Response.text("")
