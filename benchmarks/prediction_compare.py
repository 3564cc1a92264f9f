"""What prediction buys, side by side: one pod per job, flat IdleTimeouts, a schedule, prediction alone and
prediction with a schedule, in virtual time, on the same trace and in the same run.

    python -m benchmarks.prediction_compare --trace pipelines   # results/prediction_compare_pipelines.*
    python -m benchmarks.prediction_compare --trace standard    # results/prediction_compare_standard.*
    python -m benchmarks.prediction_compare --quick             # both, small: a smoke run
    python -m benchmarks.prediction_compare --server both       # also on a tuned GoCD server (*_tuned.*)

Traces: `pipelines` is a pipeline-shaped working week (traces/pipelines.py, `PipelineSpec` with
`--commits-per-hour`), `standard` the standard trace of benchmarks/compare.py (`WorkloadSpec(jobs=20000,
days=1)`), both from Monday 00:00 UTC. Every profile takes the same settings, as in compare.py.

The schedule: each profile gets the schedule schedule_advice.py proposes from its own demand, with the
values section 10 of RESULTS.md found best on the p95 (busy 60m with a warm pool at the median, else
10m). It is learnt on the trace's first `--learn-days` days (the rest is days it did not see) when the
trace is longer than that, else on the whole trace; the table reports every row on the whole trace.

Prediction is `Predict=true` (elastic_agent/forecast): the backend learns which stage follows which and
starts the next stage's pods ahead with banked registration keys. Its rows report pods started ahead,
pods a prediction wanted but had no key for, and hits (started ahead and given a job of the stage they
were started for).

The GoCD server (`--server`): GoCD's defaults (assignment tick 5 s, registration keys valid 30 minutes)
or a tuned one (tick 1 s, keys 24 hours; docs/install.md, "A GoCD server tuned for reuse"), the cluster
profile's auto_register_key_expiry following it. The floor is a warm pool that never runs dry
(IdleTimeout 24h, MinIdlePods 40 on every profile): no plugin does better on that server, since a job
still waits for the tick and for an idle agent's next poll. Each row is also reported for Monday's first
office hour alone (08:00 to 09:00, when the hourly smoke run starts and the morning ramp is half way),
after the trace's quiet night.

The targets prediction is judged against are reported, not asserted: on the pipeline trace p95 at most
max(10 s, the floor's p95 + 3 s) and mean at most the floor's mean + 1.5 s, at idle pod-seconds per job
no higher than flat IdleTimeout 10m's on the same server, no registration refused; on the standard
trace prediction no worse than the same setting without it.
Simulated figures are fixed by the seed; the CPU time the simulations took (all worker processes) and
the load average are printed beside.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.schedule_compare import schedule_policy
from elastic_agent.advisor.together import GOCD_DEFAULTS, TUNED
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.schedule_advice import Demand, analyse
from elastic_agent.traces.workload import DAY_S, DEFAULT_ORIGIN, TraceJob, WorkloadSpec, describe, generate

RESULTS = Path(__file__).parent / "results"
FLAT = ("2m", "10m", "30m", "60m")
REFERENCE = "flat IdleTimeout 10m"
SCHEDULE_VALUES = ("10m", "60m", 0.5)  # plain IdleTimeout, busy IdleTimeout, warm pool quantile
PREDICT_IDLE = ("2m", "10m")
P95_TARGET_S, P95_OVER_FLOOR_S, MEAN_OVER_FLOOR_S = 10.0, 3.0, 1.5
FLOOR = "floor: a warm pool that never runs dry"
FLOOR_PROPERTIES = {"Reuse": "true", "IdleTimeout": "24h", "MinIdlePods": "40"}
FIRST_HOUR = (8 * 3600.0, 9 * 3600.0)  # Monday 08:00 to 09:00, from the trace's time 0 (a Monday 00:00)
SERVERS = {"default": GOCD_DEFAULTS, "tuned": TUNED}


@dataclass(frozen=True)
class Case:
    key: str
    hint: str
    jobs: list[TraceJob]


def cases(which: Sequence[str], quick: bool, seed: int, commits_per_hour: float) -> list[Case]:
    found = []
    if "pipelines" in which:
        spec = PipelineSpec(
            days=1.0 if quick else 7.0,
            commit_pipelines=20 if quick else 60,
            commits_per_hour=commits_per_hour / 3 if quick else commits_per_hour,
        )
        hint = f"PipelineSpec(days={spec.days:g}, commit_pipelines={spec.commit_pipelines}, "
        hint += f"commits_per_hour={spec.commits_per_hour:g})"
        found.append(Case("pipelines", hint, generate_pipelines(spec, seed)))
    if "standard" in which:
        spec_std = WorkloadSpec(jobs=400, days=0.25) if quick else WorkloadSpec(jobs=20_000, days=1.0)
        hint = f"WorkloadSpec(jobs={spec_std.jobs}, days={spec_std.days:g})"
        found.append(Case("standard", hint, generate(spec_std, seed)))
    return found


def demands(case: Case, settings: SimSettings, learn_days: float) -> tuple[dict[str, Demand], str]:
    """Each profile's demand, learnt on the trace's first `learn_days` days when it is longer, and where
    it was learnt (schedule_frontier.py learns the same way)."""
    span_days = (case.jobs[-1].at if case.jobs else 0.0) / DAY_S
    if span_days > learn_days:
        learnt = [job for job in case.jobs if job.at < learn_days * DAY_S]
        where = f"learnt on the first {learn_days:g} days, reported on all {span_days:.0f}"
    else:
        learnt, where = case.jobs, "learnt on the whole trace (it is not longer than --learn-days)"
    found = {
        p: analyse(
            [job for job in learnt if job.profile == p],
            DEFAULT_ORIGIN,
            refill_window_s=settings.boot_median_s + settings.ping_s,
        )
        for p in sorted({job.profile for job in case.jobs})
    }
    return found, where


def policies(case: Case, settings: SimSettings, learn_days: float) -> tuple[list[Policy], str]:
    """The rows, and where the schedule was learnt."""
    demands_by_profile, where = demands(case, settings, learn_days)
    plain, busy, quantile = SCHEDULE_VALUES
    schedule, per_profile = schedule_policy(demands_by_profile, plain, busy, quantile)
    rows = [Policy("one pod per job", {"Reuse": "false"})]
    rows += [Policy(f"flat IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t}) for t in FLAT]
    rows.append(Policy(schedule.name, schedule.elastic, per_profile=schedule.per_profile))
    rows += [
        Policy(f"prediction, IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t, "Predict": "true"})
        for t in PREDICT_IDLE
    ]
    predicted = {name: {**props, "Predict": "true"} for name, props in per_profile.items()}
    rows.append(Policy(f"prediction + {schedule.name}", {"Reuse": "true"}, per_profile=predicted))
    rows.append(Policy(FLOOR, FLOOR_PROPERTIES))
    return rows, where


def table(results: Sequence[PolicyResult]) -> list[str]:
    lines = [
        "| policy | pods/job | mean wait | p95 wait | idle pod-s/job | registrations refused | "
        "predicted pods started | predicted pods without a key | hits | Monday 08-09: jobs, mean, p95 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        first = r.within(*FIRST_HOUR)
        lines.append(
            f"| {r.policy} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.idle_pod_s_per_job:.0f} | {r.registrations_refused} | {r.predicted_started} | "
            f"{r.predicted_without_key} | {r.predicted_hits} | "
            f"{first.jobs}, {first.wait_mean:.1f} s, {first.wait_p95:.1f} s |"
        )
    return lines


def verdicts(case: Case, results: Sequence[PolicyResult]) -> list[str]:
    by_name = {r.policy: r for r in results}
    reference, floor = by_name[REFERENCE], by_name[FLOOR]
    p95_target = max(P95_TARGET_S, floor.wait_p95 + P95_OVER_FLOOR_S)
    mean_target = floor.wait_mean + MEAN_OVER_FLOOR_S
    lines = []
    for r in results:
        if not r.policy.startswith("prediction"):
            continue
        if case.key == "pipelines":
            checks = [
                (
                    f"p95 {r.wait_p95:.1f} s <= {p95_target:.1f} s (max of 10 s and the floor's + 3 s)",
                    r.wait_p95 <= p95_target,
                ),
                (
                    f"mean {r.wait_mean:.1f} s <= {mean_target:.1f} s (the floor's + 1.5 s)",
                    r.wait_mean <= mean_target,
                ),
                (
                    f"idle {r.idle_pod_s_per_job:.0f} <= flat 10m's "
                    f"{reference.idle_pod_s_per_job:.0f} pod-s/job",
                    r.idle_pod_s_per_job <= reference.idle_pod_s_per_job,
                ),
                (f"{r.registrations_refused} registrations refused", r.registrations_refused == 0),
            ]
        else:
            base = _without_prediction(r.policy, by_name)
            checks = [
                (f"mean {r.wait_mean:.1f} s vs {base.wait_mean:.1f} s", r.wait_mean <= base.wait_mean + 0.05),
                (f"p95 {r.wait_p95:.1f} s vs {base.wait_p95:.1f} s", r.wait_p95 <= base.wait_p95 + 0.05),
                (f"{r.registrations_refused} registrations refused", r.registrations_refused == 0),
            ]
            checks[0] = (checks[0][0] + f" ({base.policy})", checks[0][1])
        said = "; ".join(f"{text}: {'met' if ok else 'missed'}" for text, ok in checks)
        lines.append(f"- {r.policy}: {said}.")
    return lines


def beside(default: Sequence[PolicyResult], tuned: Sequence[PolicyResult]) -> list[str]:
    """The two servers' rows side by side: mean, p95 and idle pod-seconds per job."""
    lines = [
        "| policy | default: mean / p95 / idle | tuned: mean / p95 / idle |",
        "|---|---:|---:|",
    ]
    for a, b in zip(default, tuned, strict=True):
        lines.append(
            f"| {a.policy} | {a.wait_mean:.1f} s / {a.wait_p95:.1f} s / {a.idle_pod_s_per_job:.0f} | "
            f"{b.wait_mean:.1f} s / {b.wait_p95:.1f} s / {b.idle_pod_s_per_job:.0f} |"
        )
    return lines


