"""The advisor's calibration alone on a trace with measured waits: per profile, measured beside
simulated current with the calibrated start-up, and beside the simulator's default start-up, with the
runs and the time it took (RESULTS.md).

    python -m benchmarks.calibration_check slow.jsonl
    python -m benchmarks.calibration_check reuse.jsonl --current Reuse=true,IdleTimeout=10m
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from elastic_agent.advisor.calibration import calibrate
from elastic_agent.advisor.calibration_report import render_calibration
from elastic_agent.advisor.current_policy import GivenPodStart, parse_current
from elastic_agent.advisor.runner import Runner
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.traces.workload import TraceError, describe, read_trace


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--current", action="append", default=[], help="as advise's --current")
    parser.add_argument("--max-jobs", type=int, help="only the first N jobs")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timezone", default="UTC")
    args = parser.parse_args(argv)
    try:
        current = parse_current(args.current)
        trace = read_trace(args.trace)
    except (ValueError, TraceError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    jobs = trace.jobs[: args.max_jobs] if args.max_jobs else trace.jobs
    settings = SimSettings(seed=1, start=trace.start)
    print(f"{args.trace}: {describe(jobs)}\n")
    for title, given in (("default start-up", GivenPodStart(settings.boot_median_s)), ("calibrated", None)):
        runner = Runner(args.workers)
        started = time.perf_counter()
        try:
            calibration = calibrate(
                jobs, current, settings, given=given, timezone=args.timezone, runner=runner
            )
        finally:
            runner.close()
        print(f"### {title}: {calibration.runs} runs, {time.perf_counter() - started:.0f} s\n")
        print(render_calibration(calibration))
    return 0


if __name__ == "__main__":
    sys.exit(main())
