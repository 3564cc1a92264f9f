"""`python -m elastic_agent trace`: a trace of real jobs from a GoCD server's history, for the simulator and
the advisor, and the waits those jobs really had.

It reads every pipeline's config, the environments and the history of each job on an elastic profile
through GoCD's REST API (`gocd/history.py` says which calls and what it relies on), and writes one line per
job run since `--since`, sorted by `at`, in the trace format of `advisor/workload.py`:
`{"at": "2026-11-24T09:00:00.000Z", "profile": "java", "environment": "prod", "pipeline": "api",
"duration": 280.0, "pipeline_counter": 59, "stage": "build", "stage_counter": 1, "job": "compile",
"result": "Passed", "waited": 30.0, "built": 270.0}` (`.csv`: the same columns). `at` is an ISO 8601 UTC
time, so the time of day and the day of the week survive for schedules; the job identifier and result
give the trace its pipeline shape (which stage runs follow which); `waited` and `built` are extra keys
the loader ignores. It then prints what the jobs waited for an agent (scheduled -> assigned) per
elastic profile: the baseline a reuse setting should beat.

The token is read from a file (never an argument, which `ps` shows) and is never printed or logged.
Exit status: 0 the trace is written, 2 a usage or connection error (a sentence on stderr, nothing written).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from elastic_agent.advisor.measures import percentile
from elastic_agent.clock import Clock, SystemClock
from elastic_agent.gocd.history import REASONS, History, JobRun, read_history
from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient
from elastic_agent.service.gocd_access import UsageError, add_server_arguments, read_token, server_url
from profiles.quantities import parse_duration

DEFAULT_SINCE = "7d"
DEFAULT_OUTPUT = "trace.jsonl"
COLUMNS = (
    "at",
    "profile",
    "environment",
    "pipeline",
    "duration",
    "pipeline_counter",
    "stage",
    "stage_counter",
    "job",
    "result",
    "waited",
    "built",
)
_BARE_NUMBER = re.compile(r"\d+(?:\.\d+)?")

DESCRIPTION = (
    "Build a trace of real jobs from a GoCD server's job history (REST API): when each job on an elastic "
    "profile was scheduled, its profile, environment and pipeline, how long it held its agent, and how "
    "long it waited for one; print those waits per profile."
)
EPILOG = "Exit status: 0 the trace is written, 2 a usage or connection error."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (kept with the command; cli.py only wires it in)."""
    add_server_arguments(
        parser,
        "file holding a personal access token of a GoCD system administrator (pipeline configs and "
        "environments are admin APIs)",
    )
    parser.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="WHEN",
        help=f"how far back: a duration (7d, 36h) or an ISO date or time, UTC unless it says otherwise "
        f"(2026-11-17, 2026-11-17T08:00:00+01:00); default {DEFAULT_SINCE}",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="FILE",
        help=f"the trace to write: .jsonl (JSON lines) or .csv; default {DEFAULT_OUTPUT}",
    )


def run(
    args: argparse.Namespace,
    out: TextIO | None = None,
    err: TextIO | None = None,
    clock: Clock | None = None,
) -> int:
    """The command: check the options, read the token, read GoCD's history, write, report."""
    out = out or sys.stdout
    err = err or sys.stderr
    now = datetime.fromtimestamp((clock or SystemClock()).now(), UTC)
    try:
        server = server_url(args.server)
        since = parse_since(args.since, now)
        output = _output_path(args.output)
        token = read_token(args.token_file)
    except UsageError as error:
        print(f"error: {error}", file=err)
        return 2
    if server.lower().startswith("http://"):
        print("warning: --server is http://, so the token travels unencrypted; prefer https://", file=err)
    client = GoCDRestClient(server, token)
    try:
        history = read_history(client, int(since.timestamp() * 1000), lambda line: print(line, file=err))
    except GoCDApiError as error:
        print(f"error: {error}", file=err)
        return 2
    try:
        write_trace(history.runs, output)
    except OSError as error:
        print(f"error: cannot write the trace to {output}: {error.strerror}", file=err)
        return 2
    report(history, since, output, out)
    return 0


# --- the options -------------------------------------------------------------------------------------


def parse_since(text: str, now: datetime) -> datetime:
    """`--since` as a UTC time: a duration back from `now`, or an ISO 8601 date or time."""
    raw = text.strip()
    if _BARE_NUMBER.fullmatch(raw):
        raise UsageError(f"--since {raw} needs a unit: write {raw}d for days or {raw}h for hours")
    try:
        seconds = parse_duration(raw)
    except ValueError:
        seconds = None
    if seconds is not None:
        if seconds <= 0:
            raise UsageError("--since must reach back some time, e.g. 7d")
        return now - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since {raw!r} is neither a duration (7d, 36h) nor an ISO date or time (2026-11-17, "
            "2026-11-17T08:00:00Z)"
        ) from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if when >= now:
        raise UsageError(f"--since {raw} is not in the past (it is now {_shown(now)})")
    return when


