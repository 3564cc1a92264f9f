"""The file `trace` writes and extends: rows in the trace format of `traces/workload.py`, and a first
comment line saying where they came from and where the next read starts:

    # gocd-trace: {"server": "https://gocd.example.com/go", "resume_from": "2026-11-24T11:58:00.000Z"}

The simulator skips comment lines, so the trace stays a trace; `trace` reads the line back to extend the
file from where it ended, and the job identifier of each row (pipeline, its counter, stage, its counter,
job) to never write a run twice. Rows already there are kept exactly as they are.
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

HEADER = "# gocd-trace: "
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

    def keys(self) -> frozenset[RunKey]:
        return frozenset(key for key in map(row_key, self.rows) if key is not None)


def read_trace_file(path: Path) -> TraceFile:
    """A trace this command wrote, to extend; TraceFileError when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TraceFileError(f"cannot read {path} to extend it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFileError(
            f"{path} is not a text file; give another --output, or --fresh to replace it"
        ) from None
    first, _, rest = text.partition("\n")
    if not first.startswith(HEADER):
        raise TraceFileError(
            f"{path} exists but was not written by trace (its first line is not '{HEADER.strip()} ...'): "
            "give another --output, or --fresh to replace it"
        )
    try:
        header = json.loads(first.removeprefix(HEADER))
        server = header["server"]
        resume_from = datetime.fromisoformat(str(header["resume_from"]).replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        raise TraceFileError(f"{path}: its first line is damaged; --fresh replaces the trace") from None
    if not isinstance(server, str) or resume_from.tzinfo is None:
        raise TraceFileError(f"{path}: its first line is damaged; --fresh replaces the trace")
    lines = [line for line in rest.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    try:
        if path.suffix == ".csv":
            rows = [dict(row) for row in csv.DictReader(io.StringIO("\n".join(lines)))]
        else:
            rows = [json.loads(line) for line in lines]
    except (ValueError, csv.Error) as error:
        raise TraceFileError(f"{path} has a damaged row ({error}); --fresh replaces the trace") from None
    if not all(isinstance(row, dict) for row in rows):
        raise TraceFileError(f"{path} has a row that is not an object; --fresh replaces the trace")
    return TraceFile(server, resume_from.astimezone(UTC), rows)


def write_trace_file(path: Path, trace: TraceFile) -> None:
    """The header, then the rows sorted by `at` (written to a temporary file first, so a failed write
    leaves the trace as it was)."""
    header = {"server": trace.server, "resume_from": iso(trace.resume_from)}
    rows = sorted(trace.rows, key=lambda row: str(row.get("at", "")))
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as sink:
            sink.write(HEADER + json.dumps(header, separators=(", ", ": ")) + "\n")
            if path.suffix == ".csv":
                writer = csv.DictWriter(sink, fieldnames=COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
            else:
                for row in rows:
                    sink.write(json.dumps(row, separators=(",", ":")) + "\n")
        partial.replace(path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise


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
