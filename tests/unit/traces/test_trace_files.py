"""The files `trace` writes: a trace every JSON Lines or CSV reader takes as it is, its resume state in a
small file beside it, and traces of the earlier format (the state in a `# gocd-trace:` first line) still
read by the advisor and resumed by `trace`, which rewrites them once, saying so."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import responses

from elastic_agent.service.trace_file import COLUMNS
from elastic_agent.traces.workload import load_trace
from tests.support.gocd_history_answers import EXPECTED_ROWS, rows_of, serve_everything, trace


def test_the_jsonl_trace_is_json_lines_and_the_csv_trace_is_csv_with_the_state_beside_them(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    jsonl, table = tmp_path / "week.jsonl", tmp_path / "week.csv"
    assert trace(token_file, jsonl)[0] == 0
    assert trace(token_file, table)[0] == 0

    # What jq and pandas do: every line is a JSON object; the first line of the CSV is its header.
    assert [json.loads(line) for line in jsonl.read_text().splitlines()] == EXPECTED_ROWS
    with table.open(newline="") as source:
        reader = csv.DictReader(source)
        read = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    assert [(r["at"], r["job"], float(r["waited"])) for r in read] == [
        (r["at"], r["job"], r["waited"]) for r in EXPECTED_ROWS
    ]
    for written in (jsonl, table):
        state = json.loads(written.with_name(written.name + ".state.json").read_text())
        assert state == {"server": "https://gocd.example.com/go", "resume_from": "2026-11-24T11:50:00.000Z"}
    # And the advisor's reader takes both, as it did.
    assert load_trace(jsonl) == load_trace(table) and len(load_trace(jsonl)) == len(EXPECTED_ROWS)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_second_run_resumes_from_the_time_the_state_file_holds(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path, suffix: str
) -> None:
    serve_everything(gocd)
    output = tmp_path / f"week{suffix}"
    assert trace(token_file, output)[0] == 0
    state = output.with_name(output.name + ".state.json")
    state.write_text('{"server": "https://gocd.example.com/go", "resume_from": "2026-11-24T09:00:00.000Z"}')
    before = output.read_text()

    status, out, err = trace(token_file, output)

    assert status == 0
    assert "extending" in err and "from 2026-11-24 09:00 UTC" in err
    assert "Summary: 0 new job runs since 2026-11-24 09:00 UTC" in out
    assert output.read_text() == before  # nothing written twice, nothing lost
    assert json.loads(state.read_text())["resume_from"] == "2026-11-24T11:50:00.000Z"


def old_format(path: Path, rows: list[dict[str, object]], resume_from: str) -> None:
    """A trace as earlier versions of `trace` wrote it: the state in a comment line first."""
    header = {"server": "https://gocd.example.com/go", "resume_from": resume_from}
    lines = [f"# gocd-trace: {json.dumps(header)}", *(json.dumps(row) for row in rows)]
    path.write_text("\n".join(lines) + "\n")


def test_an_old_format_trace_is_read_by_the_advisor_and_resumed_and_rewritten_once_saying_so(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "week.jsonl"
    old_format(output, EXPECTED_ROWS[:7], "2026-11-23T15:00:00.000Z")
    assert len(load_trace(output)) == 7  # the advisor reads it as it is

    status, _, err = trace(token_file, output)

    assert status == 0
    said = [line for line in err.splitlines() if "first line" in line]
    assert said == [
        f"{output} keeps its state in its first line, as traces of earlier versions did: it is rewritten "
        "as plain JSON Lines, with the state beside it in week.jsonl.state.json"
    ]
    assert "extending" in err and "from 2026-11-23 15:00 UTC" in err
    assert [json.loads(line) for line in output.read_text().splitlines()] == EXPECTED_ROWS
    assert rows_of(output) == EXPECTED_ROWS
    assert (tmp_path / "week.jsonl.state.json").exists()

    status, _, err = trace(token_file, output)

    assert status == 0 and "first line" not in err  # rewritten once
