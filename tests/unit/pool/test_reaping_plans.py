"""server-ping's reaping at plan level (pool/reaping.py): given a pool's pods and GoCD's agent list, which
pods the plan marks retiring and retires, and which repairs it makes. Nothing is carried out: each test
reads the plan returned."""

from __future__ import annotations

from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.pool import labels, marks, reaping
from elastic_agent.pool.intents import Mark, Plan, Release, Retire
from elastic_agent.pool.pods import job_annotation
from tests.support.pool_world import START, pod_notes, pool_on_a_cluster, put_pod

NOW = START + 3600.0
FINGERPRINT = "v1:reaped"
IDLE_TIMEOUT_S = 600.0  # the cluster profile's default idle_timeout


def idle(name: str) -> Agent:
    return Agent(name, "Idle", "Idle", "Enabled")


def building(name: str) -> Agent:
    return Agent(name, "Building", "Building", "Enabled")


def retired(plan: Plan) -> list[str]:
    """The pods of the plan's ordered retirement, each also marked retiring before it."""
    [retire] = [intent for intent in plan.intents if isinstance(intent, Retire)] or [Retire(())]
    names = [name for name, _ in retire.pods]
    marked = {
        i.pod
        for i in plan.intents
        if isinstance(i, Mark) and i.annotations.get(labels.ANN_STATE) == "retiring"
    }
    assert marked == set(names), "every pod retired is marked retiring in the same plan"
    return names


def test_an_idle_pod_past_its_idle_timeout_is_retired_and_one_within_it_is_not() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-stale", pod_notes("idle", NOW - IDLE_TIMEOUT_S - 1, FINGERPRINT))
    put_pod(store, state, "agent-fresh", pod_notes("idle", NOW - IDLE_TIMEOUT_S + 60, FINGERPRINT))
    agents = {"agent-stale": idle("agent-stale"), "agent-fresh": idle("agent-fresh")}
    plan = reaping.retirements(state, agents, NOW)
    assert retired(plan) == ["agent-stale"]
    [retire] = [i for i in plan.intents if isinstance(i, Retire)]
    assert retire.pods[0][1] == "idle 10m1s (idle timeout 10m)"


def test_min_idle_pods_keeps_the_most_recently_idle_pods_past_their_timeout() -> None:
    store, _, state = pool_on_a_cluster()
    for name, idle_for in (("agent-a", 900.0), ("agent-b", 800.0), ("agent-c", 700.0)):
        put_pod(
            store, state, name, {**pod_notes("idle", NOW - idle_for, FINGERPRINT), labels.ANN_MIN_IDLE: "2"}
        )
    agents = {name: idle(name) for name in ("agent-a", "agent-b", "agent-c")}
    assert retired(reaping.retirements(state, agents, NOW)) == ["agent-a"]  # idle longest; two stay


def test_a_pods_own_idle_timeout_overrides_the_cluster_profiles() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(
        store,
        state,
        "agent-short",
        {**pod_notes("idle", NOW - 120, FINGERPRINT), labels.ANN_IDLE_TIMEOUT: "60"},
    )
    assert retired(reaping.retirements(state, {"agent-short": idle("agent-short")}, NOW)) == ["agent-short"]


def test_a_busy_pod_is_never_chosen_however_long_it_has_been_busy() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-busy", pod_notes("busy", NOW - 10 * IDLE_TIMEOUT_S, FINGERPRINT))
    assert reaping.retirements(state, {"agent-busy": building("agent-busy")}, NOW).intents == ()


def test_an_agent_that_never_registered_goes_after_the_registration_timeout_and_not_before() -> None:
    store, _, state = pool_on_a_cluster()
    booting = pod_notes("booting", NOW - 601, FINGERPRINT, registered=False)
    put_pod(store, state, "agent-late", booting)
    put_pod(store, state, "agent-early", pod_notes("booting", NOW - 30, FINGERPRINT, registered=False))
    plan = reaping.retirements(state, {}, NOW)
    assert retired(plan) == ["agent-late"]
    [retire] = [i for i in plan.intents if isinstance(i, Retire)]
    assert retire.pods[0][1] == "its agent did not register within 10m"


def test_a_disabled_agents_idle_pod_goes_within_its_idle_timeout() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-off", pod_notes("idle", NOW - 5, FINGERPRINT))
    plan = reaping.retirements(state, {"agent-off": Agent("agent-off", "Idle", "Idle", "Disabled")}, NOW)
    assert retired(plan) == ["agent-off"]


def test_gocd_listing_a_busy_pod_idle_releases_it_only_after_the_assignment_grace() -> None:
    store, _, state = pool_on_a_cluster()
    job = JobIdentifier("app", "1", 1, "build", "1", "compile", 7)
    busy_since = NOW - reaping.ASSIGNMENT_GRACE_S - 1
    notes = {**pod_notes("busy", busy_since, FINGERPRINT), labels.ANN_CURRENT_JOB: job_annotation(job)}
    put_pod(store, state, "agent-done", notes)
    agents = {"agent-done": idle("agent-done")}
    within = reaping.what_gocd_says(state, agents, busy_since + 10, state.change_mark())
    assert within.intents == ()  # GoCD may list the agent idle for a moment after the `true`
    assert within.due == busy_since + reaping.ASSIGNMENT_GRACE_S, "due again when the grace ends"
    plan = reaping.what_gocd_says(state, agents, NOW, state.change_mark())
    [record] = [r for r in state.records() if r.name == "agent-done"]
    assert plan.intents[:2] == (marks.idle_after_lost_completion(record, NOW), Release("agent-done"))


def test_an_orphaned_pool_retires_its_idle_pods_and_leaves_its_busy_ones_to_finish() -> None:
    store, _, state = pool_on_a_cluster()
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    put_pod(store, state, "agent-busy", pod_notes("busy", NOW - 5, FINGERPRINT))
    plan = reaping.orphaned(state)
    assert retired(plan) == ["agent-idle"]
    [retire] = [i for i in plan.intents if isinstance(i, Retire)]
    assert retire.pods == (("agent-idle", reaping.ORPHANED),)
