"""A two-stage pipeline's trace (build, then its test stage 90 s after) and the simulator's settings to
replay it with Predict on, every pod booting in the same time.

The tests of Predict and of registration keys refused by GoCD replay the same pipeline."""

from __future__ import annotations

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.traces.workload import TraceJob

RUNS = 6
PERIOD_S = 480.0
FIXED = SimSettings(seed=3, boot_median_s=20.0, boot_bounds_s=(20.0, 20.0))
PREDICT = {"Reuse": "true", "IdleTimeout": "2m", "Predict": "true"}


def two_stages(
    runs: int = RUNS, test_jobs: int = 6, failed_last: bool = False, test_profile: str = "java"
) -> list[TraceJob]:
    """`failed_last`: the last run's build fails, so its test stage never comes."""
    jobs: list[TraceJob] = []
    for run in range(runs):
        at, counter = 10.0 + run * PERIOD_S, run + 1
        for n in range(2):
            jobs.append(TraceJob(at, "java", None, "app", 60.0, counter, "build", 1, f"compile-{n}"))
        if failed_last and run == runs - 1:
            continue
        for n in range(test_jobs):
            jobs.append(TraceJob(at + 90.0, test_profile, None, "app", 30.0, counter, "test", 1, f"test-{n}"))
    return jobs
