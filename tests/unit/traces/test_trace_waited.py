"""A trace's measured waits (`waited`, as `trace` writes them) are read and written with its jobs, and a
wrong one is a sentence naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_agent.traces.workload import TraceError, TraceJob, parse_trace, read_trace, write_trace

JOBS = [
    TraceJob(0.0, "java", None, "api", 60.0, waited=92.5),
    TraceJob(5.0, "java", "prod", "api", 30.0),
]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_measured_waits_survive_writing_and_reading_a_trace(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"trace{suffix}"
    write_trace(JOBS, path)
    assert [job.waited for job in read_trace(path).jobs] == [92.5, None]


def test_a_trace_without_measured_waits_is_written_as_before(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    write_trace([JOBS[1]], path)
    assert "waited" not in path.read_text()


@pytest.mark.parametrize("value", ['"soon"', "-3", '"nan"'])
def test_a_wait_that_is_not_zero_or_more_seconds_is_a_sentence_naming_the_line(value: str) -> None:
    text = '{"at": 0, "profile": "java", "duration": 60}\n{"at": 1, "profile": "java", "duration": 60, '
    with pytest.raises(TraceError, match=r"^trace, line 2: waited must be zero or more seconds"):
        parse_trace(text + f'"waited": {value}}}\n', csv_format=False)
