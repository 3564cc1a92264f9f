"""A trace with the waits its jobs would have had on an installation whose pods start in a known time
under a known policy: what `trace` would have measured there. The advisor's calibration is measured on
such traces (RESULTS.md), since their true start-up is known.

    python -m benchmarks.recorded_waits week.jsonl slow.jsonl --pod-start 90s --max-jobs 20000
    python -m benchmarks.recorded_waits week.jsonl reuse.jsonl --pod-start 90s \\
        --policy Reuse=true,IdleTimeout=10m
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from elastic_agent.advisor.current_policy import parse_current, parse_pod_starts
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy
from elastic_agent.traces.workload import TraceError, describe, read_trace, write_trace
from tests.support.measured_traces import recorded


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="the trace to replay (.jsonl or .csv)")
    parser.add_argument("output", help="the trace to write, with each job's `waited`")
    parser.add_argument("--pod-start", default="90s", help="the pods' median start-up (lognormal, sigma 0.3)")
    parser.add_argument("--policy", default="one-pod-per-job", help="as advise's --current")
    parser.add_argument("--max-jobs", type=int, help="only the first N jobs")
    parser.add_argument("--seed", type=int, default=5, help="the simulation's seed (not the advisor's 1)")
    args = parser.parse_args(argv)
    try:
        current = parse_current([args.policy])
        median = parse_pod_starts([args.pod_start]).everywhere
        trace = read_trace(args.trace)
    except (ValueError, TraceError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    assert median is not None
    jobs = trace.jobs[: args.max_jobs] if args.max_jobs else trace.jobs
    settings = SimSettings(seed=args.seed, boot_median_s=median, start=trace.start)
    waited = recorded(jobs, Policy("recorded", current.everywhere), settings)
    write_trace(waited, args.output, origin=trace.origin)
    print(f"{args.output}: {describe(waited)}; pods starting in about {median:g} s, {current.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
