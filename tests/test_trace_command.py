"""`trace` against recorded GoCD API answers: which calls it makes, how it pages through a job's history,
what it makes of each run's state transitions, the trace it writes, the waits it prints, and one sentence
(exit 2, no token) for every way GoCD or the options can be wrong.

The answers in tests/data/gocd_history have the shapes of GoCD's representers (gocd/gocd:
PipelineGroupsRepresenter v1, PipelineConfigRepresenter v11, TemplateConfigRepresenter v7,
EnvironmentsRepresenter v3, JobInstancesRepresenter v1). The clock stands at 2026-11-24 12:00 UTC, so
`--since 7d` reaches back to 2026-11-17 12:00 UTC."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import responses
from responses import matchers

from elastic_agent.advisor.workload import TraceJob, load_trace
from elastic_agent.clock import ManualClock
from elastic_agent.service import trace_command

DATA = Path(__file__).parent / "data" / "gocd_history"
SERVER = "https://gocd.example.com/go"
TOKEN = "gocd-pat-0c4e9b7a1d2f43e8b6a5c9d0e7f1a2b3"
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC).timestamp()
V = "application/vnd.go.cd.v{}+json"
HISTORY = SERVER + "/api/jobs/{}/history"
COMPILE = HISTORY.format("api/build/compile")


def fixture(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def serve(mock: responses.RequestsMock, url: str, name: str, version: int, **query: str) -> None:
    match = [matchers.header_matcher({"Accept": V.format(version), "Authorization": f"bearer {TOKEN}"})]
    if "history" in url:
        match.append(matchers.query_param_matcher({"page_size": "100", **query}))
    mock.get(url, json=fixture(name), content_type=V.format(version) + "; charset=utf-8", match=match)


def serve_config(mock: responses.RequestsMock) -> None:
    serve(mock, SERVER + "/api/admin/pipeline_groups", "pipeline_groups.json", 1)
    serve(mock, SERVER + "/api/admin/environments", "environments.json", 3)
    for pipeline in ("api", "web", "deploy"):
        serve(mock, SERVER + f"/api/admin/pipelines/{pipeline}", f"pipeline_{pipeline}.json", 11)
    serve(mock, SERVER + "/api/admin/templates/node-app", "template_node_app.json", 7)


def serve_everything(mock: responses.RequestsMock) -> None:
    serve_config(mock)
    serve(mock, COMPILE, "history_api_build_compile_1.json", 1)
    serve(mock, COMPILE, "history_api_build_compile_2.json", 1, after="1008")
    serve(mock, COMPILE, "history_api_build_compile_3.json", 1, after="1006")
    serve(mock, HISTORY.format("api/test/unit"), "history_api_test_unit.json", 1)
    serve(mock, HISTORY.format("web/build/bundle"), "history_web_build_bundle.json", 1)


@pytest.fixture
def gocd() -> Iterator[responses.RequestsMock]:
    # An unregistered URL is answered with a ConnectionError: a call the command should not make fails it.
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "gocd-token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


def trace(token_file: Path, output: Path, *options: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    trace_command.add_arguments(parser)
    args = parser.parse_args(
        ["--server", SERVER, "--token-file", str(token_file), "-o", str(output), *options]
    )
    out, err = StringIO(), StringIO()
    status = trace_command.run(args, out=out, err=err, clock=ManualClock(NOW))
    assert TOKEN not in out.getvalue() + err.getvalue()
    return status, out.getvalue(), err.getvalue()


# Every run of the fixtures, as the trace must have it (hand-worked from the transitions):
# `duration` Assigned -> Completed (Preparing when there is no Assigned), `waited` Scheduled -> Assigned.
def row(at: str, profile: str, env: str, pipeline: str, duration: float, shape: tuple[Any, ...],
        waited: float, built: float) -> dict[str, Any]:
    counter, stage, stage_counter, job, result = shape
    return {"at": at, "profile": profile, "environment": env, "pipeline": pipeline, "duration": duration,
            "pipeline_counter": counter, "stage": stage, "stage_counter": stage_counter, "job": job,
            "result": result, "waited": waited, "built": built}


EXPECTED_ROWS = [
    row("2026-11-18T08:00:00.000Z", "java", "prod", "api", 480.0, (54, "build", 1, "compile", "Passed"),
        120.0, 470.0),  # compile #54: 08:02:00 -> 08:10:00
    row("2026-11-22T03:15:00.250Z", "node", "", "web", 60.0, (11, "build", 1, "bundle", "Failed"),
        2.0, 57.0),  # bundle #11, cancelled after it got its agent: Failed, its pipeline run ends there
    row("2026-11-23T14:00:00.000Z", "java", "prod", "api", 140.0, (57, "build", 1, "compile", "Passed"),
        45.0, 135.0),  # compile #57: no Assigned, Preparing 14:00:45
    row("2026-11-23T14:04:00.000Z", "java", "prod", "api", 120.0, (57, "test", 2, "unit", "Passed"),
        5.0, 110.0),  # unit #57 (a rerun: stage counter "2"), profile from #{PROFILE}
    row("2026-11-24T07:30:00.000Z", "node", "", "web", 120.0, (12, "build", 1, "bundle", "Passed"),
        60.0, 115.0),  # bundle #12 (the template's job)
    row("2026-11-24T09:00:00.000Z", "java", "prod", "api", 280.0, (59, "build", 1, "compile", "Passed"),
        30.0, 270.0),  # compile #59
    row("2026-11-24T09:06:00.000Z", "java", "prod", "api", 110.0, (59, "test", 1, "unit", "Passed"),
        10.0, 100.0),  # unit #59
]  # fmt: skip


def test_the_trace_has_every_finished_elastic_run_since_since_sorted_by_scheduled_time(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"

    status, _, _ = trace(token_file, output, "--since", "7d")

    assert status == 0
    assert [json.loads(line) for line in output.read_text().splitlines()] == EXPECTED_ROWS


def test_the_written_trace_loads_in_the_simulator_with_the_same_times_profiles_and_durations(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"
    assert trace(token_file, output)[0] == 0  # --since defaults to 7d

    jobs = load_trace(output)

    # `at` relative to the earliest run (2026-11-18 08:00:00 UTC); the loader ignores `waited`, `built`.
    # The job identifiers come through, so the simulated GoCD schedules each run as GoCD did.
    assert jobs == [
        TraceJob(0.0, "java", "prod", "api", 480.0, 54, "build", 1, "compile"),
        TraceJob(3 * 86400 + 19 * 3600 + 15 * 60 + 0.25, "node", None, "web", 60.0, 11, "build", 1, "bundle",
                 "Failed"),
        TraceJob(5 * 86400 + 6 * 3600, "java", "prod", "api", 140.0, 57, "build", 1, "compile"),
        TraceJob(5 * 86400 + 6 * 3600 + 4 * 60, "java", "prod", "api", 120.0, 57, "test", 2, "unit"),
        TraceJob(5 * 86400 + 23 * 3600 + 30 * 60, "node", None, "web", 120.0, 12, "build", 1, "bundle"),
        TraceJob(6 * 86400 + 3600, "java", "prod", "api", 280.0, 59, "build", 1, "compile"),
        TraceJob(6 * 86400 + 3600 + 6 * 60, "java", "prod", "api", 110.0, 59, "test", 1, "unit"),
    ]  # fmt: skip


def test_a_csv_trace_has_the_same_rows_and_loads_too(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    jsonl, csv = tmp_path / "trace.jsonl", tmp_path / "trace.csv"
    assert trace(token_file, jsonl)[0] == 0
    assert trace(token_file, csv)[0] == 0

    assert csv.read_text().splitlines()[0] == (
        "at,profile,environment,pipeline,duration,pipeline_counter,stage,stage_counter,job,result,waited,built"
    )
    assert load_trace(csv) == load_trace(jsonl)


def test_paging_follows_the_next_cursor_and_stops_at_the_first_page_reaching_past_since(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    assert trace(token_file, tmp_path / "trace.jsonl")[0] == 0

    compile_calls = [
        call.request.url for call in gocd.calls if "/api/jobs/api/build/compile/" in str(call.request.url)
    ]
    # Page 3 holds run #53 of 2026-11-16, before --since: its `next` link (after=1003) is not followed.
    assert compile_calls == [
        COMPILE + "?page_size=100",
        COMPILE + "?page_size=100&after=1008",
        COMPILE + "?page_size=100&after=1006",
    ]
    # Jobs on static agents (api/build/lint, deploy/deploy/ship): no history is asked for.
    assert not [
        call for call in gocd.calls if "/lint/" in str(call.request.url) or "/ship/" in str(call.request.url)
    ]


def test_since_as_a_date_reaches_back_to_that_day_and_no_further(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"

    status, out, _ = trace(token_file, output, "--since", "2026-11-23")

    assert status == 0
    assert [json.loads(line)["at"] for line in output.read_text().splitlines()] == [
        "2026-11-23T14:00:00.000Z",
        "2026-11-23T14:04:00.000Z",
        "2026-11-24T07:30:00.000Z",
        "2026-11-24T09:00:00.000Z",
        "2026-11-24T09:06:00.000Z",
    ]
    # Only runs since the date are judged: compile #55 (out of order, 2026-11-20) is not among them.
    assert "out of order" not in out


def test_the_printed_waits_per_profile_are_the_mean_and_p95_of_the_fixtures(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    status, out, _ = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("  ")]
    # java waits 5, 10, 30, 45, 120 s: mean 210/5 = 42.0, p95 (nearest rank 5 of 5) 120; durations
    # 480+140+120+280+110 = 1130 s over 5. node waits 2, 60 s: mean 31.0, p95 (rank 2 of 2) 60; durations
    # 60+120 over 2. All 7: mean 272/7 = 38.857, p95 (rank 7 of 7) 120; durations 1310/7 = 187.14.
    assert rows == [
        ["profile", "jobs", "mean", "wait", "p95", "wait", "max", "wait", "mean", "duration"],
        ["java", "5", "42.0", "s", "120.0", "s", "120.0", "s", "226.0", "s"],
        ["node", "2", "31.0", "s", "60.0", "s", "60.0", "s", "90.0", "s"],
        ["(all)", "7", "38.9", "s", "120.0", "s", "120.0", "s", "187.1", "s"],
    ]
    assert (
        "Summary: 7 job runs on 2 elastic profiles since 2026-11-17 12:00 UTC written to "
        f"{tmp_path / 'trace.jsonl'}; they waited 38.9 s on average, 120.0 s at p95." in out
    )


def test_runs_left_out_are_counted_by_reason_and_the_cancelled_run_kept_is_said(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    _, out, _ = trace(token_file, tmp_path / "trace.jsonl")

    left = [line for line in out.splitlines() if line.startswith(("Left out", "Kept"))]
    assert left == [
        "Left out: 2 jobs without an elastic profile (static agents; their history is not read): "
        "api/build/lint, deploy/deploy/ship.",
        "Left out: 1 job run still waiting or running when read.",  # compile #60, Building
        "Left out: 1 job run rescheduled (GoCD ran the job again as a new run, counted on its own).",  # #58
        "Left out: 1 job run never got an agent (cancelled while waiting).",  # #56, Scheduled -> Completed
        "Left out: 1 job run with state transitions out of order (clocks?).",  # #55: Assigned < Scheduled
        "Kept: 1 job run cancelled after getting an agent (it held the agent until then).",  # bundle #11
    ]


def test_a_history_without_any_run_since_since_writes_an_empty_trace_and_says_so(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_config(gocd)
    for job in ("api/build/compile", "api/test/unit", "web/build/bundle"):
        gocd.get(HISTORY.format(job), json={"jobs": []}, content_type=V.format(1))
    output = tmp_path / "trace.jsonl"

    status, out, _ = trace(token_file, output)

    assert status == 0
    assert output.read_text() == "" and load_trace(output) == []
    assert "Summary: no job run on an elastic profile since 2026-11-17 12:00 UTC" in out


# --- errors --------------------------------------------------------------------------------------------


def only_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err
    return lines[0]


def test_a_refused_token_is_one_sentence_exit_2_and_no_trace(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    gocd.get(SERVER + "/api/admin/environments", status=401, json={"message": "You are not authenticated!"})
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(token_file, output)

    assert status == 2 and not output.exists()
    assert only_sentence(err) == (
        "error: GoCD refused the token: check --token-file (a personal access token of an admin). "
        "GoCD said: You are not authenticated!"
    )


def test_a_token_without_admin_rights_is_told_what_the_trace_needs(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve(gocd, SERVER + "/api/admin/environments", "environments.json", 3)
    gocd.get(SERVER + "/api/admin/pipeline_groups", status=403, json={"message": "You are not authorized."})

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "may not read the pipeline groups (403)" in only_sentence(err)
    assert "system administrator" in err


def test_a_missing_history_api_names_the_url_and_the_gocd_version_needed(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_config(gocd)
    gocd.get(
        COMPILE, status=404, json={"message": "The url you are trying to reach appears to be incorrect."}
    )

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    sentence = only_sentence(err)
    assert f"{COMPILE} (404) for the history of job api/build/compile" in sentence
    assert "GoCD 20.1 or later" in sentence


def test_a_server_error_says_to_look_at_gocds_log(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    gocd.get(SERVER + "/api/admin/environments", status=500, body="<html><body>Oops</body></html>")

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert only_sentence(err) == (
        f"error: GoCD failed on GET {SERVER}/api/admin/environments (500): see the GoCD server's log."
    )


def test_an_html_page_instead_of_json_asks_whether_the_url_is_gocds(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve(gocd, SERVER + "/api/admin/environments", "environments.json", 3)
    gocd.get(SERVER + "/api/admin/pipeline_groups", body="<!DOCTYPE html><title>Sign in</title>")

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "is not JSON: is --server the GoCD server's URL, ending in /go" in only_sentence(err)


def test_a_history_answer_of_another_shape_is_a_sentence_not_a_traceback(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_config(gocd)
    gocd.get(COMPILE, json={"jobs": {"name": "compile"}})

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "`jobs` in the history of job api/build/compile is not a list of objects" in only_sentence(err)


def test_an_unreachable_server_is_one_sentence(token_file: Path, tmp_path: Path) -> None:
    with responses.RequestsMock():  # nothing registered: every call fails to connect
        status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert only_sentence(err).startswith(f"error: could not reach GoCD at {SERVER}/api/admin/environments")


@pytest.mark.parametrize(
    ("since", "says"),
    [
        ("7", "--since 7 needs a unit: write 7d for days or 7h for hours"),
        (
            "7x",
            "--since '7x' is neither a duration (7d, 36h) nor an ISO date or time (2026-11-17, "
            "2026-11-17T08:00:00Z)",
        ),
        ("0d", "--since must reach back some time, e.g. 7d"),
        ("2026-12-01", "--since 2026-12-01 is not in the past (it is now 2026-11-24 12:00 UTC)"),
    ],
)
def test_a_bad_since_is_one_sentence_and_nothing_is_asked(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path, since: str, says: str
) -> None:
    status, _, err = trace(token_file, tmp_path / "trace.jsonl", "--since", since)

    assert status == 2 and not gocd.calls
    assert only_sentence(err) == f"error: {says}"


def test_an_unreadable_token_file_or_output_place_is_one_sentence(
    gocd: responses.RequestsMock, tmp_path: Path, token_file: Path
) -> None:
    status, _, err = trace(tmp_path / "no-such-token", tmp_path / "trace.jsonl")
    assert status == 2
    assert (
        only_sentence(err)
        == f"error: cannot read the token file {tmp_path / 'no-such-token'}: No such file or directory"
    )

    status, _, err = trace(token_file, tmp_path / "missing" / "trace.jsonl")
    assert status == 2
    assert "the directory" in only_sentence(err) and "does not exist" in err

    status, _, err = trace(token_file, tmp_path / "trace.txt")
    assert status == 2
    assert "must end in .jsonl or .csv" in only_sentence(err)
    assert not gocd.calls


def test_the_token_is_sent_as_a_bearer_and_never_printed_or_logged(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    serve_everything(gocd)  # every answer is registered to match only `Authorization: bearer <token>`
    caplog.set_level(logging.DEBUG)

    status, out, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 0 and gocd.calls
    assert TOKEN not in out + err + caplog.text
    assert TOKEN not in (tmp_path / "trace.jsonl").read_text()
