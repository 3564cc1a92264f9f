"""ReuseSchedule against flat settings, on the standard trace and on a generated working week.

    python -m benchmarks.schedule_compare --trace standard    # writes results/schedule_compare_standard.*
    python -m benchmarks.schedule_compare --trace week        # writes results/schedule_compare_week.*
    python -m benchmarks.schedule_compare --quick             # both, small, a few policies: a smoke run
    python -m benchmarks.schedule_compare --trace week --holdout
                                            # writes results/schedule_compare_week_holdout.*

Each trace is replayed whole (every profile, as in benchmarks/compare.py) once per flat setting
(IdleTimeout, MinIdlePods 0, day and night) and once per schedule variant. A schedule variant gives every
profile the schedule the advisor proposes for it from the trace itself (schedule_advice.py: its own busy
hours, its own warm pool), with the variant's values: a busy IdleTimeout, a warm pool quantile and a
plain IdleTimeout outside the busy hours. With `--holdout` the schedules are proposed from the trace's
first days only and every policy is judged on the remaining days (advisor/holdout.py: the whole trace
simulated, the jobs and pod-seconds from the cut counted); without it, learned and judged on the whole
trace. The traces start on a Monday 00:00 UTC (workload.py's default
origin), so the standard trace's hour 14 is 14:00 and the week's first day is a Monday.

The targets schedules are judged against are reported, not asserted: p95 wait at most 10 s, idle
pod-seconds per job no higher than flat IdleTimeout 10m's on the same trace, no job waiting past the
create-agent re-send period.
Simulated figures are identical for a seed; wall times are not (and are not reported here).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from elastic_agent.advisor.holdout import Split, split_trace
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.schedule_advice import Demand, analyse, propose
from elastic_agent.traces.workload import (
    DEFAULT_ORIGIN,
    TraceJob,
    WeekShape,
    WorkloadSpec,
    describe,
    generate,
)

RESULTS = Path(__file__).parent / "results"
FLAT = ("2m", "10m", "30m", "60m")
REFERENCE = "10m"  # the idle cost a schedule must not exceed
# (plain IdleTimeout outside the busy hours, busy IdleTimeout, warm pool quantile)
VARIANTS = (
    ("2m", "30m", 0.0),
    ("10m", "60m", 0.0),
    ("10m", "60m", 0.5),
)
P95_TARGET_S = 10.0


@dataclass(frozen=True)
class TraceCase:
    key: str
    name: str
    command_hint: str
    jobs: list[TraceJob]


def traces(
    which: Sequence[str], quick: bool, seed: int, week_jobs: int, burst_share: float
) -> list[TraceCase]:
    day_jobs, day_days, week_jobs = (400, 0.25, 1500) if quick else (20_000, 1.0, week_jobs)
    day = WorkloadSpec(jobs=day_jobs, days=day_days, burst_share=burst_share)
    week = WorkloadSpec(jobs=week_jobs, days=7, week=WeekShape(), burst_share=burst_share)
    bursts = "" if burst_share == WorkloadSpec().burst_share else f", burst_share={burst_share:g}"
    suffix = "" if not bursts else f"_bursts{burst_share:g}"
    cases = []
    if "standard" in which:
        hint = f"WorkloadSpec(jobs={day.jobs}, days={day.days:g}{bursts})"
        cases.append(TraceCase(f"standard{suffix}", "standard trace", hint, generate(day, seed)))
    if "week" in which:
        hint = f"WorkloadSpec(jobs={week.jobs}, days=7, week=WeekShape(){bursts})"
        cases.append(TraceCase(f"week{suffix}", "generated week", hint, generate(week, seed)))
    return cases


def flat_policy(timeout: str) -> Policy:
    return Policy(
        f"flat IdleTimeout {timeout}", {"Reuse": "true", "IdleTimeout": timeout, "MinIdlePods": "0"}
    )


def schedule_policy(
    demands: dict[str, Demand], plain: str, busy: str, quantile: float
) -> tuple[Policy, dict[str, dict[str, str]]]:
    """Every profile with the schedule proposed from its own demand, all with one variant's values."""
    per_profile: dict[str, dict[str, str]] = {}
    for profile, demand in demands.items():
        proposals = propose(
            demand, quantiles=(quantile,), busy_idle_timeouts=(busy,), plain_idle_timeouts=(plain,)
        )
        per_profile[profile] = (
            proposals[0].properties()
            if proposals
            else {"Reuse": "true", "IdleTimeout": plain, "MinIdlePods": "0"}
        )
    warm = f", warm pool p{quantile * 100:g}" if quantile > 0 else ""
    name = f"schedule: busy {busy}{warm}; else {plain}"
    return Policy(name, {"Reuse": "true"}, per_profile=per_profile), per_profile


