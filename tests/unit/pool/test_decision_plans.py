"""The decisions of create-agent, should-assign-work and job-completion at plan level (pool/decisions.py):
given a pool's pods and waiting jobs, the intents returned and the sentence for the job's console."""

from __future__ import annotations

from elastic_agent.clock import ManualClock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import decisions, labels, marks
from elastic_agent.pool.intents import Assign, Create, Plan, Release, Reserve, Retire, Say, Wait
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.pods import job_annotation
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.inprocess_cluster import SimulationKubeStore
from tests.support.pool_world import START, pod_notes, pool_on_a_cluster, put_pod

NOW = START + 60.0
FINGERPRINT = "v1:build"
OTHER = "v1:other"
GO = "https://ci.example.test/go"
REUSE = JobSpec(FINGERPRINT, {}, True, None, 600.0, 0, None, GO)
ONE_PER_JOB = JobSpec(FINGERPRINT, {}, False, None, 600.0, 0, None, GO)
JOB = JobIdentifier("app", "1", 1, "build", "1", "compile", 7)


def kinds(plan: Plan) -> list[str]:
    return [type(intent).__name__ for intent in plan.intents]


def test_a_reuse_job_with_no_pod_of_its_profile_waits_and_gets_a_pod_with_its_key() -> None:
    _, _, state = pool_on_a_cluster()
    plan = decisions.create_agent(state, JOB, REUSE, "key-7", NOW)
    assert plan.intents[:2] == (Wait(JOB, REUSE, "key-7"), Reserve(7, FINGERPRINT))
    [create] = [i for i in plan.intents if isinstance(i, Create)]
    assert (create.job, create.key, create.for_request) == (JOB, "key-7", True)
    assert create.key_since == NOW - 110.0, "GoCD may have issued the key 110 s before: its queue's TTL"
    assert create.said == "created pod {pod}: 1 job waiting, 1 pod booting"


def test_a_reuse_job_with_an_idle_pod_of_its_profile_waits_for_it_and_no_pod_is_created() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    plan = decisions.create_agent(state, JOB, REUSE, "key-7", NOW)
    assert plan.intents == (Wait(JOB, REUSE, "key-7"),)
    assert plan.message == "no new pod needed: 1 job waiting, 1 idle and 0 booting pods of this profile"


def test_a_job_of_a_one_pod_per_job_profile_gets_its_pod_once() -> None:
    store, _, state = pool_on_a_cluster()
    assert kinds(decisions.create_agent(state, JOB, ONE_PER_JOB, "key-7", NOW)) == ["Reserve", "Create"]
    notes = {
        **pod_notes("booting", NOW, FINGERPRINT, reuse=False),
        labels.ANN_CREATED_FOR: job_annotation(JOB),
    }
    put_pod(store, state, "agent-mine", notes)
    again = decisions.create_agent(state, JOB, ONE_PER_JOB, "key-7b", NOW + 120)  # GoCD's re-send
    assert again.intents == () and again.message == "pod agent-mine was already created for this job"


def test_at_pending_pods_count_the_job_waits_with_its_key_and_a_sentence() -> None:
    store, _, state = pool_on_a_cluster(pending_pods_count="1")
    put_pod(store, state, "agent-booting", pod_notes("booting", NOW - 5, OTHER, registered=False))
    plan = decisions.create_agent(state, JOB, REUSE, "key-7", NOW)
    assert plan.intents == (Wait(JOB, REUSE, "key-7"),)
    assert plan.message == (
        "waiting: 1 pods have not registered yet, the limit (pending_pods_count) is 1; GoCD will ask again"
    )


def test_at_max_pods_the_longest_idle_pod_of_another_profile_gives_way() -> None:
    store, _, state = pool_on_a_cluster(max_pods="2")
    put_pod(store, state, "agent-newer", pod_notes("idle", NOW - 10, OTHER))
    put_pod(store, state, "agent-older", pod_notes("idle", NOW - 50, OTHER))
    plan = decisions.create_agent(state, JOB, REUSE, "key-7", NOW)
    assert marks.retiring("agent-older", decisions.MAKING_ROOM) in plan.intents
    assert Retire((("agent-older", decisions.MAKING_ROOM),)) in plan.intents
    assert kinds(plan)[-2:] == ["Reserve", "Create"]


