"""`python -m elastic_agent generate OUT.jsonl`: write a generated trace, to try the advisor or the
simulator on a workload like one's own before having a history to read (`trace` reads a real one).

Two kinds: `--pipelines` (the default) writes a pipeline-shaped trace (traces/pipelines.py: stages that
follow stages, fan-outs, downstream and timer triggers, failures), `--standard` the standard trace of
independent arrivals and bursts (workload.py). Kept with the advisor, as `advise` keeps its options; it
runs no simulation, so it imports nothing of the simulator. Exit status 0, or 2 with a sentence for a bad
option.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import (
    DEFAULT_ORIGIN,
    WeekShape,
    WorkloadSpec,
    describe,
    generate,
    write_trace,
)

HELP = "write a generated trace: pipeline-shaped (stages, fan-outs, triggers) or the standard one"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output", help="the trace to write: .jsonl or .csv")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--pipelines",
        type=int,
        default=PipelineSpec().commit_pipelines,
        metavar="N",
        help="a pipeline-shaped trace with N commit-triggered pipelines (default "
        f"{PipelineSpec().commit_pipelines}; their deploy pipelines and two timer pipelines come on top)",
    )
    kind.add_argument(
        "--standard", type=int, metavar="JOBS", help="the standard trace of JOBS independent jobs and bursts"
    )
    parser.add_argument("--days", type=float, default=7.0, help="days the trace covers (default 7, a week)")
    parser.add_argument(
        "--commits-per-hour",
        type=float,
        default=PipelineSpec().commits_per_hour,
        help=f"commits per office hour, the whole installation (default {PipelineSpec().commits_per_hour:g})",
    )
    parser.add_argument("--seed", type=int, default=1)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    output = Path(args.output)
    problem = None
    if output.suffix not in (".jsonl", ".json", ".csv"):
        problem = f"{args.output} must end in .jsonl or .csv (the trace formats the simulator reads)"
    elif args.days <= 0:
        problem = "--days must be more than 0"
    elif args.standard is not None and args.standard < 1:
        problem = "--standard needs 1 job or more"
    elif args.standard is None and (args.pipelines < 1 or args.commits_per_hour <= 0):
        problem = "--pipelines needs 1 or more and --commits-per-hour more than 0"
    if problem:
        print(f"error: {problem}", file=err)
        return 2
    if args.standard is not None:
        week = WeekShape() if args.days >= 7 else None
        jobs = generate(WorkloadSpec(jobs=args.standard, days=args.days, week=week), seed=args.seed)
    else:
        spec = PipelineSpec(
            days=args.days, commit_pipelines=args.pipelines, commits_per_hour=args.commits_per_hour
        )
        jobs = generate_pipelines(spec, seed=args.seed)
    try:
        write_trace(jobs, output, origin=DEFAULT_ORIGIN)
    except OSError as error:
        print(f"error: cannot write {output}: {error.strerror}", file=err)
        return 2
    print(f"{output}: {describe(jobs)}", file=out)
    return 0
