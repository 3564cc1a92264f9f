"""server-ping: reconcile every cluster with GoCD's list of agents, then remove agents without a pod."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from elastic_agent.gocd.messages import Agent, ServerPingRequest, cluster_profile
from elastic_agent.gocd.server import GoCDError
from elastic_agent.kube.port import ClusterError, Forbidden
from executors.base import RequestContext, Response
from profiles.cluster import ClusterProfile
from profiles.errors import ProfileError
from profiles.values import safe_url

log = logging.getLogger(__name__)
CALL_KINDS = ("write", "delete")  # pool.state.PROBLEMS


def server_ping(body: str, ctx: RequestContext) -> Response:
    return server_ping_request(ServerPingRequest.parse(body), ctx)


def server_ping_request(request: ServerPingRequest, ctx: RequestContext) -> Response:
    """server-ping on a parsed request (the simulator's fast path calls this directly)."""
    backend = ctx.backend
    gocd = ctx.gocd()
    marks = backend.change_marks()  # before the list: a change made after it is newer than the list
    agents = {agent.agent_id: agent for agent in gocd.list_agents()}
    every_cluster_seen = True
    for index, properties in enumerate(request.cluster_profiles):
        try:
            cluster = cluster_profile(properties)
        except ProfileError as error:
            backend.health.problem(
                f"profile:{index}", f"A cluster profile of this plugin is invalid: {error}"
            )
            every_cluster_seen = False
            continue
        backend.health.resolved(f"profile:{index}")
        try:
            pool = backend.pool(cluster, gocd)
            problem = pool.sync_problem()
            if problem is not None:
                raise problem
            pool.reconcile(agents, gocd, marks.get(pool, 0))
            backend.report_cluster_ok(cluster)
            _report_call_problems(ctx, cluster, pool.problems())
        except ClusterError as error:
            every_cluster_seen = False
            what = (
                "refuses this plugin's credentials" if isinstance(error, Forbidden) else "cannot be reached"
            )
            backend.report_cluster_problem(cluster, f"{_where(cluster)} {what}: {error}")
    if every_cluster_seen and all(pool.synced for pool in backend.pools()):
        _remove_agents_without_pods(ctx, agents)
    backend.report_template_problems()
    backend.publish_health(gocd)
    return Response.text("")


def _where(cluster: ClusterProfile) -> str:
    """The cluster as GoCD's health messages name it: its URL without user info or query."""
    url = safe_url(cluster.kubernetes_cluster_url) if cluster.kubernetes_cluster_url else "(in-cluster)"
    return f"The Kubernetes cluster {url} namespace {cluster.namespace}"


def _report_call_problems(ctx: RequestContext, cluster: ClusterProfile, problems: Mapping[str, str]) -> None:
    """Writes and deletions the cluster refuses (an RBAC rule missing, a quota, an admission webhook)
    show in GoCD until they work again; the watch's problems are reported above."""
    where = _where(cluster)
    for what in CALL_KINDS:
        if what in problems:
            ctx.backend.report_cluster_problem(cluster, f"{where}: {problems[what]}", what)
        else:
            ctx.backend.report_cluster_ok(cluster, what)


def _remove_agents_without_pods(ctx: RequestContext, agents: Mapping[str, Agent]) -> None:
    known: set[str] = set()
    for pool in ctx.backend.pools():
        known |= pool.known_pod_names()
    orphans = [agent for agent_id, agent in agents.items() if agent_id not in known]
    if not orphans:
        return
    # GoCD deletes only disabled agents that are not building; a building one goes at a later ping.
    deletable = [agent.agent_id for agent in orphans if not agent.building]
    gocd = ctx.gocd()
    try:
        gocd.disable_agents(agent.agent_id for agent in orphans)
        gocd.delete_agents(deletable)
    except GoCDError as error:
        log.warning("could not remove the agents of %d pods that are gone: %s", len(orphans), error)
        return
    for agent_id in deletable:
        log.info("removed agent %s: its pod is gone", agent_id)
    for agent in orphans:
        if agent.building:
            log.info(
                "disabled agent %s: its pod is gone; it is removed once it stops building", agent.agent_id
            )