def test_at_max_pods_with_no_idle_pod_of_another_profile_the_job_waits() -> None:
    store, _, state = pool_on_a_cluster(max_pods="1")
    put_pod(store, state, "agent-busy", pod_notes("busy", NOW - 10, OTHER))
    plan = decisions.create_agent(state, JOB, REUSE, "key-7", NOW)
    assert kinds(plan) == ["Wait"]
    assert plan.message == "waiting: all 1 pods allowed by max_pods are in use; GoCD will ask again"


def test_before_the_first_pod_list_a_reuse_job_waits_and_a_one_pod_per_job_job_is_asked_again() -> None:
    reuse = decisions.wait_for_the_list(JOB, REUSE, "key-7", "ci")
    assert reuse.intents == (Wait(JOB, REUSE, "key-7"),)
    assert reuse.message.startswith("waiting: the pods of namespace ci are still being listed")
    assert decisions.wait_for_the_list(JOB, ONE_PER_JOB, "key-7", "ci").intents == ()


def test_an_idle_pod_of_the_jobs_profile_says_true_and_is_busy_with_the_job() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    yes, plan = decisions.should_assign_work(state, "agent-idle", JOB, REUSE, ManualClock(NOW))
    assert yes
    assert plan.intents == (
        Assign("agent-idle", 7, FINGERPRINT),
        marks.busy("agent-idle", JOB, NOW),
        Say("assigned to pod agent-idle, its first job", JOB),
    )


def test_a_pod_of_another_profile_says_false_and_nothing_is_planned() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-other", pod_notes("idle", NOW - 5, OTHER))
    assert decisions.should_assign_work(state, "agent-other", JOB, REUSE, ManualClock(NOW)) == (False, Plan())


def busy_with(store: SimulationKubeStore, state: PoolState, name: str, jobs_run: int, **extra: str) -> None:
    notes = {
        **pod_notes("busy", NOW - 30, FINGERPRINT),
        labels.ANN_CURRENT_JOB: job_annotation(JOB),
        labels.ANN_JOBS_RUN: str(jobs_run),
        **extra,
    }
    put_pod(store, state, name, notes)


def test_a_reuse_pod_whose_job_completed_is_released_and_marked_idle() -> None:
    store, _, state = pool_on_a_cluster()
    busy_with(store, state, "agent-busy", jobs_run=0)
    plan = decisions.job_completed(state, "agent-busy", JOB, REUSE, NOW)
    assert plan.intents[0] == Release("agent-busy")
    [record] = [r for r in state.records() if r.name == "agent-busy"]
    assert plan.intents[1:] == (marks.idle_after_job(record, JOB, 1, REUSE, NOW),)
    assert plan.message == "pod agent-busy is idle after 1 job"


def test_a_pod_that_reached_max_jobs_per_pod_retires_after_its_job_without_asking_gocd() -> None:
    store, _, state = pool_on_a_cluster()
    busy_with(store, state, "agent-busy", jobs_run=1, **{labels.ANN_MAX_JOBS: "2"})
    spec = JobSpec(FINGERPRINT, {}, True, 2, 600.0, 0, None, GO)
    plan = decisions.job_completed(state, "agent-busy", JOB, spec, NOW)
    reason = "it ran 2 jobs (MaxJobsPerPod)"
    assert plan.intents[0] == Release("agent-busy")
    assert plan.intents[-1] == Retire((("agent-busy", reason),), agents_idle=True)
    assert plan.message == f"retired pod agent-busy: {reason}"


def test_a_completion_of_a_job_the_pod_is_not_running_changes_nothing() -> None:
    store, _, state = pool_on_a_cluster()
    busy_with(store, state, "agent-busy", jobs_run=0)
    other = JobIdentifier("app", "1", 1, "build", "1", "test", 8)
    plan = decisions.job_completed(state, "agent-busy", other, REUSE, NOW)
    assert plan.intents == ()
    assert plan.message.endswith("; nothing changed")
