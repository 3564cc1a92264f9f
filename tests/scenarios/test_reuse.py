"""Pod reuse, in virtual time (the in-process backend, the simulated GoCD server and cluster): one test
per defect of the earlier reuse attempt (docs/architecture.md, "What the earlier attempt got wrong"),
then the reuse knobs and rules."""

from __future__ import annotations

from elastic_agent.kube.adapter import MERGE_PATCH
from elastic_agent.pool import labels
from tests.support.stack_helpers import pod, pod_names, reuse_profile, schedule, state
from tests.support.virtual_helpers import assigned, completed, run_to_idle, virtual_stack, wait_state

# ----- the nine defects of the earlier attempt ------------------------------------------------------


def test_five_waiting_jobs_and_one_idle_pod_are_all_assigned_without_waiting_for_a_resend() -> None:
    stack = virtual_stack(boot_delay=20)
    profile = reuse_profile(stack)
    idle_pod = run_to_idle(stack, schedule(stack, profile))
    jobs = [schedule(stack, profile, name=f"job-{n}", duration=600) for n in range(5)]
    for job in jobs:
        assigned(stack, job, within_s=900)
    # One create-agent each at most (the idle pod may take its job before the scheduler's tick sends one).
    assert all(stack.gocd.job(job.job_id).create_agent_sends <= 1 for job in jobs), (
        "no job waited for a re-send"
    )
    assert max(stack.gocd.job(job.job_id).wait_s or 0 for job in jobs) < 120
    assert idle_pod in {stack.gocd.job(job.job_id).agent_id for job in jobs}
    assert len(pod_names(stack)) == 5, "the idle pod plus exactly four new ones"


def test_a_pod_older_than_auto_register_timeout_is_still_reused_after_its_job() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(auto_register_timeout="2m", idle_timeout="30m")
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    stack.run_for(10 * 60)  # far older than auto_register_timeout
    stack.run_until(lambda: stack.gocd.stats.pings_sent >= 3, 600, "pings after the jump")
    second = completed(stack, schedule(stack, profile, cluster=cluster))
    assert second.agent_id == first


def test_idle_pod_is_reused_after_backend_restart() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))
    stack.restart_backend()
    second = completed(stack, schedule(stack, profile))
    assert second.agent_id == first
    assert pod_names(stack) == {first}


def test_a_false_answer_changes_nothing() -> None:
    # A boot longer than a poll: the idle pod surely polls, and says no, before the new pod registers.
    stack = virtual_stack(boot_delay=30)
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))
    asked_before = stack.gocd.stats.should_assign_asked
    other = schedule(stack, reuse_profile(stack, MaxMemory="3Gi"), duration=600)
    stack.run_until(lambda: stack.gocd.job(other.job_id).agent_id is not None, 600, "the other job to start")
    assert stack.gocd.job(other.job_id).agent_id != first
    # Its own pod was asked once (and said yes): the idle pod was asked before it and said no.
    assert stack.gocd.stats.should_assign_asked - asked_before >= 2
    assert state(stack, first) == "idle"
    again = completed(stack, schedule(stack, profile))
    assert again.agent_id == first, "the pod that said no is still tracked and reused"


def test_job_completion_of_an_unknown_agent_is_answered_200() -> None:
    from elastic_agent.simulation.gocd_transport import encode, job_completion_body

    stack = virtual_stack()
    job = {
        "pipeline_name": "p",
        "pipeline_label": "1",
        "pipeline_counter": 1,
        "stage_name": "s",
        "stage_counter": "1",
        "job_name": "j",
        "job_id": 99,
    }
    body = job_completion_body("gone-pod", reuse_profile(stack), stack.cluster_profile(), job)
    assert stack.send("cd.go.elastic-agent.job-completion", encode(body))[0] == 200


def test_the_gocd_environment_is_part_of_the_reuse_key() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    in_a = run_to_idle(stack, schedule(stack, profile, environment="A"))
    job_b = completed(stack, schedule(stack, profile, environment="B"))
    assert job_b.agent_id != in_a, "a pod registered in environment A cannot run a job of environment B"
    assert job_b.create_agent_sends == 1, "the idle pod of A did not suppress the creation for B"
    b_pod = pod(stack, job_b.agent_id or "")
    assert b_pod is not None and b_pod["metadata"]["annotations"][labels.ANN_ENVIRONMENT] == "B"


def test_the_pending_limit_counts_only_pods_that_have_not_registered() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(pending_pods_count="2")
    profile = reuse_profile(stack)
    busy = [schedule(stack, profile, cluster=cluster, name=f"long-{n}", duration=3600) for n in range(2)]
    for job in busy:
        assigned(stack, job)
    more = [schedule(stack, profile, cluster=cluster, name=f"more-{n}", duration=3600) for n in range(2)]
    for job in more:
        assigned(stack, job, within_s=900)
    assert len(pod_names(stack)) == 4, "two registered busy pods do not block two new pods"


