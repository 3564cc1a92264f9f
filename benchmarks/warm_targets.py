"""The warm-start targets measured side by side in one run: Predict against the flat IdleTimeout curve and
MinIdlePods alone, on the pipeline week and a tuned GoCD server.

    python -m benchmarks.warm_targets                       # results/warm_targets.{md,json}
    python -m benchmarks.warm_targets --check dominance,half,refusals   # exit 1 when one is missed

One run simulates every row on the same trace and server: the floor (a warm pool that never runs dry),
flat IdleTimeouts (`--flat`, which must hold the reference, 10m), MinIdlePods alone with IdleTimeout 10m
(`--min-idle`), and Predict rows: Predict with a flat IdleTimeout (`--predict-idle`) and Predict with
a schedule (`--schedules`, each `ELSE/BUSY/QUANTILE`: the IdleTimeout outside the busy hours, the one in
them, and the warm pool's quantile of the busy hours' demand, 0 for none). The trace, the schedules'
learning and the settings are prediction_compare's pipeline part's (the tuned server: tick 1 s, keys a
day, elastic_agent/advisor/tuned_server.py). warm_targets_rules.py judges the targets on the measured
rows and prints a verdict per target; the results file has every row. Simulated figures are fixed by
the seed (virtual time: the machine's load changes the wall time only).

A bad option is a sentence and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import warm_targets_rules as rules
from benchmarks.prediction_compare import FLOOR, FLOOR_PROPERTIES, REFERENCE, RESULTS, SERVERS, cases, demands
from benchmarks.schedule_compare import schedule_policy
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.schedule_advice import Demand
from elastic_agent.traces.workload import DEFAULT_ORIGIN, describe
from profiles.quantities import parse_duration

FLAT = "10m,15m,20m,30m,45m,60m"
MIN_IDLE = "1,2,4,6,8"
PREDICT_IDLE = "5m,6m,7m"
SCHEDULES = "2m/10m/0,5m/10m/0.5,5m/20m/0.5,5m/30m/0.5,2m/30m/0.75,10m/60m/0.5"
REFERENCE_IDLE = "10m"
KINDS = ("floor", "flat", "MinIdlePods alone", "Predict")


def _durations(text: str, option: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    for item in items:
        try:
            parse_duration(item)
        except ValueError as error:
            raise ValueError(f"{option}: {item!r} is not a duration ({error})") from None
    if not items:
        raise ValueError(f"{option} needs at least one duration")
    return items


def _counts(text: str, option: str) -> list[int]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or not all(item.isdigit() and int(item) > 0 for item in items):
        raise ValueError(f"{option} must be whole numbers above 0, separated by commas (got {text!r})")
    return [int(item) for item in items]


def _schedules(text: str) -> list[tuple[str, str, float]]:
    found = []
    for item in (item.strip() for item in text.split(",") if item.strip()):
        parts = item.split("/")
        try:
            plain, busy, quantile = parts
            _durations(f"{plain},{busy}", "--schedules")
            share = float(quantile)
        except ValueError:
            raise ValueError(
                f"--schedules: {item!r} is not ELSE/BUSY/QUANTILE (two durations and a share from 0 to 1, "
                "e.g. 5m/30m/0.5)"
            ) from None
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"--schedules: the quantile of {item!r} must be from 0 to 1")
        found.append((plain, busy, share))
    return found


def grid(args: argparse.Namespace, demands_by_profile: dict[str, Demand]) -> list[tuple[str, Policy]]:
    """Every row, with its kind."""
    reuse = {"Reuse": "true"}
    rows: list[tuple[str, Policy]] = [("floor", Policy(FLOOR, FLOOR_PROPERTIES))]
    rows += [("flat", Policy(f"flat IdleTimeout {t}", reuse | {"IdleTimeout": t})) for t in args.flat]
    rows += [
        (
            "MinIdlePods alone",
            Policy(
                f"MinIdlePods {n}, IdleTimeout 10m", reuse | {"IdleTimeout": "10m", "MinIdlePods": str(n)}
            ),
        )
        for n in args.min_idle
    ]
    rows += [
        ("Predict", Policy(f"Predict, IdleTimeout {t}", reuse | {"IdleTimeout": t, "Predict": "true"}))
        for t in args.predict_idle
    ]
    for plain, busy, quantile in args.schedules:
        schedule, per_profile = schedule_policy(demands_by_profile, plain, busy, quantile)
        predicted = {name: {**props, "Predict": "true"} for name, props in per_profile.items()}
        rows.append(("Predict", Policy(f"Predict + {schedule.name}", reuse, per_profile=predicted)))
    return rows


def verdicts(kinds: Sequence[str], results: Sequence[PolicyResult]) -> tuple[list[rules.Verdict], list[str]]:
    """The verdict per target, and the knee's shortfall table when it is missed."""
    by_kind: dict[str, list[PolicyResult]] = {kind: [] for kind in KINDS}
    for kind, result in zip(kinds, results, strict=True):
        by_kind[kind].append(result)
    [floor] = by_kind["floor"]
    reference = next(r for r in by_kind["flat"] if r.policy == REFERENCE)
    predicted = by_kind["Predict"]
    found = rules.dominance(reference, by_kind["flat"] + by_kind["MinIdlePods alone"], predicted)
    knee = rules.knee(floor, reference, predicted)
    found += [knee, rules.half(reference, predicted), rules.refusals(results)]
    return found, [] if knee.met else rules.knee_shortfall(floor, reference, predicted)


