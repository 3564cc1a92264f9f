"""Side by side on one trace: one pod per job, the earlier reuse attempt's rules, and this project's reuse
at several idle timeouts. Writes a markdown table, a JSON file and PNG plots under benchmarks/results/.

    python -m benchmarks.compare --jobs 20000 --days 1              # generate the standard trace
    python -m benchmarks.compare --trace my-history.jsonl           # replay your own trace
    python -m benchmarks.compare --jobs 300 --days 0.05 --quick     # seconds: the CI smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.legacy_reuse import legacy_policy
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import (
    TraceJob,
    WorkloadSpec,
    describe,
    generate,
    load_trace,
    write_trace,
)

RESULTS = Path(__file__).parent / "results"
PLOT_LINKS = ["![wait distribution](wait_distribution.png)", "![pods over time](pods_over_time.png)", ""]
ONE_POD_PER_JOB = "one pod per job"
REUSE_PREFIX = "reuse, "


def standard_policies(idle_timeouts: Sequence[str] = ("2m", "10m", "30m", "60m")) -> list[Policy]:
    policies = [Policy(ONE_POD_PER_JOB, {"Reuse": "false"}), legacy_policy()]
    policies += [
        Policy(f"{REUSE_PREFIX}IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t}) for t in idle_timeouts
    ]
    return policies


def table(results: Sequence[PolicyResult], resend_s: float) -> str:
    lines = [
        "| policy | jobs run | pods created | pods/job | wait mean | p50 | p95 | p99 | max | "
        f"waited > {resend_s:g} s | idle pod-s/job | boot pod-s/job | peak pods | registrations refused "
        "| sim wall time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.policy} | {r.completed}/{r.jobs} | {r.pods_created} | {r.pods_per_job:.3f} | "
            f"{r.wait_mean:.1f} s | {r.wait_p50:.1f} s | {r.wait_p95:.1f} s | {r.wait_p99:.1f} s | "
            f"{r.wait_max:.1f} s | {r.waited_past_resend} | {r.idle_pod_s_per_job:.0f} | "
            f"{r.boot_pod_s_per_job:.1f} | {r.peak_pods} | {r.registrations_refused} | {r.wall_s:.1f} s |"
        )
    return "\n".join(lines)


def problems(results: Sequence[PolicyResult]) -> str:
    notes = []
    for r in results:
        if r.violations:
            notes.append(f"- {r.policy}: {len(r.violations)} invariant violations, e.g. {r.violations[0]}")
        if r.plugin_errors:
            notes.append(f"- {r.policy}: {len(r.plugin_errors)} non-200 answers, e.g. {r.plugin_errors[0]}")
        if r.assigned < r.jobs:
            notes.append(f"- {r.policy}: {r.jobs - r.assigned} jobs never got an agent before the run ended")
    return "\n".join(notes) or "- none: no invariant violations, every answer 200, every job ran"


def targets(results: Sequence[PolicyResult], resend_s: float) -> str:
    """The targets for reuse on the standard trace (RESULTS.md section 1), per reuse policy, against one
    pod per job."""
    baseline = next((r for r in results if r.policy == ONE_POD_PER_JOB), None)
    reuse = [r for r in results if r.policy.startswith(REUSE_PREFIX)]
    if baseline is None or not reuse:
        return ""

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    fifth = baseline.wait_mean / 5
    header = "| target | " + " | ".join(r.policy.removeprefix(REUSE_PREFIX) for r in reuse) + " |"
    rows = [
        header,
        "|---|" + "---|" * len(reuse),
        "| pods created at most 5 % of jobs | "
        + " | ".join(f"{r.pods_per_job:.1%}: {verdict(r.pods_per_job <= 0.05)}" for r in reuse)
        + " |",
        f"| mean wait at most a fifth of one pod per job's ({fifth:.1f} s) | "
        + " | ".join(f"{r.wait_mean:.1f} s: {verdict(r.wait_mean <= fifth)}" for r in reuse)
        + " |",
        f"| no job waiting past the re-send period ({resend_s:g} s) | "
        + " | ".join(f"{r.waited_past_resend} jobs: {verdict(r.waited_past_resend == 0)}" for r in reuse)
        + " |",
    ]
    return "\n".join(rows)


def plot(results: Sequence[PolicyResult], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    figure, axis = plt.subplots(figsize=(9, 5))
    for r in results:
        waits = r.waits or [0.0]
        shares = [(i + 1) / len(waits) for i in range(len(waits))]
        axis.step([max(w, 0.01) for w in waits], shares, where="post", label=r.policy)
    axis.set_xscale("log")
    axis.set_xlabel("wait from scheduling to assignment (s, log scale)")
    axis.set_ylabel("share of jobs (cumulative)")
    axis.set_title("Wait-time distribution per policy")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    path = out / "wait_distribution.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    written.append(path)

    figure, axis = plt.subplots(figsize=(9, 5))
    for r in results:
        if not r.timeline:
            continue
        origin = r.timeline[0][0]
        step = max(1, len(r.timeline) // 4000)  # at most a few thousand points per line
        points = r.timeline[::step]
        axis.step(
            [(t - origin) / 3600 for t, _ in points], [n for _, n in points], where="post", label=r.policy
        )
    axis.set_xlabel("hours since the first pod")
    axis.set_ylabel("pods existing")
    axis.set_title("Pods over time")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    path = out / "pods_over_time.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    written.append(path)
    return written


def run(
    trace: Sequence[TraceJob],
    policies: Sequence[Policy],
    settings: SimSettings,
    *,
    verbose: bool = True,
    workers: int = 1,
) -> list[PolicyResult]:
    def done(result: PolicyResult) -> None:
        if verbose:
            print(
                f"  {result.policy}: {result.pods_created} pods, mean wait {result.wait_mean:.1f} s, "
                f"{result.wall_s:.1f} s wall ({result.events} events)",
                flush=True,
            )

    return simulate_all([(trace, policy, settings) for policy in policies], workers, done)


def report(
    results: Sequence[PolicyResult],
    trace: Sequence[TraceJob],
    settings: SimSettings,
    command: str,
    *,
    plots: bool = True,
) -> str:
    return "\n".join(
        [
            "# Reuse comparison",
            "",
            f"Command: `{command}`",
            "",
            f"Trace: {describe(trace)}.",
            f"Settings: pod boot lognormal around {settings.boot_median_s:g} s "
            f"(sigma {settings.boot_sigma:g}), "
            f"{settings.polling()}, "
            f"create-agent re-sent every {settings.resend_s:g} s, pings every {settings.ping_s:g} s, "
            f"pending_pods_count {settings.pending_pods_count}, seed {settings.seed}.",
            f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}.",
            "",
            table(results, settings.resend_s),
            "",
            "Problems seen:",
            problems(results),
            "",
            "Targets for reuse (issue 5; reported, not asserted):",
            "",
            targets(results, settings.resend_s) or "- (needs one pod per job and a reuse policy)",
            "",
            *(PLOT_LINKS if plots else []),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", help="a trace file (.jsonl or .csv) to replay instead of generating one")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs to generate (default 20000)")
    parser.add_argument(
        "--days", type=float, default=1.0, help="the generated jobs spread over this many days"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--idle-timeouts", default="2m,10m,30m,60m", help="this project's IdleTimeouts to compare"
    )
    parser.add_argument(
        "--pending-pods",
        type=int,
        default=1000,
        help="the cluster's pending_pods_count (default 1000: the earlier attempt caps ALL pods with it)",
    )
    parser.add_argument("--out", default=str(RESULTS), help="directory for the results")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--quick", action="store_true", help="only one idle timeout (10m): the smoke run")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="simulations run side by side in this many processes (default: one per core)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.trace:
        trace = load_trace(args.trace)
    else:
        trace = generate(WorkloadSpec(jobs=args.jobs, days=args.days), seed=args.seed)
        write_trace(trace, out / "trace.jsonl")
    settings = SimSettings(seed=args.seed, pending_pods_count=args.pending_pods)
    timeouts = ["10m"] if args.quick else [t.strip() for t in args.idle_timeouts.split(",") if t.strip()]
    print(f"{describe(trace)}; {len(timeouts) + 2} policies, {args.workers} worker(s)", flush=True)
    started = time.perf_counter()
    results = run(trace, standard_policies(timeouts), settings, workers=args.workers)
    command = "python -m benchmarks.compare " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = report(results, trace, settings, command, plots=not args.no_plots)
    text += (
        f"\nTotal wall time: {time.perf_counter() - started:.1f} s, simulations run in "
        f"{args.workers} process(es) on {os.cpu_count()} cores.\n"
    )
    (out / "comparison.md").write_text(text, encoding="utf-8")
    payload = {"command": command, "trace": describe(trace), "results": [r.numbers() for r in results]}
    (out / "comparison.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    if not args.no_plots:
        plot(results, out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