def test_a_reused_pod_shows_the_job_it_runs_now() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile, name="first"))
    second = assigned(stack, schedule(stack, profile, name="second", duration=3600))
    assert second.agent_id == name
    stack.run_until(
        lambda: (
            (pod(stack, name) or {}).get("metadata", {}).get("labels", {}).get(labels.LABEL_JOB_ID)
            == str(second.job_id)
        ),
        600,
        "the job label to follow the job",
    )
    metadata = (pod(stack, name) or {})["metadata"]
    assert metadata["labels"][labels.LABEL_JOB_NAME] == "second"
    assert f'"job_id":{second.job_id}' in metadata["annotations"][labels.ANN_CURRENT_JOB]


def test_a_ping_never_retires_a_pod_that_was_just_given_a_job() -> None:
    stack = virtual_stack(boot_delay=60)
    cluster = stack.cluster_profile(idle_timeout="1m")
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    # Nearly at its idle timeout: it takes a job (new pods need a minute to boot), then pings come while it
    # runs well past the timeout.
    stack.run_for(45)
    job = assigned(stack, schedule(stack, profile, cluster=cluster, duration=400))
    assert job.agent_id == name
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: stack.gocd.stats.pings_sent >= pings + 3, 600, "three pings while it is busy")
    assert name in pod_names(stack) and state(stack, name) == "busy", "a busy pod is never retired"
    completed(stack, job)
    assert not stack.gocd.stats.deleted_while_building
    assert not stack.gocd.invariant_violations()


# ----- reuse knobs -----------------------------------------------------------------------------------


def test_max_jobs_per_pod_retires_the_pod_after_that_many_jobs() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack, MaxJobsPerPod="2")
    first = run_to_idle(stack, schedule(stack, profile))
    second = completed(stack, schedule(stack, profile))
    assert second.agent_id == first
    stack.run_until(lambda: first not in pod_names(stack), 600, "the pod to retire after two jobs")
    third = completed(stack, schedule(stack, profile))
    assert third.agent_id != first


def test_max_pod_lifetime_retires_an_old_pod_after_its_job() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(max_pod_lifetime="5m", idle_timeout="30m")
    profile = reuse_profile(stack)
    done = completed(stack, schedule(stack, profile, cluster=cluster, duration=400))
    stack.run_until(
        lambda: done.agent_id not in pod_names(stack), 600, "the pod past max_pod_lifetime to retire"
    )
    # Gone within 10 simulated minutes, far below its 30-minute idle timeout: the
    # lifetime retired it.


def test_reuse_scope_pipeline_keeps_pods_within_their_pipeline() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack, ReuseScope="pipeline")
    first = run_to_idle(stack, schedule(stack, profile, pipeline="alpha"))
    other = completed(stack, schedule(stack, profile, pipeline="beta"))
    assert other.agent_id != first
    same = completed(stack, schedule(stack, profile, pipeline="alpha"))
    assert same.agent_id == first


def test_min_idle_pods_keeps_a_warm_pool_past_the_idle_timeout() -> None:
    # Agents poll slowly here, so create-agent reaches the backend before the idle pod takes the job.
    stack = virtual_stack(boot_delay=5, get_work_delay_s=30, get_work_interval_s=30)
    cluster = stack.cluster_profile(idle_timeout="2m")
    profile = reuse_profile(stack, MinIdlePods="2")
    first = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    # A job served by the idle pod leaves its registration key unused: the warm pool uses it.
    completed(stack, schedule(stack, profile, cluster=cluster))
    stack.run_until(lambda: len(pod_names(stack)) >= 2, 600, "a warm pod to be created ahead of demand")
    stack.run_for(10 * 60)
    stack.run_until(lambda: stack.gocd.stats.pings_sent >= 4, 600, "pings past the idle timeout")
    idle = [name for name in pod_names(stack) if state(stack, name) == "idle"]
    assert len(idle) >= 2, "MinIdlePods idle pods are kept"
    assert first in pod_names(stack)


def test_max_pods_makes_an_idle_pod_of_another_profile_give_way() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(max_pods="2", idle_timeout="1h")
    a = reuse_profile(stack)
    a_jobs = [schedule(stack, a, cluster=cluster, name=f"a{n}", duration=30) for n in range(2)]
    a_pods = {completed(stack, job).agent_id for job in a_jobs}
    for name in a_pods:
        wait_state(stack, name or "", "idle")
    b_job = completed(stack, schedule(stack, reuse_profile(stack, MaxMemory="1Gi"), cluster=cluster))
    assert b_job.agent_id not in a_pods
    assert b_job.create_agent_sends == 1, "room was made at once, not after a re-send"
    assert len(pod_names(stack) & {name for name in a_pods if name}) <= 1


