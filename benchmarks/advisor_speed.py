"""How long the advisor takes for a week of history: `python -m elastic_agent advise` on a generated
100,000-job working week (office hours, quiet nights and weekends: workload.WeekShape), over its whole
candidate set, with the wall time of every simulation.

    python -m benchmarks.advisor_speed                     # 100,000 jobs, a week: the target's size
    python -m benchmarks.advisor_speed --jobs 5000         # a minute or so
    python -m benchmarks.advisor_speed --exhaustive        # every candidate run (the reference)
    python -m benchmarks.advisor_speed --engine full       # the full engine (the reference engine)

Other work on the machine's cores slows every run: the load average
before and after is printed with the times, and the CPU time of this process and of the workers it
waited for (resource.getrusage), which other work changes far less.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from elastic_agent.advisor.whole_trace import Request, run_advisor
from elastic_agent.traces.workload import (
    DEFAULT_ORIGIN,
    WeekShape,
    WorkloadSpec,
    describe,
    generate,
    write_trace,
)

TARGET_JOBS = 100_000
TARGET_S = 300.0
P95_TARGET_S = 10.0  # the advise command's default (--p95-target): run_advisor's own default is none


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=TARGET_JOBS)
    parser.add_argument("--days", type=float, default=7.0, help="the week's jobs spread over this many days")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--report", type=Path, help="also write the advisor's report here")
    parser.add_argument("--exhaustive", action="store_true", help="run every candidate (the reference)")
    parser.add_argument(
        "--engine", choices=("policy", "full"), default="policy", help="how each run is simulated (advise's)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.days <= 0:
        parser.error("--jobs must be at least 1 and --days more than 0")
    # As `advise` does: the simulated backends' warnings are about simulated pods (a warm pod short of a
    # key, say), thousands of lines a run that the report sums up; only errors reach the terminal.
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    trace = generate(WorkloadSpec(jobs=args.jobs, days=args.days, week=WeekShape()), seed=args.seed)
    command = "python -m benchmarks.advisor_speed " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{describe(trace)}; {args.workers} worker(s)", flush=True)
    runs: list[str] = []
    report: list[str] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "week.jsonl"
        write_trace(trace, path, origin=DEFAULT_ORIGIN)
        started, cpu_started = time.perf_counter(), _cpu_s()
        status = run_advisor(
            str(path),
            Request(p95_target=P95_TARGET_S, exhaustive=args.exhaustive),
            workers=args.workers,
            out=report.append,
            progress=_printing(runs),
            seed=args.seed,
            engine=args.engine,
        )
        wall, cpu = time.perf_counter() - started, _cpu_s() - cpu_started
    load_after = os.getloadavg()
    if args.report is not None:
        args.report.write_text("\n".join(report) + "\n", encoding="utf-8")
    seconds = [float(line.rsplit(": ", 1)[1].removesuffix(" s")) for line in runs]
    print(
        "\n".join(
            [
                "",
                f"Command: `{command.strip()}`",
                f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}; load average "
                f"{load_before[0]:.2f} before, {load_after[0]:.2f} after (1 minute).",
                f"The advisor: {len(runs)} simulations of {args.jobs:,} jobs' profiles in {wall:.1f} s of "
                f"wall time ({sum(seconds):.1f} s of simulation summed over the workers; the longest "
                f"{max(seconds, default=0.0):.1f} s); {cpu:.1f} s of CPU, workers included"
                f"{' (exhaustive)' if args.exhaustive else ''}, the {args.engine} engine.",
                f"Target: {TARGET_JOBS:,} jobs over the whole candidate set in at most {TARGET_S:g} s.",
            ]
        )
    )
    return status


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the advisor's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _printing(runs: list[str]) -> Callable[[str], None]:
    def progress(line: str) -> None:
        runs.append(line)
        print(line, flush=True)

    return progress


if __name__ == "__main__":
    raise SystemExit(main())
