"""`advise` and `benchmarks.prediction_compare` side by side on the Predict rows, per profile.

    python -m benchmarks.advise_agreement            # the pipeline week of prediction_compare
    python -m benchmarks.advise_agreement --quick    # a small pipeline day: a smoke run

For each profile of the pipeline-shaped week (prediction_compare's `pipelines` case, same seed and
settings: pending_pods_count 1000, judged on the whole trace), three figures of `Predict=true` at
IdleTimeout 2m and 10m:
- *alone*: the profile's jobs simulated alone, as the advisor did before it ran such candidates on the
  whole installation (installation.py): a stage whose predecessor runs on another profile is never
  predicted;
- *advise*: the advisor's row, from `advise_trace` (whole_trace.py);
- *prediction_compare*: prediction_compare's policy of the same name simulated on the whole trace,
  split by profile.
The last two must agree to the digit; the job-weighted mean of the advisor's rows is then the whole
trace's row prediction_compare prints.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shlex
import sys
from collections.abc import Sequence

from benchmarks.prediction_compare import PREDICT_IDLE, cases, policies
from elastic_agent.advisor.advise import ScheduleOptions
from elastic_agent.advisor.holdout import split_trace
from elastic_agent.advisor.whole_trace import Request, advise_trace
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import DEFAULT_ORIGIN, describe


def _row(result: PolicyResult) -> str:
    return f"{result.wait_mean:.1f} s / {result.wait_p95:.1f} s / {result.idle_pod_s_per_job:.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--commits-per-hour", type=float, default=25.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.advise_agreement " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    (case,) = cases(("pipelines",), args.quick, args.seed, args.commits_per_hour)
    jobs = case.jobs
    settings = SimSettings(
        seed=args.seed, pending_pods_count=1000, start=DEFAULT_ORIGIN.timestamp()
    )
    print(f"{describe(jobs)}; `{case.hint}`", flush=True)
    request = Request(
        idle_timeouts=PREDICT_IDLE, min_idle=(0,), schedules=ScheduleOptions(enabled=False), p95_target=10.0
    )
    advice = advise_trace(
        jobs,
        DEFAULT_ORIGIN,
        split_trace(jobs, DEFAULT_ORIGIN, "UTC", 0),
        settings,
        request,
        workers=args.workers,
        tuned=None,
    )
    rows, _ = policies(case, settings, learn_days=4.0)
    profiles = sorted({job.profile for job in jobs})
    compared = {t: next(p for p in rows if p.name == f"prediction, IdleTimeout {t}") for t in PREDICT_IDLE}
    with concurrent.futures.ProcessPoolExecutor(args.workers) as pool:
        split = {t: pool.submit(simulate_by_profile, (jobs, compared[t], settings)) for t in PREDICT_IDLE}
        whole = {t: pool.submit(simulate, (jobs, compared[t], settings)) for t in PREDICT_IDLE}
        alone = {
            (t, p): pool.submit(
                simulate,
                ([j for j in jobs if j.profile == p], Policy("alone", compared[t].elastic), settings),
            )
            for t in PREDICT_IDLE
            for p in profiles
        }
        lines = [
            f"Command: `{command}`",
            "",
            "| profile | jobs | Predict at | alone (before) | advise | prediction_compare, split | equal |",
            "|---|---:|---|---:|---:|---:|:---:|",
        ]
        agreed = True
        for t in PREDICT_IDLE:
            label = f"Predict=true IdleTimeout={t}"
            weighted = 0.0
            for profile in profiles:
                found = next(a for a in advice.advices if a.profile == profile)
                mine = next(c.result for c in found.candidates if c.label == label)
                theirs = split[t].result()[profile]
                same = {k: v for k, v in mine.numbers().items() if k not in ("wall_s", "policy")} == {
                    k: v for k, v in theirs.numbers().items() if k not in ("wall_s", "policy")
                }
                agreed &= same
                weighted += mine.wait_mean * mine.assigned
                before = alone[(t, profile)].result()
                lines.append(
                    f"| {profile} | {found.jobs} | {t} | {_row(before)} | {_row(mine)} | "
                    f"{_row(theirs)} | {'yes' if same else 'NO'} |"
                )
            total = whole[t].result()
            assigned = sum(
                next(c.result for c in a.candidates if c.label == label).assigned for a in advice.advices
            )
            lines.append(
                f"| all (prediction_compare's row: {_row(total)}) | {len(jobs)} | {t} | | "
                f"mean {weighted / max(1, assigned):.2f} s (job-weighted) | mean {total.wait_mean:.2f} s | |"
            )
    lines += ["", "Each cell: mean wait / p95 wait / idle pod-s per job."]
    print("\n".join(lines), flush=True)
    return 0 if agreed else 1


if __name__ == "__main__":
    raise SystemExit(main())