def test_a_profile_edit_retires_idle_pods_and_lets_the_busy_one_finish() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="1h")
    old = reuse_profile(stack, MaxMemory="1Gi")
    short = schedule(stack, old, cluster=cluster, name="short", duration=20)
    long = schedule(stack, old, cluster=cluster, name="long", duration=240)
    idle_pod = run_to_idle(stack, short)
    busy_pod = assigned(stack, long).agent_id
    assert busy_pod is not None and busy_pod != idle_pod
    # The administrator edits the profile while the job runs: GoCD sends the new properties from now on.
    new = reuse_profile(stack, MaxMemory="2Gi")
    stack.gocd.job(long.job_id).elastic_profile_properties.update(new)
    assert state(stack, busy_pod) == "busy"
    finished = completed(stack, long)
    assert finished.result == "Passed", "the busy pod finished its job"
    stack.run_until(lambda: busy_pod not in pod_names(stack), 600, "the stale pod to retire after its job")
    stack.run_until(
        lambda: idle_pod not in pod_names(stack), 600, "the idle pod of the old profile to retire at a ping"
    )
    fresh = completed(stack, schedule(stack, new, cluster=cluster))
    assert fresh.agent_id not in (idle_pod, busy_pod)


# ----- autoscalers and explanations ------------------------------------------------------------------


def test_busy_pods_refuse_disruption_and_idle_pods_allow_it() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    idle = (pod(stack, name) or {})["metadata"]["annotations"]
    assert idle[labels.ANN_SAFE_TO_EVICT] == "true" and labels.ANN_DO_NOT_DISRUPT not in idle
    assigned(stack, schedule(stack, profile, duration=3600))
    wait_state(stack, name, "busy")
    busy = (pod(stack, name) or {})["metadata"]["annotations"]
    assert busy[labels.ANN_SAFE_TO_EVICT] == "false" and busy[labels.ANN_DO_NOT_DISRUPT] == "true"


def test_a_pod_repaired_to_busy_from_gocds_agent_list_refuses_disruption_like_any_busy_pod() -> None:
    """A restart lost the `true` before it reached the pod: the pod still says idle (and evictable)
    while GoCD lists its agent as Building; the ping's repair marks it busy with the same protection."""
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    idle = dict((pod(stack, name) or {})["metadata"]["annotations"])
    assigned(stack, schedule(stack, profile, duration=3600))
    wait_state(stack, name, "busy")
    lost = {key: idle.get(key) for key in (labels.ANN_STATE, labels.ANN_STATE_SINCE, labels.ANN_CURRENT_JOB,
                                           labels.ANN_SAFE_TO_EVICT, labels.ANN_DO_NOT_DISRUPT)}  # fmt: skip
    stack.store.patch_pod(stack.namespace, name, {"metadata": {"annotations": lost}}, MERGE_PATCH)
    stack.restart_backend()
    assert state(stack, name) == "idle"
    wait_state(stack, name, "busy")  # the first ping's repair
    repaired = (pod(stack, name) or {})["metadata"]["annotations"]
    assert repaired[labels.ANN_SAFE_TO_EVICT] == "false" and repaired[labels.ANN_DO_NOT_DISRUPT] == "true"


def test_evicting_an_idle_pod_is_a_normal_retirement() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    stack.kubelet.evict(name)
    stack.run_until(lambda: name not in pod_names(stack), 600, "the evicted pod to go")
    stack.run_until(lambda: stack.gocd.agent(name) is None, 600, "its agent to go")
    assert stack.gocd.health_messages == []
    again = completed(stack, schedule(stack, profile))
    assert again.agent_id != name


def test_decisions_are_explained_in_the_job_console() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    first_job = completed(stack, schedule(stack, profile))
    assert "created pod" in first_job.console_text and "1 job waiting" in first_job.console_text
    name = run_to_idle(stack, first_job)
    second = completed(stack, schedule(stack, profile))
    stack.run_until(
        lambda: "its 2nd job" in stack.gocd.job(second.job_id).console_text, 300, "the reuse line"
    )
    assert f"reused pod {name}, its 2nd job" in stack.gocd.job(second.job_id).console_text


def test_a_job_whose_idle_pod_went_away_gets_a_pod_at_the_next_ping_not_after_a_resend() -> None:
    # Slow polls: create-agent reaches the backend first and counts on the idle pod.
    stack = virtual_stack(boot_delay=5, get_work_delay_s=45, get_work_interval_s=45)
    profile = reuse_profile(stack)
    idle_pod = run_to_idle(stack, schedule(stack, profile))
    job = schedule(stack, profile, name="next", duration=600)
    stack.run_until(
        lambda: "no new pod needed" in stack.gocd.job(job.job_id).console_text, 600, "the job to count on it"
    )
    stack.kubelet.evict(idle_pod)
    taken = assigned(stack, job, within_s=1200)
    assert taken.agent_id != idle_pod
    assert taken.create_agent_sends == 1, "a pod was created at the next ping, with the job's unused key"
    assert (taken.wait_s or 0) < 120
