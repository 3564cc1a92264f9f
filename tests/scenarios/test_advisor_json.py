"""`advise --json FILE`: every candidate row has the same keys, every key is documented in docs/advisor.md
("--json"), the Markdown report shows the same figures, the measured waits are the trace's own, and a
path that cannot be written is a sentence and exit status 2 before any simulation.

One advice is run for the module: a pipeline-shaped morning of traces/pipelines.py (whose test stages on
`big-memory` follow a compile on `java`), with a `waited` on every job, flat, warm-pool, Predict and
schedule candidates, learned and judged on the whole trace.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.advisor.command import add_arguments, run
from elastic_agent.advisor.report_json import KINDS, ROW_KEYS
from elastic_agent.traces.measures import percentile
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DEFAULT_ORIGIN
from tests.support.advisor_document import document as hand_built
from tests.support.advisor_document import key_paths

DOC = Path(__file__).resolve().parents[2] / "docs" / "advisor.md"
# Keys whose object is keyed by data (profile names, elastic profile keys, labels), not by the schema.
DATA_KEYED = {"profiles", "settings", "skipped"}


def _waited(i: int) -> float:
    return 5.0 + (i * 7) % 40


def _advise(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return run(parser.parse_args(argv))


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("advise_json")
    jobs = generate_pipelines(PipelineSpec(days=0.6, commit_pipelines=6, commits_per_hour=3.0), seed=2)[:400]
    rows = [job.row() | {"waited": _waited(i)} for i, job in enumerate(jobs)]
    trace = folder / "day.jsonl"
    lines = [f"# origin: {DEFAULT_ORIGIN.isoformat()}"] + [json.dumps(row) for row in rows]
    trace.write_text("\n".join(lines) + "\n")
    out = folder / "advice.json"
    argv = [str(trace), "--idle-timeouts", "2m,5m", "--min-idle", "0,1", "--learn-days", "0"]
    argv += ["--busy-idle-timeouts", "30m", "--plain-idle-timeouts", "2m", "--no-tuned"]
    argv += ["--workers", "2", "--quiet", "--json", str(out)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert _advise(argv) == 0
    return json.loads(out.read_text()), printed.getvalue(), rows


def _walk(value: Any, key: str = "") -> Iterator[str]:
    """Every key of the document that the schema names (not the data-keyed objects' keys)."""
    if isinstance(value, dict):
        for name, item in value.items():
            if key not in DATA_KEYED:
                yield name
            if key == "profiles" or name not in DATA_KEYED or name == "profiles":
                yield from _walk(item, "" if key == "profiles" else name)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, key)


def _json_section() -> str:
    text = DOC.read_text()
    start = text.index("## --json")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_every_candidate_row_has_the_same_keys_and_a_known_kind(advised: Any) -> None:
    doc, _, _ = advised
    assert doc["version"] == 1
    kinds = set()
    for name, profile in doc["profiles"].items():
        for row in profile["candidates"]:
            assert tuple(row) == ROW_KEYS, (name, row["label"])
            kinds.add(row["kind"])
        assert sum(row["recommended"] for row in profile["candidates"]) == 1, name
        assert len(profile["hourly"]["current"]) == len(profile["hourly"]["recommended"]) == 24
    assert kinds == set(KINDS), "the advice ran every kind of candidate"


