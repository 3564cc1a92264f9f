"""A deleted (or renamed) cluster profile ends its agents and its pods together: never an agent removed
while its pod runs on unwatched, after a restart included.

Modelled on gocd/gocd: `ElasticAgentPluginService.heartbeat` (server/src/main/java/com/thoughtworks/go/
server/service/ElasticAgentPluginService.java) pings each plugin with the cluster profiles that exist
then, an empty list when none is left; `jobCompleted` there sends the cluster profile of the job's plan,
so a job running when its profile goes still completes; `AgentInstance.refresh` (server/src/main/java/
com/thoughtworks/go/domain/AgentInstance.java) marks an agent LostContact once it has not been heard
from for the contact timeout, which the simulated server models (`lost_contact_after_s`).
"""

from __future__ import annotations

from collections.abc import Iterable

from elastic_agent.clock import Clock
from elastic_agent.kube.connect import ConnectError
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool.pods import PodIdentity
from profiles.cluster import ClusterProfile
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule, state
from tests.support.virtual_helpers import assigned, completed, run_to_idle, virtual_stack


def watch_agent_deletions(stack: VirtualStack) -> list[str]:
    """Every agent GoCD deletes while its pod runs and is not being deleted (GoCD deletes agents the
    plugin asks it to; the pod must be on its way out first)."""
    wrong: list[str] = []
    delete = stack.gocd.delete_agents

    def checked(agent_ids: Iterable[str]) -> list[str]:
        deleted = delete(agent_ids)
        running = {
            pod["metadata"]["name"] for pod in stack.pods() if not pod["metadata"].get("deletionTimestamp")
        }
        wrong.extend(agent_id for agent_id in deleted if agent_id in running)
        return deleted

    stack.gocd.delete_agents = checked  # type: ignore[method-assign]
    return wrong


def agent_ids(stack: VirtualStack) -> set[str]:
    return {agent.agent_id for agent in stack.gocd.agents()}


def one_ping(stack: VirtualStack) -> None:
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: stack.gocd.stats.pings_sent > pings, 120, "a server-ping")
    stack.run_for(1)


def health(stack: VirtualStack) -> str:
    return " ".join(message.message for message in stack.gocd.health_messages)


def test_a_deleted_cluster_profile_retires_idle_pods_at_the_next_ping_and_a_busy_pod_after_its_job() -> None:
    stack = virtual_stack(boot_delay=5, get_work_delay_s=10.0, get_work_interval_s=10.0)
    profile = reuse_profile(stack, IdleTimeout="60m")
    long_job = schedule(stack, profile, duration=400, name="long")
    idle = run_to_idle(stack, schedule(stack, profile, duration=10))
    busy_job = assigned(stack, long_job)
    busy = busy_job.agent_id
    assert busy is not None and busy != idle and state(stack, busy) == "busy"

    wrong = watch_agent_deletions(stack)
    stack.gocd.delete_cluster_profile(stack.cluster_profile())
    one_ping(stack)
    stack.run_for(30)  # the idle pod's grace period
    assert idle not in pod_names(stack) and idle not in agent_ids(stack), "the idle pod went with its agent"
    assert busy in pod_names(stack) and busy in agent_ids(stack), "the busy pod and its agent stay"
    assert state(stack, busy) == "busy"

    completed(stack, busy_job)
    one_ping(stack)
    stack.run_for(30)
    assert busy not in pod_names(stack) and busy not in agent_ids(stack)
    assert stack.backend.pools() == [], "a pool with no profile and no pods is dropped"
    assert wrong == [], "no agent removed while its pod ran"
    assert stack.gocd.invariant_violations() == []


def test_a_renamed_namespace_retires_the_old_namespaces_pods_while_the_new_one_serves_jobs() -> None:
    stack = virtual_stack(boot_delay=5, get_work_delay_s=10.0, get_work_interval_s=10.0)
    profile = reuse_profile(stack, IdleTimeout="60m")
    old = run_to_idle(stack, schedule(stack, profile, duration=10))
    renamed = stack.cluster_profile(namespace="ci-new")
    wrong = watch_agent_deletions(stack)
    stack.gocd.edit_cluster_profile(stack.cluster_profile(), renamed)
    one_ping(stack)
    stack.run_for(30)
    assert old not in pod_names(stack) and old not in agent_ids(stack)
    job = completed(stack, schedule(stack, profile, cluster=renamed, duration=10))
    assert job.agent_id is not None and job.agent_id in agent_ids(stack)
    assert [pool.settings.namespace for pool in stack.backend.pools()] == ["ci-new"]
    assert wrong == []
    assert stack.gocd.invariant_violations() == []


