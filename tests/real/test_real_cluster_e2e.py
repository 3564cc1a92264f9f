"""End to end on a real kube-apiserver and etcd: the backend over HTTP with a ServiceAccount token bound
to exactly docker/kubernetes/rbac/role.yaml, the simulated GoCD server, and the simulated kubelet moving pods
through `pods/status` (there is no real kubelet). GoCD, the kubelet and the backend run on one scaled
clock; the API server's own timestamps are real time, which the backend never compares with its clock.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_model import JobState
from elastic_agent.simulation.stack import Stack
from tests.support.live_stack import wait_until
from tests.support.real_cluster import make_real_stack
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.reuse_helpers import assigned, completed, run_to_idle
from tests.support.stack_helpers import pod_names, reuse_profile, schedule, state

__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name


def nothing_left(stack: Stack) -> bool:
    return not stack.pods() and not stack.gocd.agents()


def test_every_job_gets_a_pod_of_its_own_and_nothing_is_left(make_real_stack: Callable[..., Stack]) -> None:
    stack = make_real_stack()
    jobs = [schedule(stack, stack.elastic_profile(), name=f"unit-{n}") for n in range(3)]
    done = [completed(stack, job, timeout_s=60) for job in jobs]
    assert len({job.agent_id for job in done}) == 3
    wait_until(lambda: nothing_left(stack), 30, "every pod and agent to be removed")
    assert not stack.gocd.invariant_violations()
    assert not stack.gocd.stats.non_200_answers


def test_jobs_one_after_another_reuse_one_pod(make_real_stack: Callable[..., Stack]) -> None:
    stack = make_real_stack()
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))
    for n in range(2):
        again = completed(stack, schedule(stack, profile, name=f"again-{n}"), timeout_s=60)
        assert again.agent_id == first
    assert pod_names(stack) == {first}
    wait_until(
        lambda: (stack.pods()[0]["metadata"]["annotations"].get(labels.ANN_JOBS_RUN)) == "3", 10, "3 jobs"
    )


def test_an_idle_pod_retires_after_its_idle_timeout(make_real_stack: Callable[..., Stack]) -> None:
    stack = make_real_stack()
    cluster = stack.cluster_profile(idle_timeout="2m")
    name = run_to_idle(stack, schedule(stack, reuse_profile(stack), cluster=cluster))
    wait_until(lambda: name not in pod_names(stack), 30, "the idle pod to retire")
    wait_until(lambda: stack.gocd.agent(name) is None, 10, "its agent to be removed")


def test_a_profile_edit_retires_the_pods_of_the_old_profile(make_real_stack: Callable[..., Stack]) -> None:
    stack = make_real_stack()
    cluster = stack.cluster_profile(idle_timeout="1h")
    old = reuse_profile(stack, MaxMemory="1Gi")
    short = schedule(stack, old, cluster=cluster, name="short", duration=20)
    long = schedule(stack, old, cluster=cluster, name="long", duration=240)
    idle_pod = run_to_idle(stack, short)
    running = assigned(stack, long, timeout_s=60)
    busy_pod = running.agent_id
    assert busy_pod is not None and busy_pod != idle_pod and state(stack, busy_pod) == "busy"
    new = reuse_profile(stack, MaxMemory="2Gi")
    stack.gocd.job(running.job_id).elastic_profile_properties.update(new)  # the admin edits the profile
    assert completed(stack, running, timeout_s=60).result == "Passed"
    wait_until(lambda: busy_pod not in pod_names(stack), 30, "the stale pod to retire after its job")
    wait_until(lambda: idle_pod not in pod_names(stack), 30, "the old profile's idle pod to retire")
    fresh = completed(stack, schedule(stack, new, cluster=cluster), timeout_s=60)
    assert fresh.agent_id not in (idle_pod, busy_pod)


def test_a_churn_over_two_profiles_and_two_environments_keeps_every_invariant_and_leaves_nothing(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack(boot_delay=10.0)
    rng = random.Random(12)
    cluster = stack.cluster_profile(idle_timeout="2m", pending_pods_count="20")
    profiles = {
        "reuse": reuse_profile(stack, MaxJobsPerPod="5"),
        "single": stack.elastic_profile(MaxMemory="1Gi"),
    }
    jobs = []
    for burst in range(6):
        for n in range(20):
            kind = rng.choice(["reuse", "reuse", "single"])
            environment = rng.choice([None, "staging"])
            jobs.append(
                schedule(stack, profiles[kind], cluster=cluster, environment=environment,
                         pipeline=f"p{n % 3}", name=f"{kind}-{burst}-{n}", duration=rng.uniform(5, 30))
            )  # fmt: skip
        stack.clock.sleep(rng.uniform(20, 60))
    wait_until(
        lambda: all(stack.gocd.job(j.job_id).state is JobState.COMPLETED for j in jobs),
        120,
        "every job to complete",
    )
    assert len(jobs) == 120
    done = [stack.gocd.job(job.job_id) for job in jobs]
    assert not stack.gocd.invariant_violations()
    assert not stack.gocd.stats.deleted_while_building
    assert Counter(a.job_id for a in stack.gocd.assignments) == Counter(j.job_id for j in done), (
        "each job once"
    )
    by_pod: dict[str, set[str]] = {}
    for job in done:
        by_pod.setdefault(job.agent_id or "", set()).add(job.job_name.split("-")[0])
    assert all(len(kinds) == 1 for kinds in by_pod.values()), "a pod ran jobs of one profile only"
    single_pods = [pod for pod, kinds in by_pod.items() if kinds == {"single"}]
    assert len(single_pods) == sum(1 for job in done if job.job_name.startswith("single")), "one pod per job"
    reuse_jobs = sum(1 for job in done if job.job_name.startswith("reuse"))
    assert len(by_pod) - len(single_pods) < reuse_jobs / 2, "reuse: far fewer pods than jobs"
    wait_until(lambda: nothing_left(stack), 60, "every pod and agent to be removed after the idle timeout")


def test_an_idle_pod_evicted_by_its_node_is_retired_and_replaced(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack()
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    stack.kubelet.evict(name)  # phase Failed, reason Evicted, written through pods/status
    wait_until(lambda: name not in pod_names(stack), 30, "the evicted pod to be deleted at a ping")
    wait_until(lambda: stack.gocd.agent(name) is None, 10, "its agent to be removed")
    again = completed(stack, schedule(stack, profile), timeout_s=60)
    assert again.agent_id != name
    assert not [m.message for m in stack.gocd.health_messages]
