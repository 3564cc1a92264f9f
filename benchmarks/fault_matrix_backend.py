"""The backend's part of the fault matrix, long versions: a churn on the real kube-apiserver with the backend
as its own process, once without a fault (the baseline) and once per fault, same seed.

    python -m benchmarks.fault_matrix_backend       # table; benchmarks/results/fault_matrix_backend.json
    python -m benchmarks.fault_matrix_backend --bursts 4 --jobs-per-burst 8 --cases 503,hang

The faults and what is measured are described in tests/support/fault_backend_churn.py. `extra pods` is the
case's pods created minus the baselines' mean (the baseline pauses where a fault would be, for as long
as an outage): the churn is seeded, but its timing is real, and the spread of the baselines shows how
many pods either way are noise. A case where create-agent failed for a while (the backend dead) can
create fewer pods than the baseline: the jobs wait, and pods that become idle meanwhile take them.
WARNING and higher lines of the backends' logs are counted and their most frequent
shapes kept in the JSON file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.support.control_plane import ControlPlane, build
from tests.support.fault_backend_churn import (
    OUTAGE_S,
    SPEED,
    CallbackOutage,
    CaseResult,
    Churn,
    Fault,
    KillDuringRetirement,
    run_case,
)

RESULTS = Path(__file__).resolve().parent / "results" / "fault_matrix_backend.json"
CASES = {
    "disable": lambda: KillDuringRetirement(after_disable=True),
    "delete": lambda: KillDuringRetirement(after_disable=False),
    # As if the retiring mark had not been written (the pod's writes in backoff) before the kill.
    "disable-unmarked": lambda: KillDuringRetirement(after_disable=True, mark_lost=True),
    "503": lambda: CallbackOutage("503"),
    "hang": lambda: CallbackOutage("hang"),
    # Longer than the backend's 10 s callback timeout (real seconds): its calls time out, not dropped.
    "hang-long": lambda: CallbackOutage("hang", hold_s=15.0),
}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(baselines: list[CaseResult], cases: list[CaseResult]) -> str:
    mean = sum(b.pods_created for b in baselines) / len(baselines)
    rows = [
        "| case | jobs (passed) | reruns | recover s | backlog s | pods (extra) | failed calls: GoCD's, "
        "backend's | health messages GoCD showed | WARNING+ lines | registrations refused | invariants "
        "| left |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in [*baselines, *cases]:
        recover = result.repair_s if result.repair_s is not None else result.first_ok_s
        extra = result.pods_created - mean
        health = "; ".join(result.health_during) or "none"
        held = "held" if not result.violations and not result.mismatches and not result.evidence else "BROKEN"
        rows.append(
            f"| {result.case} | {result.jobs} ({result.passed}) | {result.rescheduled} | {_seconds(recover)} "
            f"| {_seconds(result.backlog_s)} | {result.pods_created} ({extra:+.0f}) "
            f"| {result.requests_failed}, {result.callbacks_failed} | {health[:300]} "
            f"| {result.warnings} | {result.registrations_refused} | {held} | {len(result.leftovers)} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bursts", type=int, default=8)
    parser.add_argument("--jobs-per-burst", type=int, default=12)
    parser.add_argument("--fault-after", type=int, default=3, help="bursts before the fault (default 3)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--baselines", type=int, default=2, help="runs without a fault (default 2)")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.cases.split(",") if name.strip()]
    unknown = [name for name in names if name not in CASES]
    if unknown:
        print(f"error: unknown case {', '.join(unknown)}; choose from {', '.join(CASES)}", file=sys.stderr)
        return 2
    churn = Churn(seed=args.seed, bursts=args.bursts, jobs_per_burst=args.jobs_per_burst,
                  fault_after=args.fault_after)  # fmt: skip
    timeout_s = 120.0 + 10.0 * args.bursts * args.jobs_per_burst / 6
    binaries = build()
    with tempfile.TemporaryDirectory(prefix="fault-matrix-backend-") as work, ControlPlane.start(
        binaries, Path(work)
    ) as plane:
        baselines = []
        for number in range(1, max(1, args.baselines) + 1):
            pause = Fault()
            pause.hold_s = OUTAGE_S
            baselines.append(run_case(plane, pause, churn, timeout_s))
            baselines[-1].case = f"baseline {number} (no fault)"
        cases = [run_case(plane, CASES[name](), churn, timeout_s) for name in names]
    text = table(baselines, cases)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "churn": dataclasses.asdict(churn),
                "speed": SPEED,
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "baselines": [dataclasses.asdict(baseline) for baseline in baselines],
                "cases": [dataclasses.asdict(case) for case in cases],
                "table": text,
            },
            indent=2,
        )
        + "\n"
    )
    broken = [c.case for c in cases if c.violations or c.mismatches or c.evidence or c.leftovers]
    broken += [b.case for b in baselines if b.violations or b.mismatches or b.leftovers]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