def test_every_key_of_the_document_is_documented_and_the_row_table_lists_exactly_the_row_keys(
    advised: Any,
) -> None:
    doc, _, _ = advised
    section = _json_section()
    documented = set(re.findall(r"`([a-z_0-9]+)`", section))
    missing = sorted(set(_walk(doc)) - documented)
    assert not missing, f"keys of the document that docs/advisor.md does not name: {missing}"
    row_table = section[section.index("A candidate row") :].split("\n\n")[1]
    listed = re.findall(r"^\| `([a-z_0-9]+)` \|", row_table, flags=re.MULTILINE)
    assert tuple(listed) == ROW_KEYS


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _profile_sections(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## profile (\S+) \(\d+ jobs\)$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_markdown_report_and_the_json_agree_on_every_figure(advised: Any) -> None:
    doc, markdown, _ = advised
    sections = _profile_sections(markdown)
    assert sorted(sections) == sorted(doc["profiles"])
    for name, profile in doc["profiles"].items():
        text = sections[name]
        rows = {row["label"]: row for row in profile["candidates"]}
        # The candidates' table: 11 columns, a candidate's label first.
        table = [_cells(line) for line in text.splitlines() if line.startswith("| ")]
        shown = {cells[0]: cells for cells in table if cells[0] in rows and len(cells) == 11}
        assert sorted(shown) == sorted(label for label, row in rows.items() if row["kind"] != "baseline")
        for label, cells in shown.items():
            r = rows[label]
            cost = r["idle_pod_seconds_per_job"] + r["boot_pod_seconds_per_job"]
            assert cells[1:] == [
                f"{r['pods_per_job']:.3f}",
                f"{r['wait_mean_s']:.1f} s",
                f"{r['wait_p95_s']:.1f} s",
                str(r["waited_past_resend"]),
                f"{r['idle_pod_seconds_per_job']:.1f}",
                f"{r['idle_pod_hours_per_day']:.1f}",
                f"{cost:.1f}",
                f"{r['idle_and_boot_pod_hours_per_day']:.1f}",
                str(r["registrations_refused"]),
                "*" if r["on_frontier"] else "",
            ], (name, label)
        base, current = rows["one pod per job"], profile["current"]
        assert (
            f"one pod per job: mean wait {current['wait_mean_s']:.1f} s, p95 {current['wait_p95_s']:.1f} s, "
            f"{base['idle_pod_seconds_per_job'] + base['boot_pod_seconds_per_job']:.1f} pod-s/job beyond the "
            f"jobs ({base['idle_and_boot_pod_hours_per_day']:.1f} pod-h/day), "
            f"{current['idle_pod_hours_per_day']:.1f} idle pod-h/day"
        ) in text
        rec = profile["recommended"]
        assert rows[rec["label"]]["recommended"]
        assert f"Recommended: {rec['label']} (" in text
        assert (
            f"It keeps {rec['idle_pod_hours_per_day']:.1f} pod-hours a day idle "
            f"({rec['idle_pod_hours_per_week']:.1f} a week), "
            f"{rows[rec['label']]['idle_and_boot_pod_hours_per_day']:.1f} a day idle or booting."
        ) in text
        follow = profile["following"]
        assert f"Predict: {follow['followers']} of this profile's {follow['jobs']} jobs" in text
        for gain in profile["predict"]:
            p, w = rows[gain["label"]], rows[gain["without"]]
            assert (
                f"- {gain['label']} against {gain['without']}: mean wait {w['wait_mean_s']:.1f} -> "
                f"{p['wait_mean_s']:.1f} s, p95 {w['wait_p95_s']:.1f} -> {p['wait_p95_s']:.1f} s, idle "
                f"{w['idle_pod_hours_per_day']:.1f} -> {p['idle_pod_hours_per_day']:.1f} pod-h/day"
            ) in text
            assert gain["wait_mean_saved_s"] == pytest.approx(w["wait_mean_s"] - p["wait_mean_s"])
        # The summary's row: the last that names the profile (the calibration's table opens the report).
        flat = profile["best_single_setting"]
        line = [line for line in markdown.splitlines() if line.startswith(f"| {name} | ")][-1]
        cells = _cells(line)
        assert cells[1:3] == [flat["label"], rec["label"]]
        assert cells[3:8] == [
            f"{flat['wait_p95_s']:.1f} -> {rec['wait_p95_s']:.1f} s",
            f"{flat['wait_mean_s']:.1f} -> {rec['wait_mean_s']:.1f} s",
            f"{rows[flat['label']]['idle_pod_seconds_per_job']:.0f} -> "
            f"{rows[rec['label']]['idle_pod_seconds_per_job']:.0f}",
            f"{flat['idle_pod_hours_per_day']:.1f} -> {rec['idle_pod_hours_per_day']:.1f}",
            f"{flat['idle_pod_hours_per_week']:.1f} -> {rec['idle_pod_hours_per_week']:.1f}",
        ]
    for together in doc["together"]:
        line = next(line for line in markdown.splitlines() if line.startswith(f"| {together['server']} |"))
        assert _cells(line)[1:7] == [
            f"{together['pods_per_job']:.3f}",
            f"{together['wait_mean_s']:.1f} s",
            f"{together['wait_p95_s']:.1f} s",
            f"{together['idle_pod_seconds_per_job']:.1f}",
            f"{together['idle_pod_hours_per_day']:.1f}",
            f"{together['idle_pod_hours_per_week']:.1f}",
        ]
    assert doc["knee_rule"]["text"].rstrip(".") in markdown


def test_the_hand_built_document_of_the_html_tests_holds_only_keys_the_command_writes(advised: Any) -> None:
    doc, _, _ = advised
    invented = key_paths(hand_built()) - key_paths(doc)
    assert not invented, f"tests/support/advisor_document.py has keys advise --json never writes: {invented}"


def test_measured_is_the_traces_own_waited_and_current_is_one_pod_per_job(advised: Any) -> None:
    doc, _, rows = advised
    for name, profile in doc["profiles"].items():
        waits = sorted(row["waited"] for row in rows if row["profile"] == name)
        assert profile["measured"] == {
            "jobs": len(waits),
            "jobs_with_waited": len(waits),
            "wait_mean_s": pytest.approx(sum(waits) / len(waits)),
            "wait_p95_s": percentile(waits, 0.95),
        }
        base = next(row for row in profile["candidates"] if row["kind"] == "baseline")
        assert profile["current"]["wait_mean_s"] == base["wait_mean_s"]
        assert base["settings"] == {"Reuse": "false"}


def test_waits_by_hour_are_null_exactly_in_the_hours_no_job_came(advised: Any) -> None:
    doc, _, rows = advised
    for name, profile in doc["profiles"].items():
        hours = {int(row["at"] // 3600) % 24 for row in rows if row["profile"] == name}
        for series in profile["hourly"].values():
            assert {h for h, wait in enumerate(series) if wait is not None} == hours, name


def test_the_test_stages_follow_another_stage(advised: Any) -> None:
    doc, _, _ = advised
    big = doc["profiles"]["big-memory"]
    assert big["follows_another_stage"] and big["following"]["followers"] == big["following"]["jobs"]


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing/advice.json", "the folder"),
        (".", "is a folder"),
    ],
)
def test_a_json_path_that_cannot_be_written_is_a_sentence_and_exit_status_2(
    where: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"at": 0, "profile": "p", "environment": "", "pipeline": "x", "duration": 60}\n')
    assert _advise([str(trace), "--json", str(tmp_path / where)]) == 2
    err = capsys.readouterr()
    assert said in err.err and "--json" in err.err and not err.out


def test_a_negative_knee_gain_is_a_sentence_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"at": 0, "profile": "p", "environment": "", "pipeline": "x", "duration": 60}\n')
    assert _advise([str(trace), "--knee-gain", "-5"]) == 2
    assert "--knee-gain: -5 is not 0 or more" in capsys.readouterr().err


