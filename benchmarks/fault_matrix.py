"""The fault matrix, long versions: each fault of tests/support/fault_cases.py held in the middle of a longer
churn on a real kube-apiserver and etcd (the full 20 s freeze), and the same churn without the fault (same
seed, the fault's time waited instead) as the baseline the extra pods are counted against.

    python -m benchmarks.fault_matrix [--cases apiserver-killed apiserver-frozen ...] [--hold 20]

Prints a Markdown table and writes benchmarks/results/fault_matrix.json (every figure of every case, the
health messages GoCD showed and the most frequent warning lines). Needs the control plane's binaries
(`python -m tests.support.control_plane build`). Recovery is defined in tests/support/fault_churn.py: `first
call` is the first API call of the backend that succeeded after the fault's end, `backlog` the time until
every job scheduled before the end was assigned, both in real seconds."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
from pathlib import Path

from tests.support.control_plane import ControlPlane, build
from tests.support.fault_cases import CASES, WatchGone
from tests.support.fault_churn import CaseResult, Churn, run_case
from tests.support.real_kube_fixtures import COMPACTING_ARGS

RESULTS = Path(__file__).resolve().parent / "results" / "fault_matrix.json"
LONG = Churn(seed=14, bursts=12, jobs_per_burst=8, gap_s=60.0, fault_after=3, hold_s=20.0, idle_timeout="3m")
# A stalled watch must be resumed before the client's read timeout (watch timeout + request timeout,
# 2 + 10 s here), or the client ends it itself and no re-watch happens: the 410 case holds less.
MAX_HOLD_S = {"watch-410": 9.0, "watch-cut": 0.0}


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(results: list[CaseResult], baseline: CaseResult) -> str:
    lines = [
        "| case | jobs (passed) | first call s | first create s | backlog s | pods (extra) | failed calls "
        "| warnings | registrations refused | reuse resumed | health messages during | after | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in [baseline, *results]:
        extra = r.pods_created - baseline.pods_created
        problems = r.violations + r.evidence + r.leftovers + ([r.failure] if r.failure else [])
        ok = not problems and r.passed == r.jobs and r.reused_pod is not None
        health = "<br>".join(r.health_during) or "none"
        failed = ", ".join(f"{n} {call}" for call, n in sorted(r.failed_calls.items())) or "none"
        lines.append(
            f"| {r.case} | {r.jobs} ({r.passed}) | {_cell(r.first_call_s)} | {_cell(r.first_create_s)} "
            f"| {_cell(r.backlog_s)} | {r.pods_created} ({extra:+d}) | {failed} | {r.warnings} "
            f"| {r.registrations_refused} "
            f"| {'yes' if r.reused_pod else 'NO'} | {health} | {'; '.join(r.health_after) or 'none'} "
            f"| {'yes' if ok else 'NO: ' + '; '.join(problems)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--hold", type=float, default=LONG.hold_s, help="real seconds each fault is held")
    parser.add_argument("--bursts", type=int, default=LONG.bursts)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    # The figures count the warnings (tests/support/fault_churn.py BackendWarnings); they are not printed.
    logging.basicConfig(level=logging.WARNING, handlers=[logging.NullHandler()])
    churn = dataclasses.replace(LONG, hold_s=args.hold, bursts=args.bursts)
    binaries = build()
    results: list[CaseResult] = []
    with (
        tempfile.TemporaryDirectory(prefix="fault-matrix-") as work,
        ControlPlane.start(binaries, Path(work) / "plain") as plain,
        ControlPlane.start(binaries, Path(work) / "compacting", COMPACTING_ARGS) as compacting,
    ):
        print(f"baseline: the churn without a fault ({churn.hold_s:.0f} s waited)", file=sys.stderr)
        baseline = run_case(plain, None, churn, timeout_s=600)
        for name in args.cases:
            fault = CASES[name]()
            hold = min(churn.hold_s, MAX_HOLD_S.get(name, churn.hold_s))
            print(f"{name}: held {hold:.0f} s", file=sys.stderr)
            plane = compacting if isinstance(fault, WatchGone) else plain
            results.append(run_case(plane, fault, dataclasses.replace(churn, hold_s=hold), timeout_s=600))
    report = {"churn": dataclasses.asdict(churn), "baseline": dataclasses.asdict(baseline),
              "cases": [dataclasses.asdict(r) for r in results]}  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results, baseline))
    print(f"\n(written to {args.output})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
