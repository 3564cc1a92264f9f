"""The hold on a profile whose pods break, at plan level: given a pool's state (its pods, waiting jobs
and row of broken pods), what the decisions plan. The first broken pod of a fingerprint is replaced at
once, one pod at a time; from the second in a row nothing is created before 30 s, then 60 s...; a
registration of any pod of the fingerprint ends the row (pool/holds.py, pool/broken_pods.py,
pool/warm.py, pool/decisions.py, pool/reaping.py). tests/scenarios/test_broken_pods.py runs the same end to
end in virtual time."""

from __future__ import annotations

from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.pool import broken_pods, decisions, labels, reaping, warm
from elastic_agent.pool.intents import Create, HoldBack, Plan, Recovered, Say, Wait
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.inprocess_cluster import SimulationKubeStore
from tests.support.pool_world import NAMESPACE, pod_manifest, pool_on_a_cluster

NOW = 1_700_000_000.0  # the pool's ManualClock starts here
FINGERPRINT = "v1:abc"
SPEC = JobSpec(FINGERPRINT, {}, True, None, 600.0, 0, None, "https://gocd.example.com/go")
REASON = "container agent: Error: exited with code 1"


def job(job_id: int) -> JobIdentifier:
    return JobIdentifier("app", "1", 1, "build", "1", f"compile-{job_id}", job_id)


def waiting(state: PoolState, *job_ids: int) -> None:
    """Jobs of the fingerprint waiting, each with the unused key of its latest create-agent."""
    for job_id in job_ids:
        state.commit_wait(Wait(job(job_id), SPEC, f"key-{job_id}"), NOW)


def broken_in_a_row(state: PoolState, failures: int, at: float = NOW) -> None:
    """`failures` broken pods of the fingerprint in a row, the latest found at `at` (what the Applier
    commits for a ping's HoldBack)."""
    for n in range(failures):
        state.book.holds.failed(FINGERPRINT, f"agent-broken-{n}", REASON, at)


def booting_pod(
    store: SimulationKubeStore,
    state: PoolState,
    name: str,
    *,
    registered: bool = False,
    state_name: str = "booting",
) -> None:
    manifest = pod_manifest(name, state.identity, state=state_name)
    notes = {
        labels.ANN_FINGERPRINT: FINGERPRINT,
        labels.ANN_REUSE: "true",
        labels.ANN_CREATED_AT: f"{NOW - 20:.3f}",
    }
    if registered:
        notes[labels.ANN_REGISTERED] = "true"
    manifest["metadata"]["annotations"].update(notes)  # type: ignore[index]
    store.create_pod(NAMESPACE, manifest)
    state.records()  # the watch's news taken in


def creations(plan: Plan) -> list[Create]:
    return [intent for intent in plan.intents if isinstance(intent, Create)]


def test_after_the_first_broken_pod_a_waiting_job_with_a_key_gets_its_replacement_in_the_same_ping() -> None:
    _, _, state = pool_on_a_cluster()
    waiting(state, 7)
    broken_in_a_row(state, 1)
    [created] = creations(warm.for_waiting_jobs(state, NOW))
    assert created.job == job(7) and created.key == "key-7"


def test_after_the_first_broken_pod_create_agent_creates_the_replacement_at_once() -> None:
    _, _, state = pool_on_a_cluster()
    broken_in_a_row(state, 1)
    plan = decisions.create_agent(state, job(7), SPEC, "key-7", NOW)
    [created] = creations(plan)
    assert created.key == "key-7" and not plan.message  # no "waiting: ..." sentence


def test_after_the_first_broken_pod_only_one_pod_is_tried_at_a_time() -> None:
    store, _, state = pool_on_a_cluster()
    waiting(state, 1, 2, 3)
    broken_in_a_row(state, 1)
    assert len(creations(warm.for_waiting_jobs(state, NOW))) == 1  # three jobs wait, one pod is tried
    booting_pod(store, state, "agent-trying")  # the one being tried has not registered yet
    assert creations(warm.for_waiting_jobs(state, NOW)) == []
    plan = decisions.create_agent(state, job(4), SPEC, "key-4", NOW)
    assert creations(plan) == [] and any(isinstance(i, Wait) for i in plan.intents)  # keeps its key
    assert plan.message is not None and "one is being tried" in plan.message


