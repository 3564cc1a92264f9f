"""What one setting costs simulated on the whole installation against each profile alone: the CPU time
and GoCD's should-assign-work requests (an idle agent asks about every waiting job of its environments,
other profiles' included: gocd/gocd `BuildAssignmentService.findMatchingJob`).

    python -m benchmarks.whole_vs_alone                        # the first 20,000 jobs of the advisor's week
    python -m benchmarks.whole_vs_alone --jobs 100000 --first 100000 --set Predict=true

The trace is advisor_speed's (`WorkloadSpec(jobs=--jobs, days=7, week=WeekShape())`, seed 1), cut to its
first `--first` jobs; the setting defaults to IdleTimeout 10m with MinIdlePods 1, the kind of run the
advisor simulates whole. Both runs are in this process, one after the other; the simulated figures are
fixed by the seed, the times are this machine's (the load average is printed beside).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob, WeekShape, WorkloadSpec, describe, generate

DEFAULT_SETTING = ("Reuse=true", "IdleTimeout=10m", "MinIdlePods=1")


def timed(jobs: Sequence[TraceJob], policy: Policy) -> tuple[float, dict[str, PolicyResult]]:
    started = time.process_time()
    results = simulate_by_profile((jobs, policy, SimSettings(seed=1)))
    return time.process_time() - started, results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000, help="the week's jobs (100,000)")
    parser.add_argument("--first", type=int, default=20_000, help="simulate the first this many (20,000)")
    parser.add_argument(
        "--set", nargs="*", default=list(DEFAULT_SETTING), help="elastic properties, KEY=VALUE"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.first < 1:
        parser.error("--jobs and --first must be at least 1")
    if any("=" not in item for item in args.set):
        parser.error("--set takes KEY=VALUE items")
    setting = dict(item.split("=", 1) for item in args.set)
    jobs = generate(WorkloadSpec(jobs=args.jobs, days=7.0, week=WeekShape()), seed=1)[: args.first]
    profiles = sorted({job.profile for job in jobs})
    print(f"{describe(jobs)}; setting {setting}; load {os.getloadavg()[0]:.2f}", flush=True)

    whole_s, whole = timed(jobs, Policy("whole", per_profile={p: setting for p in profiles}))
    alone_s, asked_alone = 0.0, 0
    for profile in profiles:
        own = [job for job in jobs if job.profile == profile]
        seconds, result = timed(own, Policy("alone", per_profile={profile: setting}))
        alone_s, asked_alone = alone_s + seconds, asked_alone + result[profile].should_assign_asked
    # should_assign_asked is the whole run's count in each profile's row (run_summary.py).
    asked_whole = next(iter(whole.values())).should_assign_asked
    print(
        f"whole installation: {whole_s:.1f} s of CPU, {asked_whole:,} should-assign-work requests\n"
        f"each profile alone: {alone_s:.1f} s of CPU, {asked_alone:,} should-assign-work requests\n"
        f"whole / alone: {whole_s / alone_s:.2f}x the CPU, {asked_whole / max(1, asked_alone):.1f}x the "
        f"requests; load {os.getloadavg()[0]:.2f} after"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
