"""The policy engine (memory_pods.py, pod_lives.py) and the full engine (the fake API server's store and
the simulated kubelet) give the same run, event for event: every request GoCD sent and its answer, every
pod's change with the pool's state in its annotations, every registration and refusal, every job's wait
and assignment, and every figure of the result (tests/support/engine_log.py).

First on the policies the advisor tries, on the standard trace's first hours; then on a few hundred small
generated installations (Hypothesis), which reach what those do not: several profiles arriving at the
same instant, short key lifetimes that leave warm pods without a key, MaxJobsPerPod, a ReuseSchedule,
Predict, failed jobs. A failure names the first event where the engines part.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy
from elastic_agent.traces.workload import TraceJob, WorkloadSpec, generate
from tests.support.engine_log import event_log, first_divergence

EVENING = json.dumps([{"periods": ["* 23 * * *"], "MinIdlePods": 2, "IdleTimeout": "20m"}])
ADVISOR_POLICIES = {
    "one pod per job": {"Reuse": "false"},
    "reuse, IdleTimeout 10m, MinIdlePods 1": {"Reuse": "true", "IdleTimeout": "10m", "MinIdlePods": "1"},
    "reuse, MinIdlePods 3, MaxJobsPerPod 5": {
        "Reuse": "true",
        "IdleTimeout": "5m",
        "MinIdlePods": "3",
        "MaxJobsPerPod": "5",
    },
    "reuse on a schedule": {"Reuse": "true", "IdleTimeout": "2m", "ReuseSchedule": EVENING},
    "Predict": {"Reuse": "true", "IdleTimeout": "2m", "Predict": "true"},
}


def _agree(trace: list[TraceJob], policy: Policy, settings: SimSettings) -> None:
    full = event_log(trace, policy, replace(settings, engine="full"))
    lean = event_log(trace, policy, replace(settings, engine="policy"))
    kinds = {event[1] for event in full if isinstance(event[0], float)}
    assert {"request", "pod"} <= kinds, "the run made no pod or sent no request: nothing was compared"
    completions = [event for event in full if event[1:3] == ("request", "job-completion")]
    assert all(event[3] for event in completions), "a job-completion logged without its agent"
    divergence = first_divergence(full, lean)
    assert divergence is None, f"the engines part at {divergence}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ADVISOR_POLICIES))
def test_the_engines_give_the_same_events_for_the_policies_the_advisor_tries(name: str) -> None:
    trace = generate(WorkloadSpec(jobs=20000, days=1), seed=1)[:500]
    _agree(trace, Policy(name, ADVISOR_POLICIES[name]), SimSettings(seed=3, pending_pods_count=1000))


PROFILES = ("java", "node", "go")


@st.composite
def installations(draw: st.DrawFn) -> tuple[list[TraceJob], Policy, SimSettings]:
    count = draw(st.integers(1, 30))
    jobs = []
    for _ in range(count):
        # Half the jobs come at the first instants, together (a burst), the rest over an hour and a half.
        at = st.sampled_from([0.0, 1.0, 30.0]) | st.integers(0, 5400).map(float)
        jobs.append(
            TraceJob(
                at=draw(at),
                profile=draw(st.sampled_from(PROFILES)),
                environment=draw(st.sampled_from(["build", "test", None])),
                pipeline=f"p{draw(st.integers(1, 4))}",
                duration=float(draw(st.integers(5, 1500))),
                stage=draw(st.sampled_from(["build", "test"])),
                result=draw(st.sampled_from(["Passed", "Passed", "Failed"])),
            )
        )
    jobs.sort(key=lambda job: job.at)
    reuse = draw(st.booleans())
    elastic = {"Reuse": "true" if reuse else "false"}
    if reuse:
        elastic["IdleTimeout"] = draw(st.sampled_from(["1m", "2m", "10m"]))
        elastic["MinIdlePods"] = str(draw(st.integers(0, 3)))
        if draw(st.booleans()):
            elastic["MaxJobsPerPod"] = str(draw(st.integers(1, 4)))
        if draw(st.booleans()):
            elastic["Predict"] = "true"
        if draw(st.booleans()):
            elastic["ReuseSchedule"] = EVENING
    per_profile = {}
    if reuse and draw(st.booleans()):
        per_profile["go"] = {"Reuse": "true", "IdleTimeout": "5m", "MinIdlePods": "1"}
    simulated = SimSettings(
        seed=draw(st.integers(1, 1000)),
        boot_median_s=float(draw(st.sampled_from([5, 25, 90]))),
        key_lifetime_s=float(draw(st.sampled_from([120, 600, 1800]))),
        scheduler_s=float(draw(st.sampled_from([1, 5]))),
        pending_pods_count=draw(st.sampled_from([2, 100])),
        skip_idle_events=draw(st.booleans()),
    )
    return jobs, Policy("generated", elastic, per_profile=per_profile), simulated


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(installations())
def test_the_engines_give_the_same_events_on_generated_installations(
    case: tuple[list[TraceJob], Policy, SimSettings],
) -> None:
    trace, policy, simulated = case
    _agree(trace, policy, simulated)
