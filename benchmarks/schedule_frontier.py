"""Predict with cheaper schedules: is there a setting on the pipeline week that meets the waits of
prediction_compare's targets within its idle bound (flat IdleTimeout 10m's idle pod-seconds per job)?

    python -m benchmarks.schedule_frontier                  # tuned server (tick 1 s, keys 24 h)
    python -m benchmarks.schedule_frontier --server default

prediction_compare runs Predict with one schedule (busy 60m with a warm pool at the median, else 10m),
which meets the waits on the tuned server and idles about three times the bound. This runs Predict with
every schedule of a smaller grid (else IdleTimeout 2m or 5m; busy 10m, 20m or 30m; the warm pool at the
busy hours' 25th or 50th percentile), beside flat 10m and the floor on the same server, and prints each
row's mean, p95 and idle with the targets met or missed, then the rows no other row beats on both mean
and idle (the frontier). Same trace, schedule learning and settings as prediction_compare's pipeline
part; simulated figures are fixed by the seed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import time
from collections.abc import Sequence

from benchmarks.prediction_compare import (
    FLOOR,
    FLOOR_PROPERTIES,
    MEAN_OVER_FLOOR_S,
    P95_OVER_FLOOR_S,
    P95_TARGET_S,
    REFERENCE,
    SERVERS,
    Case,
    cases,
    demands,
)
from benchmarks.schedule_compare import schedule_policy
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import DEFAULT_ORIGIN, describe

PLAIN = ("2m", "5m")
BUSY = ("10m", "20m", "30m")
QUANTILES = (0.25, 0.5)


def rows(case: Case, settings: SimSettings, learn_days: float) -> list[Policy]:
    demands_by_profile, _ = demands(case, settings, learn_days)
    found = [
        Policy(REFERENCE, {"Reuse": "true", "IdleTimeout": "10m"}),
        Policy(FLOOR, FLOOR_PROPERTIES),
    ]
    for plain, busy, quantile in itertools.product(PLAIN, BUSY, QUANTILES):
        schedule, per_profile = schedule_policy(demands_by_profile, plain, busy, quantile)
        predicted = {name: {**props, "Predict": "true"} for name, props in per_profile.items()}
        found.append(Policy(f"prediction + {schedule.name}", {"Reuse": "true"}, per_profile=predicted))
    return found


def report(results: Sequence[PolicyResult]) -> list[str]:
    by_name = {r.policy: r for r in results}
    floor, reference = by_name[FLOOR], by_name[REFERENCE]
    p95_bound = max(P95_TARGET_S, floor.wait_p95 + P95_OVER_FLOOR_S)
    mean_bound, idle_bound = floor.wait_mean + MEAN_OVER_FLOOR_S, reference.idle_pod_s_per_job
    lines = [
        f"Bounds: mean <= {mean_bound:.1f} s, p95 <= {p95_bound:.1f} s, idle <= {idle_bound:.0f} pod-s/job.",
        "",
        "| policy | mean | p95 | idle pod-s/job | refused | mean | p95 | idle |",
        "|---|---:|---:|---:|---:|:---:|:---:|:---:|",
    ]
    for r in results:
        marks = [r.wait_mean <= mean_bound, r.wait_p95 <= p95_bound, r.idle_pod_s_per_job <= idle_bound]
        lines.append(
            f"| {r.policy} | {r.wait_mean:.2f} s | {r.wait_p95:.1f} s | {r.idle_pod_s_per_job:.0f} | "
            f"{r.registrations_refused} | " + " | ".join("met" if ok else "missed" for ok in marks) + " |"
        )
    predicted = [r for r in results if r.policy.startswith("prediction")]
    frontier = [
        r
        for r in predicted
        if not any(
            o.wait_mean <= r.wait_mean and o.idle_pod_s_per_job <= r.idle_pod_s_per_job and o is not r
            for o in predicted
        )
    ]
    lines += ["", "The frontier (no other Predict row waits less for less idle):"]
    lines += [
        f"- {r.policy}: {r.wait_mean:.2f} s mean at {r.idle_pod_s_per_job:.0f} pod-s/job"
        for r in sorted(frontier, key=lambda r: r.idle_pod_s_per_job)
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", choices=tuple(SERVERS), default="tuned")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--learn-days", type=float, default=4.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.learn_days <= 0 or args.workers < 1:
        parser.error("--learn-days must be more than 0 and --workers at least 1")
    base = SimSettings(seed=args.seed, pending_pods_count=1000, start=DEFAULT_ORIGIN.timestamp())
    settings = SERVERS[args.server].settings(base)
    case = cases(("pipelines",), False, args.seed, 25.0)[0]
    policies = rows(case, settings, args.learn_days)
    print(f"{describe(case.jobs)}; {len(policies)} policies on the {args.server} server", flush=True)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    results = simulate_all([(case.jobs, p, settings) for p in policies], args.workers)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("\n".join(report(results)))
    print(
        f"\n{len(policies)} simulations, {args.workers} workers: {time.perf_counter() - started:.0f} s wall, "
        f"{children.ru_utime + children.ru_stime:.0f} s of CPU; load {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
