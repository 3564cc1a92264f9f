"""What `python -m elastic_agent trace` costs a GoCD server: calls and time per trace size, against the
GoCD REST double of the suite (tests/support/doubles/gocd_rest, served over HTTP on loopback), and
what a nightly re-run on the same output costs.

For each size, a pipeline-shaped week (traces/pipelines.py) is served as GoCD's history, `trace` reads
all of it (`--since` the week's start, the default concurrency), and the run's calls by endpoint, stage
runs read, rows written and wall time are printed; the rows are checked against the double's ground
truth. `--nightly` then serves the biggest week as it stood a day before its end, reads it, and reads
the last day on top of that, as a cron job would.

The double runs in the same Python process as the client (its threads share one interpreter), so the
times are an upper bound for one client against a server of its own.

    .venv/bin/python -m benchmarks.trace_cost [--sizes 2,10,40,120] [--concurrency 4] [--nightly]

`--sizes` are commits per office hour of the generated week (60 pipelines): 2, 10, 40 and 120 give about
2,500, 10,000, 38,000 and 100,000 jobs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

from elastic_agent.clock import ManualClock
from elastic_agent.service import trace_command
from elastic_agent.service.trace_file import state_path
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import TraceJob
from tests.support.doubles.gocd_rest import World, serve, world_from_trace

ORIGIN = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2,10,40,120", help="commits per office hour, one week each")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--nightly", action="store_true", help="also measure a nightly re-run")
    args = parser.parse_args()
    header = ("jobs", "stage runs", "rows", "calls", "instances", "history", "wall s")
    print(" ".join(f"{name:>{width}}" for name, width in zip(header, (8, 10, 8, 7, 9, 7, 7), strict=True)))
    biggest: list[TraceJob] = []
    for size in (float(value) for value in args.sizes.split(",")):
        jobs = generate_pipelines(PipelineSpec(commits_per_hour=size), seed=1)
        biggest = jobs
        world = world_from_trace(jobs, origin=ORIGIN, seed=1, extras=False)
        with tempfile.TemporaryDirectory() as scratch:
            calls, seconds, rows = _read(world, Path(scratch) / "trace.jsonl", args.concurrency, fresh=True)
        _check(world, rows)
        stage_runs = len({(j.pipeline, j.pipeline_counter, j.stage, j.stage_counter) for j in jobs})
        print(
            f"{len(jobs):>8} {stage_runs:>10} {len(rows):>8} {sum(calls.values()):>7} "
            f"{calls['stage instance']:>9} {calls['stage history']:>7} {seconds:>7.1f}"
        )
    if args.nightly and biggest:
        _nightly(biggest, args.concurrency)


def _nightly(jobs: list[TraceJob], concurrency: int) -> None:
    end = ORIGIN + timedelta(days=7)
    day_before = world_from_trace(jobs, origin=ORIGIN, seed=1, extras=False, now=end - timedelta(days=1))
    whole = world_from_trace(jobs, origin=ORIGIN, seed=1, extras=False, now=end)
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "trace.jsonl"
        _, first_s, _ = _read(day_before, output, concurrency, fresh=True)
        calls, seconds, rows = _read(whole, output, concurrency, fresh=False)
    _check(whole, rows)
    print(
        f"nightly: six days read in {first_s:.1f} s; the seventh on top: {sum(calls.values())} calls "
        f"({calls['stage instance']} stage instances, {calls['stage history']} history pages) in "
        f"{seconds:.1f} s"
    )


def _read(
    world: World, output: Path, concurrency: int, *, fresh: bool
) -> tuple[Counter[str], float, list[dict]]:
    with serve(world) as gocd:
        if not fresh:  # the same server: the double listens on a new port each time
            state = state_path(output)
            text = state.read_text()
            state.write_text(text.replace(json.loads(text)["server"], gocd.url, 1))
        token = output.with_name("token")
        token.write_text(gocd.tokens["admin"])
        parser = argparse.ArgumentParser()
        trace_command.add_arguments(parser)
        options = ["--server", gocd.url, "--token-file", str(token), "-o", str(output)]
        options += ["--concurrency", str(concurrency)] + (
            ["--since", ORIGIN.isoformat(), "--fresh"] if fresh else []
        )
        out = StringIO()
        started = time.perf_counter()
        status = trace_command.run(
            parser.parse_args(options), out=out, err=StringIO(), clock=ManualClock(world.now_ms / 1000)
        )
        seconds = time.perf_counter() - started
        if status != 0:
            raise SystemExit(f"trace failed: {out.getvalue()}")
        calls = Counter({kind.replace("_", " "): count for kind, count in gocd.calls.items()})
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    return calls, seconds, rows


def _check(world: World, rows: list[dict]) -> None:
    """Every run the double served is in the trace, once."""
    ran = {
        (r.pipeline, r.pipeline_counter, r.stage, r.stage_counter, r.job)
        for r in world.truth()
        if r.kind == "ran" and r.profile is not None and r.scheduled_ms >= ORIGIN.timestamp() * 1000
    }
    written = [(r["pipeline"], r["pipeline_counter"], r["stage"], r["stage_counter"], r["job"]) for r in rows]
    if len(written) != len(set(written)) or set(written) != ran:
        raise SystemExit(f"the trace differs from what GoCD served: {len(written)} rows, {len(ran)} runs")


if __name__ == "__main__":
    main()