def test_current_is_the_policy_given_with_current_simulated_on_the_judged_days_and_shown_in_the_report(
    tmp_path: Path,
) -> None:
    jobs = generate_pipelines(PipelineSpec(days=0.6, commit_pipelines=6, commits_per_hour=3.0), seed=2)[:200]
    trace = tmp_path / "day.jsonl"
    rows = [json.dumps(job.row() | {"waited": _waited(i)}) for i, job in enumerate(jobs)]
    trace.write_text("\n".join([f"# origin: {DEFAULT_ORIGIN.isoformat()}", *rows]) + "\n")
    out = tmp_path / "advice.json"
    argv = [str(trace), "--idle-timeouts", "2m", "--min-idle", "0", "--learn-days", "0", "--no-schedules"]
    argv += ["--no-prediction", "--no-tuned", "--workers", "2", "--quiet", "--json", str(out)]
    argv += ["--current", "Reuse=true,IdleTimeout=30m"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert _advise(argv) == 0
    doc, markdown = json.loads(out.read_text()), printed.getvalue()
    table = markdown[markdown.index("## The current policy, simulated") :].split("\n\n")[2]
    for name, profile in doc["profiles"].items():
        current = profile["current"]
        assert current["policy"] == "Reuse=true, IdleTimeout=30m"
        base = next(row for row in profile["candidates"] if row["kind"] == "baseline")
        # Pods kept 30 minutes: idle pod-hours one pod per job never has.
        assert current["idle_pod_hours_per_day"] > base["idle_pod_hours_per_day"] == 0
        line = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        assert _cells(line)[1:] == [
            "Reuse=true, IdleTimeout=30m",
            f"{current['wait_mean_s']:.1f} s",
            f"{current['wait_p95_s']:.1f} s",
            f"{current['idle_pod_hours_per_day']:.1f}",
            f"{current['idle_pod_hours_per_week']:.1f}",
        ]
