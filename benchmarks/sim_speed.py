"""How fast the virtual-time simulator runs: wall time for a generated trace at the standard trace's
density (20,000 jobs a day), one pod per job and reuse, with where the time went.

    python -m benchmarks.sim_speed --jobs 100000          # the size its target is set for (RESULTS.md §2)
    python -m benchmarks.sim_speed --jobs 5000            # a minute or so

Each policy is one simulation; with --workers 2 (the default on 2 cores) the two run side by side, each
on its own core, and each reports its own wall time.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence

from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX as PREFIX
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import WorkloadSpec, describe, generate

TARGET_JOBS = 100_000
TARGET_S = 60.0
JOBS_PER_DAY = 20_000  # the standard trace's density


def speed_table(results: Sequence[PolicyResult]) -> str:
    lines = [
        "| policy | jobs | simulated | wall | jobs per wall second | events | should-assign-work per job "
        f"| projected for {TARGET_JOBS:,} jobs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rate = r.jobs / r.wall_s if r.wall_s else float("inf")
        lines.append(
            f"| {r.policy} | {r.jobs:,} | {r.simulated_s / 3600:.1f} h | {r.wall_s:.1f} s | {rate:,.0f} | "
            f"{r.events:,} | {r.should_assign_asked / max(1, r.jobs):.1f} | {TARGET_JOBS / rate:.0f} s |"
        )
    return "\n".join(lines)


def time_table(results: Sequence[PolicyResult]) -> str:
    """Where each run's wall time went: the backend per request name, the rest (the GoCD model, the
    kubelet, the store and the event loop) as the remainder."""
    lines = ["| policy | request | calls | backend time | per call |", "|---|---|---:|---:|---:|"]
    for r in results:
        if not r.plugin_time_s:
            continue
        spent = 0.0
        for name, seconds in sorted(r.plugin_time_s.items(), key=lambda item: -item[1]):
            spent += seconds
            calls = r.plugin_calls.get(name, 0)
            per_call = f"{seconds / calls * 1e6:,.0f} us" if calls else ""
            lines.append(
                f"| {r.policy} | {name.removeprefix(PREFIX)} | {calls or ''} | {seconds:.1f} s | {per_call} |"
            )
        lines.append(f"| {r.policy} | (everything else) | | {r.wall_s - spent:.1f} s | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=TARGET_JOBS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--idle-timeout", default="10m", help="IdleTimeout of the reuse run")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    trace = generate(WorkloadSpec(jobs=args.jobs, days=args.jobs / JOBS_PER_DAY), seed=args.seed)
    settings = SimSettings(seed=args.seed, pending_pods_count=1000)
    timeout = args.idle_timeout
    policies = [
        Policy("one pod per job", {"Reuse": "false"}),
        Policy(f"reuse, IdleTimeout {timeout}", {"Reuse": "true", "IdleTimeout": timeout}),
    ]
    print(f"{describe(trace)}; {args.workers} worker(s)", flush=True)
    results = simulate_all([(trace, policy, settings) for policy in policies], args.workers)
    command = "python -m benchmarks.sim_speed " + " ".join(argv if argv is not None else sys.argv[1:])
    slowest = max(r.wall_s for r in results)
    print(
        "\n".join(
            [
                f"Command: `{command.strip()}`",
                f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}.",
                "",
                speed_table(results),
                "",
                time_table(results),
                "",
                f"Target: {TARGET_JOBS:,} jobs in under {TARGET_S:g} s per simulation. Slowest run here: "
                f"{args.jobs:,} jobs in {slowest:.1f} s.",
            ]
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
