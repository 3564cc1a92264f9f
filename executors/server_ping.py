"""server-ping: reconcile every cluster with GoCD's list of agents, then remove agents without a pod."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from elastic_agent.backend import cluster_profile
from elastic_agent.gocd import Agent, GoCDError
from elastic_agent.kube.port import ClusterError, Forbidden
from elastic_agent.messages import ServerPingRequest
from elastic_agent.reaper import reconcile
from executors.base import RequestContext, Response
from profiles.errors import ProfileError

log = logging.getLogger(__name__)


def server_ping(body: str, ctx: RequestContext) -> Response:
    request = ServerPingRequest.parse(body)
    backend = ctx.backend
    gocd = ctx.gocd()
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
            if pool.port.last_error is not None:
                raise pool.port.last_error
            for line in reconcile(pool, agents, gocd):
                log.info("%s", line)
            backend.report_cluster_ok(cluster)
        except ClusterError as error:
            every_cluster_seen = False
            what = (
                "refuses this plugin's credentials" if isinstance(error, Forbidden) else "cannot be reached"
            )
            backend.report_cluster_problem(
                cluster,
                f"The Kubernetes cluster {cluster.kubernetes_cluster_url or '(in-cluster)'} namespace "
                f"{cluster.namespace} {what}: {error}",
            )
    if every_cluster_seen and all(pool.port.wait_synced(0) for pool in backend.pools()):
        _remove_agents_without_pods(ctx, agents)
    backend.publish_health(gocd)
    return Response.text("")


def _remove_agents_without_pods(ctx: RequestContext, agents: Mapping[str, Agent]) -> None:
    known: set[str] = set()
    for pool in ctx.backend.pools():
        known |= pool.known_pod_names()
    orphans = [agent for agent_id, agent in agents.items() if agent_id not in known]
    if not orphans:
        return
    gocd = ctx.gocd()
    try:
        gocd.disable_agents(agent.agent_id for agent in orphans)
        # GoCD deletes only disabled agents that are not building; a building one goes at a later ping.
        gocd.delete_agents(agent.agent_id for agent in orphans if not agent.building)
    except GoCDError as error:
        log.warning("could not remove agents without pods: %s", error)
    for agent in orphans:
        log.info("removed agent %s: its pod is gone", agent.agent_id)