def pick(results: Sequence[PolicyResult], idle_cap: float | None) -> PolicyResult:
    """The cheapest run meeting the wait targets (within `idle_cap` when given), else the lowest p95 among
    those within the cap, else the lowest p95."""
    capped = [r for r in results if idle_cap is None or r.idle_pod_s_per_job <= idle_cap]
    good = [r for r in capped if r.wait_p95 <= P95_TARGET_S and r.waited_past_resend == 0]
    if good:
        return min(good, key=lambda r: r.idle_pod_s_per_job)
    return min(capped or results, key=lambda r: (r.wait_p95, r.idle_pod_s_per_job))


def table(results: Sequence[PolicyResult]) -> list[str]:
    lines = [
        "| policy | pods/job | wait mean | p95 | max | waited > 120 s | idle pod-s/job | boot pod-s/job "
        "| peak pods | registrations refused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.policy} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.wait_max:.1f} s | {r.waited_past_resend} | {r.idle_pod_s_per_job:.0f} | "
            f"{r.boot_pod_s_per_job:.1f} | {r.peak_pods} | {r.registrations_refused} |"
        )
    return lines


def verdicts(result: PolicyResult, reference: PolicyResult) -> str:
    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    return (
        f"p95 {result.wait_p95:.1f} s <= {P95_TARGET_S:g} s: {verdict(result.wait_p95 <= P95_TARGET_S)}; "
        f"idle {result.idle_pod_s_per_job:.0f} pod-s/job <= {reference.idle_pod_s_per_job:.0f} "
        f"(flat {REFERENCE}): {verdict(result.idle_pod_s_per_job <= reference.idle_pod_s_per_job)}; "
        f"{result.waited_past_resend} jobs past the re-send period: {verdict(result.waited_past_resend == 0)}"
    )


