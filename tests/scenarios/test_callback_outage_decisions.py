"""GoCD's callbacks failing changes none of the plugin's decisions about pods.

The fault matrix (tests/real/test_fault_matrix_backend.py, benchmarks/RESULTS.md section 7) runs the callback
outage in scaled real time and reports more pods than its baselines; but those baselines differ from
each other too, so the figure mixes the outage with real time's timing. This test runs the same
kind of churn (reuse and one-pod-per-job profiles, two environments, bursts, the outage after the third
burst) in virtual time, where a run is deterministic. With every call into GoCD answered 503 for two
minutes (list-agents, disable-agents, console lines), the pods created and every job's wait are
exactly those of the run without the outage: retirements the outage holds up go ahead at the first ping
after it, and nothing else depends on GoCD answering.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from elastic_agent.simulation.gocd_callbacks import ServerAnswer, ServerApi
from elastic_agent.simulation.plugins import PluginWorld, ProjectPlugin, SimulatedPlugin
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob

GAP_S = 30.0
OUTAGE = (3 * GAP_S + 1, 3 * GAP_S + 121)  # seconds after the start: two minutes, after the third burst


class FailingCalls(ServerApi):
    """GoCD's server API for the plugin, answering 503 to every call inside the outage window."""

    def __init__(self, world: PluginWorld) -> None:
        assert world.model is not None
        super().__init__(world.model)
        self._clock = world.clock
        self._window = (world.settings.start + OUTAGE[0], world.settings.start + OUTAGE[1])
        self.failed: dict[str, int] = {}

    def submit(self, api_name: str, api_version: str, body: str) -> ServerAnswer:
        if self._window[0] <= self._clock.now() < self._window[1]:
            self.failed[api_name] = self.failed.get(api_name, 0) + 1
            return 503, "GoCD is not available (injected outage)"
        return super().submit(api_name, api_version, body)


def _churn(seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    for burst in range(8):
        for _ in range(12):
            kind = rng.choice(["reuse", "reuse", "single"])
            jobs.append(TraceJob(burst * GAP_S, kind, rng.choice([None, "staging"]), f"p-{kind}",
                                 rng.uniform(5, 30)))  # fmt: skip
    return jobs


def _run(seed: int, outage: bool) -> tuple[PolicyResult, dict[str, int]]:
    outages: list[FailingCalls] = []

    def plugin(world: PluginWorld) -> SimulatedPlugin:
        if outage:
            outages.append(FailingCalls(world))
            # The backend reaches GoCD only through the failing API, not the server's methods.
            world = dataclasses.replace(world, api=outages[-1], model=None)
        return ProjectPlugin(world)

    policy = Policy(
        "churn",
        per_profile={"reuse": {"Reuse": "true", "MaxJobsPerPod": "5"}, "single": {"MaxMemory": "1Gi"}},
        cluster={"idle_timeout": "3m", "pending_pods_count": "20"},
        plugin=plugin,
    )
    result = Simulation(_churn(seed), policy, SimSettings(seed=seed)).run()
    return result, outages[0].failed if outages else {}


@pytest.mark.parametrize("seed", [1, 2])
def test_a_two_minute_callback_outage_creates_no_extra_pod_and_delays_no_job(seed: int) -> None:
    baseline, _ = _run(seed, outage=False)
    result, failed = _run(seed, outage=True)
    assert failed.get("go.processor.elastic-agents.list-agents", 0) >= 1, "a server-ping failed"
    assert failed.get("go.processor.elastic-agents.disable-agents", 0) >= 1, "a retirement was held up"
    assert result.violations == []
    # The plugin's only non-200 answers: the server-pings of the outage, each saying why.
    assert result.plugin_errors and all(
        e.startswith("cd.go.elastic-agent.server-ping answered 502: server-ping: GoCD answered 503")
        for e in result.plugin_errors
    ), result.plugin_errors
    assert result.completed == result.jobs == 96 and result.pods_left == 0
    assert result.pods_created == baseline.pods_created
    assert (result.wait_mean, result.wait_p95, result.wait_max) == (
        baseline.wait_mean,
        baseline.wait_p95,
        baseline.wait_max,
    )