def test_after_a_restart_agents_of_unwatched_pods_are_kept_and_named_until_gocd_loses_contact() -> None:
    """The backend restarts after the profile was deleted: no pool watches the pod's namespace any
    more, so its agent has no known pod. It is kept (removing it would leave a pod that builds for
    nobody, whose agent cannot register again), a health message names it; once the pod is deleted
    by hand and GoCD has lost contact with the agent, the ping removes it."""
    stack = virtual_stack(boot_delay=5, get_work_delay_s=10.0, get_work_interval_s=10.0)
    profile = reuse_profile(stack, IdleTimeout="60m")
    pod = run_to_idle(stack, schedule(stack, profile, duration=10))
    stack.settle()
    stack.stop_backend()
    wrong = watch_agent_deletions(stack)
    stack.gocd.delete_cluster_profile(stack.cluster_profile())
    stack.start_backend()
    for _ in range(3):
        one_ping(stack)
    assert pod in pod_names(stack) and pod in agent_ids(stack), "the agent of a running pod is kept"
    assert pod in health(stack) and "no pod in the namespace" in health(stack)
    assert any(message["type"] == "warning" and pod in message["message"]
               for message in stack.backend.health.messages())  # fmt: skip

    stack.store.delete_pod(stack.namespace, pod)
    stack.run_until(lambda: pod not in agent_ids(stack), stack.gocd.config.lost_contact_after_s + 120,
                    "the agent's removal once GoCD lost contact")  # fmt: skip
    one_ping(stack)
    assert pod not in health(stack)
    assert wrong == []


def test_new_credentials_that_cannot_connect_retire_nothing() -> None:
    """The ping names the pool's cluster, but its new credentials cannot be used (here the in-cluster
    token file is missing: `kube.connect` raises ConnectError): that is a problem to report, not a
    deleted profile, so no pod retires and the pool keeps serving with the connection it has."""
    stack = virtual_stack(boot_delay=5, get_work_delay_s=10.0, get_work_interval_s=10.0)
    profile = reuse_profile(stack, IdleTimeout="60m")
    idle = run_to_idle(stack, schedule(stack, profile, duration=10))
    backend = stack.backend
    working = backend.cluster_factory

    def factory(cluster: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
        if cluster.security_token == "rotated":
            raise ConnectError("the service-account token: /var/run/secrets/token does not exist")
        return working(cluster, identity, clock)

    backend.cluster_factory = factory
    rotated = stack.cluster_profile(security_token="rotated")
    stack.gocd.edit_cluster_profile(stack.cluster_profile(), rotated)
    for _ in range(2):
        one_ping(stack)
    stack.run_for(30)
    assert idle in pod_names(stack) and idle in agent_ids(stack), "nothing retired"
    assert state(stack, idle) == "idle"
    assert "does not exist" in health(stack)
    job = completed(stack, schedule(stack, profile, cluster=stack.cluster_profile(), duration=10))
    assert job.agent_id == idle, "the pool goes on with the connection it has"


def test_jobs_scheduled_before_a_credential_edit_do_not_switch_the_pool_back_to_the_old_credentials() -> None:
    """GoCD sends a job's requests with the profiles it was scheduled with (the simulated GoCD's
    `edit_cluster_profile` names the gocd/gocd code) and the pings with the profiles as they are now:
    after an edit the backend hears both. The ping's are the current ones; a job's older credentials
    are served by the pool as it is, not connected again at every request of an old job."""
    stack = virtual_stack(boot_delay=5, get_work_delay_s=10.0, get_work_interval_s=10.0)
    profile = reuse_profile(stack, IdleTimeout="60m")
    idle = run_to_idle(stack, schedule(stack, profile, duration=10))
    old_job = assigned(stack, schedule(stack, profile, duration=600, name="long"))
    backend = stack.backend
    working = backend.cluster_factory
    connected: list[str | None] = []

    def factory(cluster: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
        connected.append(cluster.security_token)
        return working(cluster, identity, clock)

    backend.cluster_factory = factory
    another = schedule(stack, profile, duration=10, name="another")  # scheduled with the old ones too
    new = stack.cluster_profile(security_token="edited")
    stack.gocd.edit_cluster_profile(stack.cluster_profile(), new)
    one_ping(stack)
    done = completed(stack, old_job, within_s=900)
    for _ in range(3):
        one_ping(stack)
    assert completed(stack, another).completed_at and done.completed_at
    assert connected == ["edited"], "connected once, to the ping's credentials"
    assert idle in pod_names(stack)
    assert stack.gocd.invariant_violations() == []
