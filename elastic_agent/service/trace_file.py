"""The file `trace` writes and extends, and the small state file beside it.

The trace itself is plain JSON Lines (`.jsonl`) or CSV (`.csv`) in the trace format of
`traces/workload.py`, so that jq, pandas, a spreadsheet or any other reader takes it as it is. Where the
rows came from and where the next read starts live beside it, in a state file named after it
(`week.jsonl` -> `week.jsonl.state.json`):

    {"server": "https://gocd.example.com/go", "resume_from": "2026-11-24T11:58:00.000Z"}

`trace` reads that back to extend the trace from where it ended, and the job identifier of each row
(pipeline, its counter, stage, its counter, job) to never write a run twice. Rows already there are kept
exactly as they are. Both files are written to a temporary file first and renamed over the old one, the
trace before its state, so that a failure at any point leaves a pair that resumes correctly (at worst
from an earlier point, whose runs are then recognised and not written twice).

Traces written before the state file existed carry the state as a first comment line,
`# gocd-trace: {...}`; they are still read (`TraceFile.old_format`), and the next write turns them into
the pair above.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elastic_agent.gocd.history_runs import JobRun, RunKey

OLD_HEADER = "# gocd-trace: "
STATE_SUFFIX = ".state.json"
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

Row = dict[str, Any]


class TraceFileError(Exception):
    """The file cannot be extended: the message is the one line printed."""


@dataclass(frozen=True)
class TraceFile:
    server: str
    resume_from: datetime
    rows: list[Row]
    old_format: bool = False  # read from a trace whose first line held the state

    def keys(self) -> frozenset[RunKey]:
        return frozenset(key for key in map(row_key, self.rows) if key is not None)


def state_path(path: Path) -> Path:
    """Where the state of the trace at `path` is kept."""
    return path.with_name(path.name + STATE_SUFFIX)


def read_trace_file(path: Path) -> TraceFile:
    """A trace this command wrote, with its state, to extend; TraceFileError when it is not one."""
    text = _text(path, "to extend it")
    first, _, rest = text.partition("\n")
    if first.startswith(OLD_HEADER):
        server, resume_from = _state(first.removeprefix(OLD_HEADER), f"{path}: its first line")
        return TraceFile(server, resume_from, _rows(path, rest, skip_comments=True), old_format=True)
    state = state_path(path)
    if not state.exists():
        raise TraceFileError(
            f"{path} exists but has no state file beside it ({state.name}): it was not written by trace, "
            "or its state file was removed; give another --output, or --fresh to replace it"
        )
    server, resume_from = _state(_text(state, "to extend the trace"), f"{state}")
    return TraceFile(server, resume_from, _rows(path, text, skip_comments=False))


def write_trace_file(path: Path, trace: TraceFile) -> None:
    """The rows sorted by `at`, then the state beside them; each written whole or not at all."""
    rows = sorted(trace.rows, key=lambda row: str(row.get("at", "")))
    body = io.StringIO(newline="")
    if path.suffix == ".csv":
        writer = csv.DictWriter(body, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            body.write(json.dumps(row, separators=(",", ":")) + "\n")
    state = {"server": trace.server, "resume_from": iso(trace.resume_from)}
    _replace(path, body.getvalue())
    _replace(state_path(path), json.dumps(state, separators=(", ", ": ")) + "\n")


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as sink:
            sink.write(text)
        partial.replace(path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise


def _text(path: Path, why: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise TraceFileError(f"cannot read {path} {why}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFileError(
            f"{path} is not a text file; give another --output, or --fresh to replace it"
        ) from None


def _state(text: str, where: str) -> tuple[str, datetime]:
    damaged = f"{where} is damaged; --fresh replaces the trace"
    try:
        state = json.loads(text)
        server = state["server"]
        resume_from = datetime.fromisoformat(str(state["resume_from"]).replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        raise TraceFileError(damaged) from None
    if not isinstance(server, str) or resume_from.tzinfo is None:
        raise TraceFileError(damaged)
    return server, resume_from.astimezone(UTC)


def _rows(path: Path, text: str, *, skip_comments: bool) -> list[Row]:
    lines = [line for line in text.splitlines() if line.strip()]
    if skip_comments:  # an old-format trace: its comment lines are not rows
        lines = [line for line in lines if not line.lstrip().startswith("#")]
    try:
        if path.suffix == ".csv":
            rows = [dict(row) for row in csv.DictReader(io.StringIO("\n".join(lines)))]
        else:
            rows = [json.loads(line) for line in lines]
    except (ValueError, csv.Error) as error:
        raise TraceFileError(f"{path} has a damaged row ({error}); --fresh replaces the trace") from None
    if not all(isinstance(row, dict) for row in rows):
        raise TraceFileError(f"{path} has a row that is not an object; --fresh replaces the trace")
    return rows


def run_row(run: JobRun) -> Row:
    return {
        "at": iso(datetime.fromtimestamp(run.scheduled_ms / 1000, UTC)),
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


def row_key(row: Mapping[str, Any]) -> RunKey | None:
    """A row's job identifier; None for a row without one (it is kept, but cannot be matched)."""
    try:
        return RunKey(
            str(row["pipeline"]),
            int(row["pipeline_counter"]),
            str(row["stage"]),
            int(row["stage_counter"]),
            str(row["job"]),
        )
    except (KeyError, ValueError, TypeError):
        return None


def merged(old: Iterable[Row], new: Iterable[Row]) -> list[Row]:
    """The old rows and the new ones the old do not have (by job identifier)."""
    rows = list(old)
    seen = {row_key(row) for row in rows}
    rows.extend(row for row in new if row_key(row) not in seen)
    return rows


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
