"""Server-pings the in-process simulation skips (simulation/quiet_pings.py, pool/quiet.py): a ping is
skipped only when the backend shows it would change nothing, so the pods, waits and assignments are
those of a run that simulates every event and sends every ping; and the time a pool keeps (an idle pod's
expiry, the forgetting of a waiting job) bounds the skipping, while anything under way stops it."""

from __future__ import annotations

import json
import math

import pytest

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels, quiet
from elastic_agent.pool.fingerprints import WAITING_TTL_S
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import TraceJob, WeekShape, WorkloadSpec, generate
from tests.support.pool_world import NAMESPACE, pod_manifest, pool_on_a_cluster
from tests.support.replay_outcome import Assignments, Pods, Waits, observed, side_by_side

NOW = 1_700_000_000.0
WEEKDAY_EVENINGS = json.dumps([{"periods": ["* 17-19 * * mon-fri"], "MinIdlePods": 2, "IdleTimeout": "30m"}])
POLICIES = {
    "reuse, IdleTimeout 30m, MinIdlePods 1": {"Reuse": "true", "IdleTimeout": "30m", "MinIdlePods": "1"},
    "reuse on a schedule": {"Reuse": "true", "IdleTimeout": "2m", "ReuseSchedule": WEEKDAY_EVENINGS},
    "one pod per job": {"Reuse": "false"},
    "Predict, IdleTimeout 2m": {"Reuse": "true", "IdleTimeout": "2m", "Predict": "true"},
}
Outcome = tuple[Pods, Waits, Assignments, int, int]  # ..., pings sent, skipped


def trace(policy: str) -> list[TraceJob]:
    """Quiet nights and a weekend, where pings have nothing to do; prediction gets pipeline shape."""
    if policy.startswith("Predict"):
        return generate_pipelines(PipelineSpec(days=3.0, commit_pipelines=6), seed=3)
    return generate(WorkloadSpec(jobs=1500, days=7, week=WeekShape()), seed=2)


def replay(run: tuple[str, bool]) -> Outcome:
    policy, skip = run
    settings = SimSettings(seed=1, skip_idle_events=skip)
    simulation = Simulation(trace(policy), Policy(policy, POLICIES[policy]), settings)
    simulation.run()
    return (*observed(simulation), simulation.model.stats.pings_sent, simulation.model.stats.pings_skipped)


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, bool], Outcome]:
    return side_by_side([(policy, skip) for policy in POLICIES for skip in (False, True)], replay)


@pytest.mark.slow
@pytest.mark.parametrize("policy", list(POLICIES))
def test_skipping_quiet_pings_leaves_every_pod_wait_and_assignment_as_sending_every_ping_has_them(
    outcomes: dict[tuple[str, bool], Outcome], policy: str
) -> None:
    full, fast = outcomes[(policy, False)], outcomes[(policy, True)]
    pods, waits, assignments, sent, skipped = full
    assert len(pods) > 0 and all(wait is not None for wait in waits.values()) and skipped == 0
    assert fast[:3] == (pods, waits, assignments)
    # Every minute is a ping or a skip; on the standard week, nights and the weekend are quiet, so
    # most pings are skipped (the pipeline days' hourly timers leave fewer quiet minutes).
    assert fast[4] > (0 if policy.startswith("Predict") else fast[3])
    assert fast[3] + fast[4] == pytest.approx(sent, abs=2)


def test_a_pool_of_idle_pods_is_quiet_until_the_first_of_them_expires() -> None:
    store, identity, state = pool_on_a_cluster()
    for name, since, timeout in (("agent-1", NOW - 60, 600.0), ("agent-2", NOW - 30, 300.0)):
        manifest = pod_manifest(name, identity)
        manifest["metadata"]["annotations"].update(  # type: ignore[index]
            {
                labels.ANN_STATE_SINCE: f"{since:.3f}",
                labels.ANN_CREATED_AT: f"{since - 100:.3f}",
                labels.ANN_REGISTERED: "true",
                labels.ANN_REUSE: "true",
                labels.ANN_IDLE_TIMEOUT: str(timeout),
            }
        )
        store.create_pod(NAMESPACE, manifest)
    state.records()  # the watch's news taken in, as a ping's decisions do
    assert quiet.quiet_until(state, NOW) == NOW - 30 + 300.0
    assert quiet.quiet_until(state, NOW + 260.0) == NOW - 30 + 300.0
    assert quiet.quiet_until(state, NOW + 271.0) == NOW - 60 + 600.0  # the first is past: the next


def test_an_empty_pool_is_quiet_for_ever_and_a_waiting_job_until_it_is_forgotten() -> None:
    _, _, state = pool_on_a_cluster()
    assert quiet.quiet_until(state, NOW) == math.inf
    job = JobIdentifier("app", "app-1", 1, "build", "1", "compile", 7)
    spec = JobSpec("v1:abc", {}, True, None, 600.0, 0, None, "https://gocd.example.test/go")
    state.book.wait(job, spec, "key", NOW)
    assert quiet.quiet_until(state, NOW + 10) == NOW + WAITING_TTL_S


def test_anything_under_way_stops_the_skipping() -> None:
    store, identity, state = pool_on_a_cluster()
    store.create_pod(NAMESPACE, pod_manifest("agent-1", identity, state="booting"))
    state.records()
    assert quiet.quiet_until(state, NOW) == NOW  # a pod booting: its registration is awaited
    store.delete_pod(NAMESPACE, "agent-1", grace_seconds=0)
    state.records()
    assert quiet.quiet_until(state, NOW) > NOW
    state.commit_mark("agent-2", {labels.ANN_STATE: "idle"}, {})  # a change not written yet
    assert quiet.quiet_until(state, NOW) == NOW