def _output_path(text: str) -> Path:
    path = Path(text)
    if path.suffix not in (".jsonl", ".json", ".csv"):
        raise UsageError(
            f"--output {text} must end in .jsonl or .csv (the trace formats the simulator reads)"
        )
    if not path.parent.is_dir():
        raise UsageError(f"--output {text}: the directory {path.parent} does not exist")
    if path.is_dir():
        raise UsageError(f"--output {text} is a directory: name the trace file to write")
    return path


# --- the trace ---------------------------------------------------------------------------------------


def write_trace(runs: Iterable[JobRun], path: Path) -> None:
    """The runs in workload.py's trace format, `at` as ISO 8601 UTC (written to a temporary file first,
    so a failed write leaves no half trace under the name)."""
    rows = [_row(run) for run in runs]
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as sink:
            if path.suffix == ".csv":
                writer = csv.DictWriter(sink, fieldnames=COLUMNS)
                writer.writeheader()
                writer.writerows(rows)
            else:
                for row in rows:
                    sink.write(json.dumps(row, separators=(",", ":")) + "\n")
        partial.replace(path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise


def _row(run: JobRun) -> dict[str, Any]:
    at = datetime.fromtimestamp(run.scheduled_ms / 1000, UTC)
    return {
        "at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "profile": run.profile,
        "environment": run.environment,
        "pipeline": run.pipeline,
        "duration": round(run.duration_s, 3),
        "pipeline_counter": "" if run.pipeline_counter is None else run.pipeline_counter,
        "stage": run.stage,
        "stage_counter": run.stage_counter,
        "job": run.job,
        "result": run.result,
        "waited": round(run.waited_s, 3),
        "built": round(run.built_s, 3),
    }


# --- the report --------------------------------------------------------------------------------------


def report(history: History, since: datetime, output: Path, out: TextIO) -> None:
    runs = history.runs
    by_profile: dict[str, list[JobRun]] = {}
    for run in runs:
        by_profile.setdefault(run.profile, []).append(run)
    if runs:
        print(f"What jobs waited for an agent (scheduled -> assigned) since {_shown(since)}:", file=out)
        rows = [_stats(name, by_profile[name]) for name in sorted(by_profile)]
        if len(by_profile) > 1:
            rows.append(_stats("(all)", runs))
        _table(("profile", "jobs", "mean wait", "p95 wait", "max wait", "mean duration"), rows, out)
        everything = _stats("", runs)
        print(
            f"Summary: {_count(len(runs), 'job run')} on {_count(len(by_profile), 'elastic profile')} since "
            f"{_shown(since)} written to {output}; they waited {everything[2]} on average, {everything[3]} "
            "at p95.",
            file=out,
        )
    else:
        print(
            f"Summary: no job run on an elastic profile since {_shown(since)}; {output} is an empty trace.",
            file=out,
        )
    for line in _left_out(history):
        print(line, file=out)


def _stats(name: str, runs: Sequence[JobRun]) -> tuple[str, ...]:
    waits = sorted(run.waited_s for run in runs)
    mean_duration = sum(run.duration_s for run in runs) / len(runs)
    return (
        name,
        str(len(runs)),
        _seconds(sum(waits) / len(waits)),
        _seconds(percentile(waits, 0.95)),
        _seconds(waits[-1]),
        _seconds(mean_duration),
    )


def _left_out(history: History) -> list[str]:
    lines = []
    static = history.static_jobs
    if static:
        names = ", ".join(job.name for job in static[:5]) + (", ..." if len(static) > 5 else "")
        lines.append(
            f"Left out: {_count(len(static), 'job')} without an elastic profile (static agents; their "
            f"history is not read): {names}."
        )
    for reason in REASONS:
        if history.left_out[reason]:
            lines.append(f"Left out: {_count(history.left_out[reason], 'job run')} {reason}.")
    cancelled = sum(1 for run in history.runs if run.cancelled)
    if cancelled:
        lines.append(
            f"Kept: {_count(cancelled, 'job run')} cancelled after getting an agent (it held the agent "
            "until then)."
        )
    return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        print("  " + "  ".join(cells), file=out)


def _seconds(value: float) -> str:
    return f"{value:.1f} s"


def _shown(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