def test_from_the_second_broken_pod_in_a_row_nothing_is_created_for_thirty_seconds_then_one() -> None:
    _, _, state = pool_on_a_cluster()
    waiting(state, 1, 2)
    broken_in_a_row(state, 2)
    assert creations(warm.for_waiting_jobs(state, NOW)) == []
    assert creations(warm.for_waiting_jobs(state, NOW + 29.9)) == []
    held = decisions.create_agent(state, job(3), SPEC, "key-3", NOW + 10)
    assert creations(held) == [] and held.message is not None and "its next try is at" in held.message
    assert len(creations(warm.for_waiting_jobs(state, NOW + 30))) == 1


def test_the_hold_doubles_with_each_further_broken_pod_in_a_row() -> None:
    _, _, state = pool_on_a_cluster()
    waits = []
    for failures in range(1, 7):
        hold = state.book.holds.failed(FINGERPRINT, f"agent-{failures}", REASON, NOW)
        waits.append(hold.next_try_at - NOW)
    assert waits == [0.0, 30.0, 60.0, 120.0, 240.0, 300.0]


def test_the_warm_pool_replaces_its_first_broken_pod_at_once_and_holds_the_second() -> None:
    _, _, state = pool_on_a_cluster()
    warm_spec = JobSpec(FINGERPRINT, {}, True, None, 600.0, 2, None, SPEC.go_server_url)  # MinIdlePods 2
    state.book.wait(job(1), warm_spec, "key-1", NOW)  # brings the recipe
    state.book.served(FINGERPRINT, 1)  # served by another pod: no job waits
    for n in range(3):
        state.keys.offer(f"banked-{n}", NOW)
    broken_in_a_row(state, 1)
    assert len(creations(warm.warm_pool(state, NOW))) == 1  # one at a time, at once
    broken_in_a_row(state, 1)  # the second in a row
    assert creations(warm.warm_pool(state, NOW + 29.9)) == []
    assert len(creations(warm.warm_pool(state, NOW + 30))) == 1


def test_a_pod_of_the_fingerprint_that_registers_ends_the_row_whenever_it_was_created() -> None:
    store, _, state = pool_on_a_cluster()
    booting_pod(store, state, "agent-older")  # created before the failure
    broken_in_a_row(state, 2, at=NOW)
    _, plan = decisions.should_assign_work(state, "agent-older", job(9), SPEC, state.clock)
    assert Recovered(FINGERPRINT) in plan.intents
    said = [i.text for i in plan.intents if isinstance(i, Say) and i.job is None]
    assert said == ["pod agent-older of a held profile registered (agent-broken-1 was broken): held no more"]


def test_gocd_listing_a_pod_of_the_fingerprint_at_a_ping_ends_the_row_too() -> None:
    store, _, state = pool_on_a_cluster()
    booting_pod(store, state, "agent-listed")
    broken_in_a_row(state, 1)
    agents = {"agent-listed": Agent("agent-listed", "Idle", "Idle", "Enabled")}
    plan = reaping.what_gocd_says(state, agents, NOW, state.change_mark())
    assert Recovered(FINGERPRINT) in plan.intents


def test_a_job_given_to_a_pod_registered_before_the_failure_does_not_end_the_row() -> None:
    store, _, state = pool_on_a_cluster()
    booting_pod(store, state, "agent-old", registered=True, state_name="idle")
    broken_in_a_row(state, 2)
    taken, plan = decisions.should_assign_work(state, "agent-old", job(9), SPEC, state.clock)
    assert taken and not any(isinstance(i, Recovered) for i in plan.intents)
    assert state.book.holds.get(FINGERPRINT) is not None


def test_pods_of_one_fingerprint_broken_in_one_ping_count_as_one_failure_told_as_the_first() -> None:
    store, _, state = pool_on_a_cluster()
    waiting(state, 1)
    for name in ("agent-a", "agent-b"):
        booting_pod(store, state, name)
        exited = {"name": "agent", "restartCount": 0,
                  "state": {"terminated": {"reason": "Error", "exitCode": 1}}}  # fmt: skip
        store.update_status(NAMESPACE, name, None, {"phase": "Failed", "containerStatuses": [exited]})
    state.records()
    plan = broken_pods.ping_plan(state, NOW)
    assert [i for i in plan.intents if isinstance(i, HoldBack)] == [
        HoldBack(FINGERPRINT, "agent-a", "container agent: Error: exited with code 1")
    ]
    told = [i.text for i in plan.intents if isinstance(i, Say) and i.job == job(1)]
    assert told and all("(0s, broken pod 1 in a row)" in text for text in told)