def table(kinds: Sequence[str], results: Sequence[PolicyResult]) -> list[str]:
    lines = [
        "| kind | row | mean wait | p95 wait | idle pod-s/job | refused | Predict pods without a key |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind, r in sorted(
        zip(kinds, results, strict=True), key=lambda kr: (KINDS.index(kr[0]), kr[1].idle_pod_s_per_job)
    ):
        lines.append(
            f"| {kind} | {r.policy} | {r.wait_mean:.2f} s | {r.wait_p95:.1f} s | "
            f"{r.idle_pod_s_per_job:.0f} | {r.registrations_refused} | {r.predicted_without_key} |"
        )
    return lines


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flat", default=FLAT, help=f"flat IdleTimeouts, 10m among them (default {FLAT})")
    parser.add_argument(
        "--min-idle", default=MIN_IDLE, help=f"MinIdlePods alone, at IdleTimeout 10m ({MIN_IDLE})"
    )
    parser.add_argument(
        "--predict-idle", default=PREDICT_IDLE, help=f"Predict at flat IdleTimeouts ({PREDICT_IDLE})"
    )
    parser.add_argument(
        "--schedules", default=SCHEDULES, help=f"Predict with schedules, ELSE/BUSY/QUANTILE ({SCHEDULES})"
    )
    parser.add_argument(
        "--check", default="", help="targets whose miss exits 1: any of dominance, knee, half, refusals"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--learn-days", type=float, default=4.0, help="days the schedules are learnt on (4)")
    parser.add_argument("--workers", type=int, default=2, help="simulations side by side (default 2)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    try:
        args.flat = _durations(args.flat, "--flat")
        args.min_idle = _counts(args.min_idle, "--min-idle")
        args.predict_idle = _durations(args.predict_idle, "--predict-idle")
        args.schedules = _schedules(args.schedules)
    except ValueError as error:
        parser.error(str(error))
    if REFERENCE_IDLE not in args.flat:
        parser.error(
            f"--flat must hold {REFERENCE_IDLE}: the targets are measured against flat IdleTimeout 10m"
        )
    if not args.predict_idle and not args.schedules:
        parser.error("there must be some Predict row to judge")
    args.check = {name.strip() for name in args.check.split(",") if name.strip()}
    if unknown := args.check - set(rules.TARGETS):
        parser.error(f"--check: {', '.join(sorted(unknown))} is not a target ({', '.join(rules.TARGETS)})")
    if args.learn_days <= 0 or args.workers < 1:
        parser.error("--learn-days must be more than 0 and --workers at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    given = shlex.join(argv if argv is not None else sys.argv[1:])
    command = f"python -m benchmarks.warm_targets {given}".strip()
    base = SimSettings(seed=args.seed, pending_pods_count=1000, start=DEFAULT_ORIGIN.timestamp())
    server = SERVERS["tuned"]
    settings = server.settings(base)
    case = cases(("pipelines",), False, args.seed, 25.0)[0]
    demands_by_profile, where = demands(case, settings, args.learn_days)
    rows = grid(args, demands_by_profile)
    kinds = [kind for kind, _ in rows]
    print(f"{describe(case.jobs)}; {len(rows)} rows on the tuned server ({server.describe()})", flush=True)
    load_before, started = os.getloadavg()[0], time.perf_counter()

    def done(r: PolicyResult) -> None:
        print(f"  {rules.describe(r)}", flush=True)

    results = simulate_all([(case.jobs, policy, settings) for _, policy in rows], args.workers, done)
    found, shortfall = verdicts(kinds, results)
    cost = (
        f"{len(rows)} simulations, {args.workers} workers: {time.perf_counter() - started:.0f} s wall; load "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after."
    )
    text = [
        f"Command: `{command}` (commit {_commit()})",
        "",
        f"{describe(case.jobs)}, `{case.hint}`, seed {args.seed}; tuned server ({server.describe()}); "
        f"the schedules {where}.",
        "",
        *table(kinds, results),
        "",
        "Verdicts:",
        "",
        *(v.line() for v in found),
        *(["", "Where the mean goes, within the knee's idle bound:", "", *shortfall] if shortfall else []),
        "",
        cost,
        "",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "warm_targets.md").write_text("\n".join(text), encoding="utf-8")
    payload = {
        "command": command,
        "commit": _commit(),
        "server": vars(server),
        "rows": [{"kind": kind} | r.numbers() for kind, r in zip(kinds, results, strict=True)],
        "verdicts": [vars(v) for v in found],
    }
    (out / "warm_targets.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    print("\n".join(text), flush=True)
    missed = {v.name for v in found if not v.met}
    return 1 if missed & args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
