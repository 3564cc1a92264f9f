"""Skipping the events that change nothing (`SimSettings.skip_idle_events`: gocd_inprocess.py, and the
quiet pings of quiet_pings.py) gives exactly what simulating every event gives: the same pods (names,
creation and deletion times), the same wait for every job and the same assignments (which pod ran which
job, from when to when).

On the standard trace of benchmarks/compare.py (`WorkloadSpec(jobs=20000, days=1)`, seed 1,
pending_pods_count 1000). The whole trace, four policies both ways, takes too long for the suite
(benchmarks/RESULTS.md section 11 times it), so the suite replays its first `FAST_PATH_JOBS` jobs
(default 2000, its first two and a half hours); `FAST_PATH_JOBS=20000` replays it all. The policies:
reuse with and without a warm pod, one pod per job, and a ReuseSchedule, as the advisor tries them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest

from elastic_agent.simulation.plugins import PluginWorld, ProjectPlugin
from elastic_agent.simulation.run_settings import START, SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceJob, WorkloadSpec, generate
from tests.support.replay_outcome import Assignments, Pods, Waits, observed, side_by_side

JOBS = int(os.environ.get("FAST_PATH_JOBS", "2000"))
# The trace's time 0 is START, 22:13 UTC: the schedule's period starts 47 minutes in (the backend is woken
# to fill the warm pool then) and ends at midnight.
EVENING = json.dumps([{"periods": ["* 23 * * *"], "MinIdlePods": 4, "IdleTimeout": "20m"}])
POLICIES = {
    "reuse, IdleTimeout 10m": {"Reuse": "true", "IdleTimeout": "10m"},
    "reuse, IdleTimeout 10m, MinIdlePods 1": {"Reuse": "true", "IdleTimeout": "10m", "MinIdlePods": "1"},
    "one pod per job": {"Reuse": "false"},
    "reuse on a schedule": {"Reuse": "true", "IdleTimeout": "2m", "ReuseSchedule": EVENING},
}


@dataclass(frozen=True)
class Outcome:
    skipping: bool
    events: int
    pods: Pods
    waits: Waits
    assignments: Assignments
    jobs: int


def standard_trace(jobs: int = JOBS) -> list[TraceJob]:
    return generate(WorkloadSpec(jobs=20000, days=1), seed=1)[:jobs]


def replay(run: tuple[str, bool]) -> Outcome:
    name, skip = run
    settings = SimSettings(seed=1, pending_pods_count=1000, skip_idle_events=skip)
    simulation = Simulation(standard_trace(), Policy(name, POLICIES[name]), settings)
    simulation.run()
    pods, waits, assignments = observed(simulation)
    return Outcome(
        skipping=simulation.skipping is not None,
        events=simulation.events,
        pods=pods,
        waits=waits,
        assignments=assignments,
        jobs=len(simulation.model.jobs()),
    )


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, bool], Outcome]:
    return side_by_side([(name, skip) for name in POLICIES for skip in (False, True)], replay)


@pytest.mark.slow
@pytest.mark.parametrize("policy", list(POLICIES))
def test_skipping_idle_events_creates_the_same_pods_and_gives_every_job_the_same_wait_and_pod(
    outcomes: dict[tuple[str, bool], Outcome], policy: str
) -> None:
    full, fast = outcomes[(policy, False)], outcomes[(policy, True)]
    assert (full.skipping, fast.skipping) == (False, True)
    assert full.jobs >= JOBS and all(wait is not None for wait in full.waits.values())  # every job ran
    assert len(full.pods) > 0 and len(full.assignments) >= JOBS
    assert fast.pods == full.pods
    assert fast.waits == full.waits
    assert fast.assignments == full.assignments


@pytest.mark.slow
def test_the_events_that_change_nothing_are_skipped(
    outcomes: dict[tuple[str, bool], Outcome],
) -> None:
    # Reuse leaves idle agents polling for jobs that another agent took: those polls, and the scheduler
    # ticks while nothing waits, are no events when skipping (every job still needs the tick that
    # admits it, so a good share of the events stays).
    full, fast = outcomes[("reuse, IdleTimeout 10m", False)], outcomes[("reuse, IdleTimeout 10m", True)]
    assert fast.events < full.events * 0.6


def test_a_plugin_other_than_this_project_s_gets_json_text_and_every_event() -> None:
    class Baseline:
        """Another plugin: this project's backend behind GoCD's JSON text, as a baseline would read it."""

        def __init__(self, world: PluginWorld) -> None:
            self.inner = ProjectPlugin(world)
            self.bodies: list[object] = []

        def send(self, request_name: str, body: str) -> tuple[int, str]:
            self.bodies.append(body)
            return self.inner.send(request_name, body)

        def settle(self) -> None:
            self.inner.settle()

        def timings(self) -> tuple[dict[str, int], dict[str, float]]:
            return self.inner.timings()

        def next_due(self) -> float | None:
            return self.inner.next_due()

        def wake(self) -> None:
            self.inner.wake()

    policy = Policy("b", {"Reuse": "false"}, plugin=Baseline)
    simulation = Simulation(standard_trace(50), policy, SimSettings())
    simulation.run()
    plugin = simulation.plugin
    assert isinstance(plugin, Baseline) and simulation.skipping is None
    assert simulation.model.stats.pings_skipped == 0
    assert plugin.bodies and all(type(body) is str and json.loads(body) for body in plugin.bodies)
    assert all(job.wait_s is not None for job in simulation.model.jobs())


@pytest.mark.slow
@pytest.mark.parametrize("skip", [False, True])
def test_the_backend_is_woken_when_a_schedule_period_starts_whether_or_not_events_are_skipped(
    outcomes: dict[tuple[str, bool], Outcome], skip: bool
) -> None:
    # 23:00 UTC is 2,800 s after START; the next server-ping comes 20 s later, so only the wake-up at the
    # period's start creates warm pods at that very second.
    period_start = START + 2800.0
    created = [at for _, at, _ in outcomes[("reuse on a schedule", skip)].pods]
    assert sum(1 for at in created if at == period_start) >= 1
