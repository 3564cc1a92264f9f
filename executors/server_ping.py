"""server-ping: reconcile every cluster with GoCD's list of agents; retire the pods of clusters whose
profile is gone; then remove the agents whose pods are gone (pool/agents_without_pods.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from elastic_agent.gocd.messages import Agent, ServerPingRequest, cluster_profile
from elastic_agent.gocd.server import GoCDError
from elastic_agent.kube.port import ClusterError, Forbidden
from elastic_agent.pool import key_health
from elastic_agent.pool.agents_without_pods import agents_without_pods
from elastic_agent.pool.applier import remove_agents
from elastic_agent.pool.broken_pods import clock_time
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.pods import cluster_label
from executors.base import RequestContext, Response
from profiles.cluster import ClusterProfile
from profiles.errors import ProfileError
from profiles.values import safe_url

log = logging.getLogger(__name__)
CALL_KINDS = ("write", "delete")  # pool.state.PROBLEMS
AGENTS_KEPT = "agents:without-pods"  # the health message of agents_without_pods.AgentRemoval.warning
SERVER_URL = "server-url:"  # health messages of clusters whose blank go_server_url has no usable URL


def server_ping(body: str, ctx: RequestContext) -> Response:
    return server_ping_request(ServerPingRequest.parse(body), ctx)


def server_ping_request(request: ServerPingRequest, ctx: RequestContext) -> Response:
    """server-ping on a parsed request (the in-process simulations call this directly)."""
    backend = ctx.backend
    gocd = ctx.gocd()
    marks = backend.change_marks()  # before the list: a change made after it is newer than the list
    agents = {agent.agent_id: agent for agent in gocd.list_agents()}
    every_cluster_seen = True
    every_profile_read = True
    named: set[str] = set()  # the clusters the ping names (pool keys), whether or not they answer
    read: list[ClusterProfile] = []
    for index, properties in enumerate(request.cluster_profiles):
        try:
            cluster = cluster_profile(properties)
        except ProfileError as error:
            backend.health.problem(
                f"profile:{index}", f"A cluster profile of this plugin is invalid: {error}"
            )
            every_cluster_seen = every_profile_read = False
            continue
        backend.health.resolved(f"profile:{index}")
        read.append(cluster)
        named.add(cluster_label(cluster.cluster_key))
        try:
            pool = backend.pool(cluster, gocd, current=True)  # the ping's profiles are today's
            problem = pool.sync_problem()
            if problem is not None:
                raise problem
            pool.reconcile(agents, gocd, marks.get(pool, 0))
            backend.forecast.act(pool)
            # At most one write a ping, and only when something was learned.
            saving = backend.forecast.save(pool)
            if saving is None:
                backend.health.resolved(f"predict:{cluster.cluster_key}")
            else:
                backend.health.problem(f"predict:{cluster.cluster_key}", saving, "warning")
            backend.report_cluster_ok(cluster)
            _report_call_problems(ctx, cluster, pool.problems())
            _report_broken_pods(ctx, cluster, pool)
            key_health.report(backend.health, cluster, _where(cluster), pool.state)
        except ClusterError as error:
            every_cluster_seen = False
            backend.report_cluster_problem(cluster, _unreachable(cluster, error))
    _report_server_url(ctx, read)
    if every_profile_read:  # an unreadable profile may be the one an unpinged pool belongs to
        _wind_down_orphaned_pools(ctx, named, agents, marks)
    backend.size_key_bank()  # a refusal may have shortened what a pool uses
    if every_cluster_seen and all(pool.synced for pool in backend.pools()):
        _remove_agents_without_pods(ctx, agents)
    backend.report_template_problems()
    backend.report_schedule_warnings()
    backend.report_versions()
    backend.publish_health(gocd)
    return Response.text("")


def _report_server_url(ctx: RequestContext, clusters: list[ClusterProfile]) -> None:
    """A blank go_server_url stands for GoCD's secure site URL, which an administrator may change or
    remove at any time: while some profile leaves it blank, GoCD is asked again at every ping (new pods
    take the new URL from then on, under a new fingerprint), and a cluster whose pods could not register
    (GoCD has no secure site URL, or one agents refuse) is shown in GoCD's health messages until it can;
    each of its jobs says the same in its console at create-agent."""
    backend = ctx.backend
    failing: set[str] = set()
    blank = [cluster for cluster in clusters if not cluster.go_server_url]
    if blank:
        try:
            backend.server.refresh(ctx.gocd())
        except GoCDError as error:
            log.warning("could not ask GoCD for its site URLs (the last ones known are used): %s", error)
    for cluster in blank:
        try:
            backend.server.pods_url(cluster, None)
        except ProfileError as error:
            key = SERVER_URL + cluster.cluster_key
            failing.add(key)
            message = f"{_where(cluster)}: no agent pod can be created: go_server_url is {error.message}"
            backend.health.problem(key, message)
    for key in backend.health.keys(SERVER_URL) - failing:
        backend.health.resolved(key)


def _unreachable(cluster: ClusterProfile, error: ClusterError) -> str:
    what = "refuses this plugin's credentials" if isinstance(error, Forbidden) else "cannot be reached"
    return f"{_where(cluster)} {what}: {error}"


def _wind_down_orphaned_pools(
    ctx: RequestContext,
    named: set[str],
    agents: Mapping[str, Agent],
    marks: Mapping[ClusterPool, int],
) -> None:
    """Pools whose cluster profile the ping no longer carries (GoCD's `ElasticAgentPluginService.heartbeat`
    sends every cluster profile of the plugin, an empty list when none is left): their pods retire with
    their agents, and the pool goes once it has none. A pool is orphaned by its cluster's absence from
    the ping, not by a failure to reach it: new credentials that cannot connect leave the pool as it is."""
    backend = ctx.backend
    gocd = ctx.gocd()
    for pool in backend.pools():
        if pool.identity.cluster in named:
            continue
        cluster = pool.settings
        try:
            problem = pool.sync_problem()
            if problem is not None:
                raise problem
            pool.wind_down(agents, gocd, marks.get(pool, 0))
            backend.report_cluster_ok(cluster)
        except ClusterError as error:
            backend.report_cluster_problem(
                cluster, f"{_unreachable(cluster, error)} (its cluster profile is gone; its pods still run)"
            )
            continue
        if pool.is_empty():
            for what in CALL_KINDS:
                backend.report_cluster_ok(cluster, what)
            backend.drop_pool(pool)


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


def broken_key(cluster: ClusterProfile, fingerprint: str = "") -> str:
    """The health message's key of a fingerprint held for broken pods (all of the cluster's: none)."""
    return f"pods:broken:{cluster.cluster_key}:{fingerprint}"


def _report_broken_pods(ctx: RequestContext, cluster: ClusterProfile, pool: ClusterPool) -> None:
    """One message per fingerprint held for broken pods (pool/holds.py); it goes once the fingerprint's
    pods register again (or nobody asks for it any more)."""
    health = ctx.backend.health
    held: set[str] = set()
    for hold in pool.holds():
        key = broken_key(cluster, hold.fingerprint)
        held.add(key)
        message = (
            f"{_where(cluster)}: pods of an elastic profile cannot start ({hold.failures} in a row, the "
            f"latest {hold.pod}): {hold.reason}. No more pods of that profile are created before "
            f"{clock_time(hold.next_try_at)}; then one is tried, or at once when the profile is changed"
        )
        health.problem(key, message, streak=(hold.failures, hold.since))
    for key in health.keys(broken_key(cluster)) - held:
        health.resolved(key)


def _remove_agents_without_pods(ctx: RequestContext, agents: Mapping[str, Agent]) -> None:
    known: set[str] = set()
    gone: set[str] = set()
    for pool in ctx.backend.pools():
        known |= pool.known_pod_names()
        gone |= pool.gone_recently()
    removal = agents_without_pods(agents, known, gone)
    remove_agents(removal.remove, ctx.gocd())
    warning = removal.warning()
    if warning is None:
        ctx.backend.health.resolved(AGENTS_KEPT)
    else:
        ctx.backend.health.problem(AGENTS_KEPT, warning, "warning")