def section(
    case: TraceCase,
    results: Sequence[PolicyResult],
    schedules: dict[str, dict[str, dict[str, str]]],
    split: Split,
) -> str:
    flat = [r for r in results if r.policy.startswith("flat")]
    scheduled = [r for r in results if r.policy.startswith("schedule")]
    reference = next(r for r in flat if r.policy == flat_policy(REFERENCE).name)
    best_flat = pick(flat, None)
    best_schedule = pick(scheduled, reference.idle_pod_s_per_job)
    problems = [f"{r.policy}: {len(r.violations)} invariant violations" for r in results if r.violations]
    problems += [f"{r.policy}: {len(r.plugin_errors)} non-200 answers" for r in results if r.plugin_errors]
    problems += [f"{r.policy}: {r.jobs - r.assigned} jobs never ran" for r in results if r.assigned < r.jobs]
    chosen = schedules[best_schedule.policy]
    lines = [
        f"### {case.name}: {describe(case.jobs)}",
        "",
        f"`{case.command_hint}`, seed as given; time 0 is {DEFAULT_ORIGIN.isoformat()} (a Monday).",
        "",
        split.describe(case.jobs),
        "",
        *table(results),
        "",
        f"- Best single setting (the cheapest with p95 <= {P95_TARGET_S:g} s and none past re-send, else the "
        f"lowest p95): {best_flat.policy}: {verdicts(best_flat, reference)}.",
        f"- Best schedule (the same rule within flat {REFERENCE}'s idle cost, else the lowest p95 within it, "
        f"else the lowest p95): {best_schedule.policy}: {verdicts(best_schedule, reference)}.",
        f"- Problems: {'; '.join(problems) or 'none (no invariant violations, every answer 200)'}.",
        "",
        "Its schedules, per profile:",
        "",
        *[
            f"- {profile}: `{props.get('ReuseSchedule', '(no busy hours)')}`"
            for profile, props in sorted(chosen.items())
        ],
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--trace", choices=("standard", "week", "both"), default="both", help="which trace (default both)"
    )
    parser.add_argument("--week-jobs", type=int, default=30_000, help="jobs in the generated week (30000)")
    parser.add_argument(
        "--burst-share",
        type=float,
        default=WorkloadSpec().burst_share,
        help="share of jobs arriving in bursts of one pipeline (default 0.2, as the standard trace)",
    )
    parser.add_argument("--pending-pods", type=int, default=1000, help="pending_pods_count (as compare.py)")
    parser.add_argument("--quick", action="store_true", help="small traces, three policies each")
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="learn the schedules on the first days, judge every policy on the rest (advisor/holdout.py)",
    )
    parser.add_argument(
        "--learn-days", type=int, help="with --holdout: learning days (default: the first 4/7 of the days)"
    )
    parser.add_argument("--out", default=str(RESULTS), help="directory for the results")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="simulations side by side")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = SimSettings(
        seed=args.seed,
        pending_pods_count=args.pending_pods,
        start=DEFAULT_ORIGIN.timestamp(),
    )
    flat = ("10m", "60m") if args.quick else FLAT
    variants = VARIANTS[-1:] if args.quick else VARIANTS
    command = "python -m benchmarks.schedule_compare " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    which = ("standard", "week") if args.trace == "both" else (args.trace,)
    for case in traces(which, args.quick, args.seed, args.week_jobs, args.burst_share):
        profiles = sorted({job.profile for job in case.jobs})
        split = split_trace(case.jobs, DEFAULT_ORIGIN, learn_days=args.learn_days if args.holdout else 0)
        settings = replace(base, judged_from_s=split.at)
        learning = split.learning(case.jobs)
        demands = {
            p: analyse(
                [job for job in learning if job.profile == p],
                DEFAULT_ORIGIN,
                refill_window_s=settings.boot_median_s + settings.ping_s,
            )
            for p in profiles
        }
        policies = [flat_policy(t) for t in flat]
        schedules: dict[str, dict[str, dict[str, str]]] = {}
        for plain, busy, quantile in variants:
            policy, per_profile = schedule_policy(demands, plain, busy, quantile)
            policies.append(policy)
            schedules[policy.name] = per_profile
        print(f"{case.name}: {describe(case.jobs)}; {len(policies)} policies", flush=True)

        def done(result: PolicyResult) -> None:
            print(
                f"  {result.policy}: p95 {result.wait_p95:.1f} s, "
                f"idle {result.idle_pod_s_per_job:.0f} pod-s/job",
                flush=True,
            )

        results = simulate_all([(case.jobs, p, settings) for p in policies], args.workers, done)
        text = f"Command: `{command}`\n\n" + section(case, results, schedules, split)
        payload: dict[str, object] = {
            "command": command,
            "trace": describe(case.jobs),
            "split": split.describe(case.jobs),
            "results": [r.numbers() for r in results],
            "schedules": schedules,
        }
        tags = ("_holdout" if args.holdout else "") + ("_quick" if args.quick else "")
        name = f"schedule_compare_{case.key}{tags}"
        (out / f"{name}.md").write_text(text, encoding="utf-8")
        (out / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