def _without_prediction(name: str, by_name: dict[str, PolicyResult]) -> PolicyResult:
    if name.startswith("prediction + "):
        return by_name[name.removeprefix("prediction + ")]
    return by_name[f"flat {name.removeprefix('prediction, ')}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", choices=("pipelines", "standard", "both"), default="both")
    parser.add_argument("--seed", type=int, default=1, help="the traces' and the simulation's seed")
    parser.add_argument(
        "--sim-seed", type=int, help="the simulation's seed alone (boot times: the noise of the draws)"
    )
    parser.add_argument("--commits-per-hour", type=float, default=25.0, help="the pipeline trace's (25)")
    parser.add_argument("--learn-days", type=float, default=4.0, help="days the schedule is learnt on (4)")
    parser.add_argument("--pending-pods", type=int, default=1000, help="pending_pods_count (as compare.py)")
    parser.add_argument("--workers", type=int, default=2, help="simulations side by side (default 2)")
    parser.add_argument("--quick", action="store_true", help="small traces: a smoke run")
    parser.add_argument(
        "--server",
        choices=("default", "tuned", "both"),
        default="default",
        help=f"GoCD's defaults ({GOCD_DEFAULTS.describe()}), a tuned server ({TUNED.describe()}), or both",
    )
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = SimSettings(
        seed=args.seed if args.sim_seed is None else args.sim_seed,
        pending_pods_count=args.pending_pods,
        start=DEFAULT_ORIGIN.timestamp(),
    )
    command = "python -m benchmarks.prediction_compare " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    which = ("pipelines", "standard") if args.trace == "both" else (args.trace,)
    servers = ("default", "tuned") if args.server == "both" else (args.server,)
    for case in cases(which, args.quick, args.seed, args.commits_per_hour):
        rows, where = policies(case, settings, args.learn_days)
        print(f"{case.key}: {describe(case.jobs)}; {len(rows)} policies x {len(servers)} servers", flush=True)
        load_before = os.getloadavg()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()

        def done(result: PolicyResult) -> None:
            print(
                f"  {result.policy}: p95 {result.wait_p95:.1f} s, idle {result.idle_pod_s_per_job:.0f}",
                flush=True,
            )

        runs = [(case.jobs, p, SERVERS[name].settings(settings)) for name in servers for p in rows]
        every = simulate_all(runs, args.workers, done)
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
        wall_s = time.perf_counter() - started
        load_after = os.getloadavg()
        cost = (
            f"{len(runs)} simulations in virtual time, {args.workers} worker processes: "
            f"{cpu_s:.0f} s of CPU in all, {wall_s:.0f} s wall; load average {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after."
        )
        by_server = {name: every[k * len(rows) : (k + 1) * len(rows)] for k, name in enumerate(servers)}
        for name, results in by_server.items():
            server = SERVERS[name]
            heading = f"### {case.key} trace, {name} GoCD server ({server.describe()}): {describe(case.jobs)}"
            text = "\n".join(
                [
                    f"Command: `{command}`",
                    "",
                    heading,
                    "",
                    f"`{case.hint}`, seed {args.seed} (simulation {settings.seed}); the schedule {where}.",
                    "",
                    *table(results),
                    "",
                    *verdicts(case, results),
                    "",
                    cost,
                    "",
                ]
            )
            payload = {
                "command": command,
                "trace": describe(case.jobs),
                "server": vars(server),
                "schedule": where,
                "cpu_s": cpu_s,
                "wall_s": wall_s,
                "load_before": load_before,
                "load_after": load_after,
                "results": [r.numbers() | {"monday_08_09": vars(r.within(*FIRST_HOUR))} for r in results],
            }
            tuned = "_tuned" if name == "tuned" else ""
            stem = f"prediction_compare_{case.key}{tuned}{'_quick' if args.quick else ''}"
            (out / f"{stem}.md").write_text(text, encoding="utf-8")
            (out / f"{stem}.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
            print(text, flush=True)
        if len(by_server) == 2:
            print("\n".join(beside(by_server["default"], by_server["tuned"])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
