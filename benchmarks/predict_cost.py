"""Predict on and off in the virtual-time simulator: what it buys on a two-stage pipeline, and what it costs
(CPU time, and nothing else) on the standard trace, whose jobs carry no pipeline shape. The side-by-side
table against flat settings and schedules on pipeline-shaped traces is benchmarks/prediction_compare.py;
this is the quick check of the plugin's part.

    python -m benchmarks.predict_cost      # 50 runs of the pipeline, the standard trace's first 2000 jobs
    python -m benchmarks.predict_cost --runs 10 --standard-jobs 500

CPU time (time.process_time) is reported beside the load average: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import time

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceJob, WorkloadSpec, generate

PERIOD_S = 480.0


def two_stages(runs: int) -> list[TraceJob]:
    """Every 8 minutes: build (2 jobs of 60 s), then 10 s after it passed, test (6 jobs of 30 s)."""
    jobs: list[TraceJob] = []
    for run in range(runs):
        at, counter = 10.0 + run * PERIOD_S, run + 1
        jobs += [
            TraceJob(at, "java", None, "app", 60.0, counter, "build", 1, f"compile-{n}") for n in range(2)
        ]
        jobs += [
            TraceJob(at + 90.0, "java", None, "app", 30.0, counter, "test", 1, f"test-{n}") for n in range(6)
        ]
    return jobs


def line(name: str, trace: list[TraceJob], elastic: dict[str, str], settings: SimSettings) -> str:
    started = time.process_time()
    r = Simulation(trace, Policy(name, elastic), settings).run()
    cpu = time.process_time() - started
    return (
        f"| {name} | {r.jobs} | {r.pods_created} | {r.wait_mean:.2f} | {r.wait_p95:.2f} | "
        f"{r.idle_pod_s_per_job:.1f} | {r.registrations_refused} | {r.predicted_started} | "
        f"{r.predicted_hits} | "
        f"{r.predicted_idled_out} | {r.predicted_without_key} | {cpu:.2f} | {os.getloadavg()[0]:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--standard-jobs", type=int, default=2000)
    args = parser.parse_args()
    print(
        "| run | jobs | pods | wait mean s | wait p95 s | idle pod-s/job | refused | started ahead | hits | "
        "idled out | without key | CPU s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    reuse = {"Reuse": "true", "IdleTimeout": "2m"}
    pipeline = two_stages(args.runs)
    for skip in (False, True):
        settings = SimSettings(seed=3, skip_idle_events=skip)
        path = "idle events skipped" if skip else "every event"
        name = f"two stages, {args.runs} runs, {path}"
        print(line(f"{name}, Predict=false", pipeline, reuse, settings))
        print(line(f"{name}, Predict=true", pipeline, {**reuse, "Predict": "true"}, settings))
    standard = generate(WorkloadSpec(jobs=20000, days=1), seed=1)[: args.standard_jobs]
    settings = SimSettings(seed=1, pending_pods_count=1000)
    for idle in ("2m", "10m"):
        plain = {"Reuse": "true", "IdleTimeout": idle}
        name = f"standard[:{args.standard_jobs}], {idle}"
        print(line(f"{name}, Predict=false", standard, plain, settings))
        print(line(f"{name}, Predict=true", standard, {**plain, "Predict": "true"}, settings))


if __name__ == "__main__":
    main()
