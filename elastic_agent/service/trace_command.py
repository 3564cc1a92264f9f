"""`python -m elastic_agent trace`: a trace of real jobs from a GoCD server's history, for the simulator and
the advisor, and the waits those jobs really had.

It reads, through GoCD's REST API, who the token is, the environments, every pipeline's config, the
history of each stage with a job on an elastic profile and one stage instance per stage run
(`gocd/history.py` says which calls and why), and writes one line per job run since `--since`, sorted by
`at`, in the trace format of `traces/workload.py` (`service/trace_file.py`):
`{"at": "2026-11-24T09:00:00.000Z", "profile": "java", "environment": "prod", "pipeline": "api",
"duration": 280.0, "pipeline_counter": 59, "stage": "build", "stage_counter": 1, "job": "compile",
"result": "Passed", "waited": 30.0, "built": 270.0}` (`.csv`: the same columns). `at` is an ISO 8601 UTC
time, so the time of day and the day of the week survive for schedules; the job identifier and result
give the trace its pipeline shape; `waited` is what `advise` reports as measured and
calibrates pod start-up on, `built` an extra
key the loader ignores. The file is plain JSON Lines or CSV; where the next read starts is kept beside
it (`trace.jsonl.state.json`). Run again on its own output, it extends the trace from where it ended
(`--fresh` starts over). It then prints what the jobs waited for an agent per elastic profile (the
baseline a reuse setting should beat), the calls it made, and what it left out and why.

Without a terminal (cron, CI) the progress is a line on stderr every few seconds of the injected
clock, since a read of thousands of stage runs is long. When GoCD stops answering part-way, what was read
is written, so that the next run resumes from it (`history.py` keeps it). A trace that holds no run, or
that lacks most runs, is not a success (`trace_outcome.py`). The token is read from a file (never an
argument, which `ps` shows) and is never printed or logged.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from elastic_agent.clock import Clock, SystemClock
from elastic_agent.gocd.history import DEFAULT_CONCURRENCY, History, Window, read_history
from elastic_agent.gocd.history_runs import REASONS
from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient
from elastic_agent.progress import progress_bar
from elastic_agent.service.gocd_access import UsageError, add_server_arguments, read_token, server_url
from elastic_agent.service.trace_file import (
    TraceFile,
    TraceFileError,
    merged,
    read_trace_file,
    run_row,
    state_path,
    write_trace_file,
)
from elastic_agent.service.trace_outcome import judge, kept
from elastic_agent.traces.measures import percentile
from profiles.quantities import parse_duration

DEFAULT_SINCE = "7d"
DEFAULT_OUTPUT = "trace.jsonl"
MAX_CONCURRENCY = 16
_BARE_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DURATION_LIKE = re.compile(r"[\d.]+\s*[a-z]+(?:\s*[\d.]+\s*[a-z]+)*", re.IGNORECASE)

DESCRIPTION = (
    "Build a trace of real jobs from a GoCD server's history (REST API): when each job on an elastic "
    "profile was scheduled, its profile, environment and pipeline, how long it held its agent, and how "
    "long it waited for one; print those waits per profile. Run again on the same output, it extends it."
)
EPILOG = (
    "Exit status: 0 the trace is written; 1 it would hold no job run (nothing is written) or lacks most of "
    "them (the sentence says what to check or pass); 2 a usage or connection error (nothing written); 3 GoCD "
    "stopped answering part-way: what was read is written, and the same command resumes from it."
)
PARTIAL = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (kept with the command; cli.py only wires it in)."""
    add_server_arguments(
        parser,
        "file holding a personal access token of a GoCD system administrator (pipeline configs and "
        "environments are admin APIs; other users see part of the server, and trace says which part); "
        "leave it out for a GoCD with security off, which refuses any token",
        token_required=False,
    )
    parser.add_argument(
        "--since",
        default=None,
        metavar="WHEN",
        help=f"how far back: a duration (7d, 36h) or an ISO date or time, UTC unless it says otherwise "
        f"(2026-11-17, 2026-11-17T08:00:00+01:00); default {DEFAULT_SINCE}. When extending a trace, "
        "reading starts where the trace ended, or at --since if that is earlier",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="FILE",
        help=f"the trace to write or extend: .jsonl (JSON lines) or .csv; default {DEFAULT_OUTPUT}",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="replace the output instead of extending it",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"calls to GoCD at a time, 1 to {MAX_CONCURRENCY}; default {DEFAULT_CONCURRENCY}",
    )
    parser.add_argument(
        "--assume-no-environment",
        action="store_true",
        help="a pipeline in no environment the token may view is in none (say so only if you know: "
        "GoCD shows a user who is not an administrator only the environments it may view)",
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
    clock = clock or SystemClock()
    now = datetime.fromtimestamp(clock.now(), UTC)
    try:
        server = server_url(args.server)
        output = _output_path(args.output)
        since = parse_since(args.since or DEFAULT_SINCE, now)
        concurrency = _concurrency(args.concurrency)
        previous = None if args.fresh or not output.exists() else read_trace_file(output)
        if previous is not None and previous.server != server:
            raise UsageError(
                f"{output} was traced from {previous.server}, not {server}: give another --output, or "
                "--fresh to replace it"
            )
        token = read_token(args.token_file) if args.token_file is not None else None
    except (UsageError, TraceFileError) as error:
        print(f"error: {error}", file=err)
        return 2
    if previous is not None:
        if previous.old_format:
            print(
                f"{output} keeps its state in its first line, as traces of earlier versions did: it is "
                f"rewritten as plain {'CSV' if output.suffix == '.csv' else 'JSON Lines'}, with the state "
                f"beside it in {state_path(output).name}",
                file=err,
            )
        start = previous.resume_from if args.since is None else min(since, previous.resume_from)
        print(f"extending {output} from {_shown(start)} (--fresh starts over)", file=err)
        since = start
    if server.lower().startswith("http://") and token is not None:
        print("warning: --server is http://, so the token travels unencrypted; prefer https://", file=err)
    client = GoCDRestClient(server, token, pool_size=concurrency)
    window = Window(
        int(since.timestamp() * 1000),
        int(now.timestamp() * 1000),
        previous.keys() if previous is not None else frozenset(),
    )
    shown = _interactive(err)
    try:
        history = read_history(
            client,
            window,
            concurrency=concurrency,
            assume_no_environment=args.assume_no_environment,
            say=lambda line: print(line, file=err),
            bar=lambda total, what: progress_bar(
                total, shown, desc=what, unit="call", clock=clock, stream=err
            ),
        )
    except GoCDApiError as error:
        print(f"error: {error}", file=err)
        return 2
    rows = merged(previous.rows if previous is not None else [], map(run_row, history.runs))
    verdict = judge(history, len(rows), since)
    if rows:
        resume = datetime.fromtimestamp(history.resume_ms / 1000, UTC)
        try:
            write_trace_file(output, TraceFile(server, resume, rows))
        except OSError as error:
            print(f"error: cannot write the trace to {output}: {error.strerror}", file=err)
            return 2
    for warning in history.warnings:
        print(f"warning: {warning}", file=err)
    report(history, rows, since, output, out, calls=client.calls, retries=client.retries)
    if history.failure is not None:
        print(f"error: {history.failure}", file=err)
        if not rows:
            return 2
        print(kept(len(rows), len(history.runs), str(output), str(state_path(output))), file=err)
        return PARTIAL
    if verdict is not None:
        print(f"error: {verdict.sentence}", file=err)
        return verdict.status
    return 0


# --- the options -------------------------------------------------------------------------------------


def parse_since(text: str, now: datetime) -> datetime:
    """`--since` as a UTC time: a duration back from `now`, or an ISO 8601 date or time."""
    raw = text.strip()
    if _BARE_NUMBER.fullmatch(raw):
        raise UsageError(f"--since {raw} needs a unit: write {raw}d for days or {raw}h for hours")
    try:
        seconds: float | None = parse_duration(raw)
    except ValueError as error:
        if _DURATION_LIKE.fullmatch(raw) and "too long" in str(error):
            raise UsageError(
                f"--since {raw} reaches back too far: trace reads at most 3650d (ten years)"
            ) from None
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


def _concurrency(value: int) -> int:
    if not 1 <= value <= MAX_CONCURRENCY:
        raise UsageError(
            f"--concurrency {value} is out of range: 1 to {MAX_CONCURRENCY} calls at a time (more would load "
            "GoCD's database without making the trace much faster)"
        )
    return value


def _interactive(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --- the report --------------------------------------------------------------------------------------


def report(
    history: History,
    rows: Sequence[Mapping[str, Any]],
    since: datetime,
    output: Path,
    out: TextIO,
    *,
    calls: Mapping[str, int],
    retries: int,
) -> None:
    """The waits of every run in the trace by profile, then what this read did: calls, runs, left out."""
    by_profile: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_profile.setdefault(str(row.get("profile", "")), []).append(row)
    if rows:
        print("What jobs waited for an agent (scheduled -> assigned), every run in the trace:", file=out)
        table = [_stats(name, by_profile[name]) for name in sorted(by_profile)]
        if len(by_profile) > 1:
            table.append(_stats("(all)", rows))
        _table(("profile", "jobs", "mean wait", "p95 wait", "max wait", "mean duration"), table, out)
    made = sum(calls.values())
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(calls.items(), key=lambda item: -item[1]))
    holds = (
        f"{output} now holds {_count(len(rows), 'job run')} on {_count(len(by_profile), 'elastic profile')}"
        if rows
        else f"nothing was written to {output}"
    )
    print(
        f"Summary: {_count(len(history.runs), 'new job run')} since {_shown(since)} "
        f"({_count(history.known, 'run')} already in the trace); {holds}.",
        file=out,
    )
    print(
        f"Calls to GoCD: {made} ({kinds}); {_count(retries, 'retry', 'retries')}. "
        f"{_count(history.stage_runs, 'stage run')} read.",
        file=out,
    )
    for line in _left_out(history):
        print(line, file=out)


def _stats(name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    waits = sorted(_number(row.get("waited")) for row in rows)
    mean_duration = sum(_number(row.get("duration")) for row in rows) / len(rows)
    return (
        name,
        str(len(rows)),
        _seconds(sum(waits) / len(waits)),
        _seconds(percentile(waits, 0.95)),
        _seconds(waits[-1]),
        _seconds(mean_duration),
    )


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


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
            "until then; written as Failed)."
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


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
