"""`trace` against recorded GoCD API answers: which calls it makes, how it pages through a stage's history,
what it makes of each stage run's jobs, the trace it writes and extends, the waits it prints, what it says
of what the token cannot see, and one sentence (exit 2, no token) for every way GoCD or the options can
be wrong.

The answers in tests/data/gocd_history have the shapes of gocd/gocd's representers:
PipelineGroupsRepresenter v1, PipelineConfigRepresenter v11, TemplateConfigRepresenter v7,
EnvironmentsRepresenter v3, ServerSiteUrlsConfigRepresenter v1, and api-stage-instance-v3's
StageInstancesRepresenter (stage history: `counter` a string, jobs without transitions) and
StageRepresenter (a stage run: `counter` a number, each job's own pipeline and stage fields null, its
transitions). The clock stands at 2026-11-24 12:00 UTC, so `--since 7d` reaches back to 2026-11-17 12:00.

The recorded installation: pipeline `api` (environment prod) runs build [compile on java, lint on a
static agent] and test [unit on #{PROFILE}=java, it with run_instance_count 2]; `web` (no environment,
template node-app) runs build [bundle on node]; `deploy` runs on static agents. Runs: compile #53 (before
--since), #54, #55 (transitions out of order), #56 (cancelled while waiting), #57, #58 (rescheduled once:
GoCD shows only its second attempt), #59, #60 (building); test #57 failed in unit and was re-run as
stage counter 2 (unit re-run, the two `it` instances copied), test #59; bundle #11 (cancelled while
building) and #12.
"""

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

from elastic_agent.clock import ManualClock
from elastic_agent.service import trace_command
from elastic_agent.traces.workload import TraceJob, load_trace
from tests.support.paths import TEST_DATA

DATA = TEST_DATA / "gocd_history"
SERVER = "https://gocd.example.com/go"
TOKEN = "gocd-pat-0c4e9b7a1d2f43e8b6a5c9d0e7f1a2b3"
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC).timestamp()
V = "application/vnd.go.cd.v{}+json"
STAGES = SERVER + "/api/stages/"


def fixture(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def serve(mock: responses.RequestsMock, url: str, name: str, version: int, **query: str) -> None:
    match = [matchers.header_matcher({"Accept": V.format(version), "Authorization": f"bearer {TOKEN}"})]
    if url.endswith("/history"):
        match.append(matchers.query_param_matcher({"page_size": "100", **query}))
    mock.get(url, json=fixture(name), content_type=V.format(version) + "; charset=utf-8", match=match)


def serve_config(mock: responses.RequestsMock, *, admin: bool = True) -> None:
    if admin:
        serve(mock, SERVER + "/api/admin/config/server/site_urls", "site_urls.json", 1)
    serve(mock, SERVER + "/api/admin/pipeline_groups", "pipeline_groups.json", 1)
    serve(mock, SERVER + "/api/admin/environments", "environments.json", 3)
    for pipeline in ("api", "web", "deploy"):
        serve(mock, SERVER + f"/api/admin/pipelines/{pipeline}", f"pipeline_{pipeline}.json", 11)
    serve(mock, SERVER + "/api/admin/templates/node-app", "template_node_app.json", 7)


def serve_everything(mock: responses.RequestsMock, *, admin: bool = True) -> None:
    serve_config(mock, admin=admin)
    serve(mock, STAGES + "api/build/history", "stage_history_api_build_1.json", 3)
    serve(mock, STAGES + "api/build/history", "stage_history_api_build_2.json", 3, after="4008")
    serve(mock, STAGES + "api/build/history", "stage_history_api_build_3.json", 3, after="4002")
    serve(mock, STAGES + "api/test/history", "stage_history_api_test_1.json", 3)
    serve(mock, STAGES + "web/build/history", "stage_history_web_build_1.json", 3)
    for path in sorted(DATA.glob("stage_*_*_*_*.json")):
        if path.name.startswith("stage_history_"):
            continue
        _, pipeline, counter, stage, stage_counter = path.stem.split("_")
        serve(mock, STAGES + f"{pipeline}/{counter}/{stage}/{stage_counter}", path.name, 3)


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


def trace(token_file: Path, output: Path, *options: str, server: str = SERVER) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    trace_command.add_arguments(parser)
    options = ("--server", server, "--token-file", str(token_file), "-o", str(output), *options)
    args = parser.parse_args(options)
    out, err = StringIO(), StringIO()
    status = trace_command.run(args, out=out, err=err, clock=ManualClock(NOW))
    assert TOKEN not in out.getvalue() + err.getvalue()
    return status, out.getvalue(), err.getvalue()


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if not line.startswith("#")]


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
    row("2026-11-23T14:04:00.000Z", "java", "prod", "api", 197.0, (57, "test", 1, "it-runInstance-1",
        "Passed"), 3.0, 190.0),  # one row per instance of a run_instance_count job
    row("2026-11-23T14:04:00.000Z", "java", "prod", "api", 206.0, (57, "test", 1, "it-runInstance-2",
        "Passed"), 4.0, 199.0),
    row("2026-11-23T14:04:00.000Z", "java", "prod", "api", 82.0, (57, "test", 1, "unit", "Failed"),
        8.0, 75.0),  # unit's profile is #{PROFILE}, the pipeline's parameter
    row("2026-11-23T15:00:00.000Z", "java", "prod", "api", 120.0, (57, "test", 2, "unit", "Passed"),
        5.0, 110.0),  # the re-run of the failed job; the `it` copies in stage counter 2 are not runs
    row("2026-11-24T07:30:00.000Z", "node", "", "web", 120.0, (12, "build", 1, "bundle", "Passed"),
        60.0, 115.0),  # bundle #12 (the template's job)
    row("2026-11-24T08:01:00.000Z", "java", "prod", "api", 288.0, (58, "build", 1, "compile", "Passed"),
        12.0, 280.0),  # compile #58's second attempt, the one GoCD shows
    row("2026-11-24T09:00:00.000Z", "java", "prod", "api", 280.0, (59, "build", 1, "compile", "Passed"),
        30.0, 270.0),
    row("2026-11-24T09:06:00.000Z", "java", "prod", "api", 64.0, (59, "test", 1, "it-runInstance-1",
        "Passed"), 6.0, 61.0),
    row("2026-11-24T09:06:00.000Z", "java", "prod", "api", 68.0, (59, "test", 1, "it-runInstance-2",
        "Passed"), 7.0, 66.0),
    row("2026-11-24T09:06:00.000Z", "java", "prod", "api", 110.0, (59, "test", 1, "unit", "Passed"),
        10.0, 100.0),
]  # fmt: skip


def test_the_trace_has_every_finished_elastic_run_since_since_sorted_by_scheduled_time(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"

    status, _, _ = trace(token_file, output, "--since", "7d")

    assert status == 0
    assert rows_of(output) == EXPECTED_ROWS
    # The first line says where the trace came from and where the next read starts: compile #60, still
    # building at 11:50, is read next time.
    assert output.read_text().splitlines()[0] == (
        '# gocd-trace: {"server": "https://gocd.example.com/go", "resume_from": "2026-11-24T11:50:00.000Z"}'
    )


def test_the_written_trace_loads_in_the_simulator_with_the_same_times_profiles_and_durations(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"
    assert trace(token_file, output)[0] == 0  # --since defaults to 7d

    jobs = load_trace(output)

    # `at` relative to the earliest run (2026-11-18 08:00:00 UTC); `waited` is kept (the advisor's
    # measured wait), `built` ignored.
    day = 86400
    assert jobs[:3] == [
        TraceJob(0.0, "java", "prod", "api", 480.0, 54, "build", 1, "compile", waited=120.0),
        TraceJob(3 * day + 19 * 3600 + 15 * 60 + 0.25, "node", None, "web", 60.0, 11, "build", 1, "bundle",
                 "Failed", waited=2.0),
        TraceJob(5 * day + 6 * 3600, "java", "prod", "api", 140.0, 57, "build", 1, "compile", waited=45.0),
    ]  # fmt: skip
    assert [(job.stage_counter, job.job_name) for job in jobs if job.pipeline_counter == 57] == [
        (1, "compile"),
        (1, "it-runInstance-1"),
        (1, "it-runInstance-2"),
        (1, "unit"),
        (2, "unit"),
    ]


def test_a_csv_trace_has_the_same_rows_and_loads_too(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    jsonl, csv = tmp_path / "trace.jsonl", tmp_path / "trace.csv"
    assert trace(token_file, jsonl)[0] == 0
    assert trace(token_file, csv)[0] == 0

    assert csv.read_text().splitlines()[1] == (
        "at,profile,environment,pipeline,duration,pipeline_counter,stage,stage_counter,job,result,waited,built"
    )
    assert load_trace(csv) == load_trace(jsonl)


def test_histories_are_paged_to_the_first_run_past_since_and_one_stage_instance_read_per_stage_run(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    assert trace(token_file, tmp_path / "trace.jsonl")[0] == 0

    urls = [str(call.request.url).removeprefix(STAGES) for call in gocd.calls]
    urls = [url for url in urls if not url.startswith("http")]
    # Page 3 of build's history starts with #53, scheduled more than 6 hours before --since: no further.
    assert sorted(url for url in urls if "history" in url) == [
        "api/build/history?page_size=100",
        "api/build/history?page_size=100&after=4002",
        "api/build/history?page_size=100&after=4008",
        "api/test/history?page_size=100",
        "web/build/history?page_size=100",
    ]
    # One call per stage run with a finished elastic job since --since: not #53 (too old), not #60 (still
    # building); static jobs (api/build/lint, deploy) have no history read at all.
    assert sorted(url for url in urls if "history" not in url) == [
        "api/54/build/1", "api/55/build/1", "api/56/build/1", "api/57/build/1", "api/57/test/1",
        "api/57/test/2", "api/58/build/1", "api/59/build/1", "api/59/test/1", "web/11/build/1",
        "web/12/build/1",
    ]  # fmt: skip


def test_since_as_a_date_reaches_back_to_that_day_and_no_further(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"

    status, out, _ = trace(token_file, output, "--since", "2026-11-24")

    assert status == 0
    assert [r["at"] for r in rows_of(output)] == [r["at"] for r in EXPECTED_ROWS[7:]]
    assert "out of order" not in out  # compile #55 (2026-11-20) is not judged


def test_the_printed_waits_and_the_summary_say_what_was_read_and_what_it_cost(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    status, out, _ = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("  ")]
    # java waits 3 4 5 6 7 8 10 12 30 45 120 (11 runs): mean 250/11 = 22.7, p95 (nearest rank 11) 120;
    # durations 480+140+197+206+82+120+288+280+64+68+110 = 2035 over 11 = 185.0. node: 2 and 60 s.
    assert rows == [
        ["profile", "jobs", "mean", "wait", "p95", "wait", "max", "wait", "mean", "duration"],
        ["java", "11", "22.7", "s", "120.0", "s", "120.0", "s", "185.0", "s"],
        ["node", "2", "31.0", "s", "60.0", "s", "60.0", "s", "90.0", "s"],
        ["(all)", "13", "24.0", "s", "120.0", "s", "120.0", "s", "170.4", "s"],
    ]
    assert (
        "Summary: 13 new job runs since 2026-11-17 12:00 UTC (0 runs already in the trace); "
        f"{tmp_path / 'trace.jsonl'} now holds 13 job runs on 2 elastic profiles." in out
    )
    assert (
        "Calls to GoCD: 23 (11 stage instance, 5 stage history, 3 pipeline config, 1 site URLs, "
        "1 environments, 1 pipeline groups, 1 template); 0 retries. 11 stage runs read." in out
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
        "Left out: 1 job run still waiting or running when read (a later run of trace picks them up).",  # #60
        "Left out: 1 job run never got an agent (cancelled while waiting).",  # #56, Scheduled -> Completed
        "Left out: 1 job run with state transitions out of order (clocks?).",  # #55: Assigned < Scheduled
        "Left out: 2 job runs copied into a re-run of their stage without running again (their first run "
        "is counted).",  # it-runInstance-1 and -2 in test #57 counter 2
        "Kept: 1 job run cancelled after getting an agent (it held the agent until then; written as Failed).",
    ]


def test_running_again_extends_the_trace_with_only_the_new_runs_and_reads_only_what_is_new(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"
    assert trace(token_file, output)[0] == 0
    first_calls = len(gocd.calls)

    # An hour later GoCD has finished compile #60: its history page and stage run say so.
    page = fixture("stage_history_api_build_1.json")
    page["stages"][0]["jobs"][0].update(state="Completed", result="Passed")
    run = fixture("stage_api_60_build_1.json")
    job = run["jobs"][0]
    job.update(state="Completed", result="Passed")
    start = job["scheduled_date"]
    job["job_state_transitions"] += [
        {"state": "Completing", "state_change_time": start + 595_000},
        {"state": "Completed", "state_change_time": start + 600_000},
    ]
    gocd.replace(responses.GET, STAGES + "api/build/history", json=page)
    gocd.replace(responses.GET, STAGES + "api/60/build/1", json=run)
    status, out, err = trace(token_file, output)

    assert status == 0
    assert "extending" in err and "from 2026-11-24 11:50 UTC" in err
    assert rows_of(output) == [
        *EXPECTED_ROWS,
        row("2026-11-24T11:50:00.000Z", "java", "prod", "api", 580.0, (60, "build", 1, "compile", "Passed"),
            20.0, 570.0),
    ]  # fmt: skip
    new_urls = [str(call.request.url) for call in gocd.calls[first_calls:]]
    assert [url for url in new_urls if STAGES in url and "history" not in url] == [STAGES + "api/60/build/1"]
    assert "Summary: 1 new job run since 2026-11-24 11:50 UTC" in out
    assert output.read_text().splitlines()[0].endswith('"resume_from": "2026-11-24T12:00:00.000Z"}')


def test_a_trace_that_trace_did_not_write_or_from_another_server_is_not_extended(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    foreign = tmp_path / "mine.jsonl"
    foreign.write_text('{"at": 0, "profile": "java", "pipeline": "p", "duration": 5}\n')
    status, _, err = trace(token_file, foreign)
    assert status == 2 and "was not written by trace" in err and "--fresh" in err

    serve_everything(gocd)
    output = tmp_path / "trace.jsonl"
    assert trace(token_file, output)[0] == 0
    status, _, err = trace(token_file, output, server="https://other.example.com/go")
    assert status == 2
    assert f"{output} was traced from https://gocd.example.com/go, not https://other.example.com/go" in err

    assert trace(token_file, foreign, "--fresh")[0] == 0
    assert rows_of(foreign) == EXPECTED_ROWS


def only_sentence(err: str) -> str:
    """The error line; a traceback or a second line fails the test."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


FORBIDDEN = {"message": "You are not authorized to perform this action."}  # HaltApiMessages.forbiddenMessage
# /api/admin/** is refused to a user who is not an administrator by the security filters first (newsecurity
# AuthorizeFilterChain), with their own message (elastic_agent/simulation/gocd_rest/app.py).
NOT_ADMIN = {"message": "You are not authorized to access this resource!"}


def test_a_token_of_a_user_who_is_not_an_administrator_gets_a_partial_trace_and_is_told_so(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd, admin=False)
    gocd.get(SERVER + "/api/admin/config/server/site_urls", status=403, json=NOT_ADMIN)
    # A group admin of `api`'s group who may only view `web`'s: web's config is refused, and GoCD lists
    # no environment to a user without a policy on environments.
    gocd.replace(responses.GET, SERVER + "/api/admin/pipelines/web", status=403, json=FORBIDDEN)
    gocd.replace(
        responses.GET, SERVER + "/api/admin/environments", json={"_embedded": {"environments": []}}
    )
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(token_file, output)

    assert status == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: The token's user is not a GoCD system administrator: GoCD showed it only the pipeline "
        "groups it may view (3 pipelines) and the environments it may view; runs of pipelines in other "
        "groups are not in this trace. An administrator's token traces everything.",
        "warning: Left out 1 pipeline whose config the token may not read (only its group's administrators "
        "may, and the config says which job runs on which elastic profile): web.",
        "warning: Left out the runs of 1 pipeline in no environment the token may view (api): GoCD lists to "
        "a user who is not an administrator only the environments it may view, so they may be in one it "
        "cannot see, and the environment decides which pods a job may use. Give an administrator's token, "
        "or --assume-no-environment if they are in none.",
    ]
    assert rows_of(output) == []  # never a blank environment for one the token was not shown

    status, _, _ = trace(token_file, output, "--fresh", "--assume-no-environment")

    assert status == 0
    api_rows = [dict(r, environment="") for r in EXPECTED_ROWS if r["pipeline"] == "api"]
    assert rows_of(output) == api_rows


def test_a_refused_token_is_one_sentence_exit_2_and_no_trace(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    refused = {"message": "You are not authenticated!"}
    gocd.get(SERVER + "/api/admin/config/server/site_urls", status=401, json=refused)
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(token_file, output)

    assert status == 2 and not output.exists()
    assert only_sentence(err) == (
        "error: GoCD refused the token: check --token-file (a personal access token of an admin). "
        "GoCD said: You are not authenticated! (the call: the server's site URLs, GET "
        "/api/admin/config/server/site_urls)"
    )


def test_a_user_who_administers_no_group_is_told_what_the_trace_needs(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    gocd.get(SERVER + "/api/admin/config/server/site_urls", status=403, json=NOT_ADMIN)
    serve(gocd, SERVER + "/api/admin/environments", "environments.json", 3)
    gocd.get(SERVER + "/api/admin/pipeline_groups", status=403, json=FORBIDDEN)

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "may not list the pipeline groups (403)" in only_sentence(err)
    assert "system administrator's personal access token" in err


def test_a_404_quotes_gocd_and_names_the_call_that_failed(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve(gocd, SERVER + "/api/admin/config/server/site_urls", "site_urls.json", 1)
    gocd.get(
        SERVER + "/api/admin/environments",
        status=404,
        json={"message": "The url you are trying to reach appears to be incorrect."},
    )

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert only_sentence(err) == (
        f"error: GoCD answered 404 to GET {SERVER}/api/admin/environments, the environments (API v3). GoCD "
        "said: The url you are trying to reach appears to be incorrect. Is --server the server's URL, "
        "ending in /go (e.g. https://gocd.example.com/go), and is this GoCD new enough to have API v3 of it?"
    )


def serve_other_stage_histories(mock: responses.RequestsMock) -> None:
    serve(mock, STAGES + "api/test/history", "stage_history_api_test_1.json", 3)
    serve(mock, STAGES + "web/build/history", "stage_history_web_build_1.json", 3)


def test_a_missing_stage_history_api_names_the_stage_call_not_job_history(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_config(gocd)
    serve_other_stage_histories(gocd)
    gocd.get(STAGES + "api/build/history", status=404, json={"message": "Not Found"})

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert only_sentence(err).startswith(
        f"error: GoCD answered 404 to GET {STAGES}api/build/history, the history of stage api/build "
        "(API v3). GoCD said: Not Found."
    )


def test_a_server_error_names_the_call_and_says_to_look_at_gocds_log(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve(gocd, SERVER + "/api/admin/config/server/site_urls", "site_urls.json", 1)
    gocd.get(SERVER + "/api/admin/environments", status=500, body="<html><body>Oops</body></html>")

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert only_sentence(err) == (
        f"error: GoCD failed on GET {SERVER}/api/admin/environments (500): see the GoCD server's log. "
        "(the call: the environments, GET /api/admin/environments)"
    )


def test_an_html_page_instead_of_json_asks_whether_the_url_is_gocds(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    gocd.get(SERVER + "/api/admin/config/server/site_urls", body="<!DOCTYPE html><title>Sign in</title>")

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "is not JSON: is --server the GoCD server's URL, ending in /go" in only_sentence(err)


def test_a_stage_answer_of_another_shape_is_a_sentence_not_a_traceback(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_config(gocd)
    serve_other_stage_histories(gocd)
    gocd.get(STAGES + "api/build/history", json={"stages": {"name": "build"}})

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    assert "`stages` in the history of stage api/build is not a list of objects" in only_sentence(err)


def test_an_unreachable_server_is_one_sentence(token_file: Path, tmp_path: Path) -> None:
    with responses.RequestsMock():  # nothing registered: every call fails to connect
        status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 2
    site_urls = f"{SERVER}/api/admin/config/server/site_urls"
    assert only_sentence(err).startswith(f"error: could not reach GoCD at {site_urls}")


@pytest.mark.parametrize(
    ("since", "says"),
    [
        ("7", "--since 7 needs a unit: write 7d for days or 7h for hours"),
        (
            "7x",
            "--since '7x' is neither a duration (7d, 36h) nor an ISO date or time (2026-11-17, "
            "2026-11-17T08:00:00Z)",
        ),
        ("4000d", "--since 4000d reaches back too far: trace reads at most 3650d (ten years)"),
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


@pytest.mark.parametrize("value", ["0", "17"])
def test_a_concurrency_out_of_range_is_one_sentence(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path, value: str
) -> None:
    status, _, err = trace(token_file, tmp_path / "trace.jsonl", "--concurrency", value)

    assert status == 2 and not gocd.calls
    assert only_sentence(err).startswith(f"error: --concurrency {value} is out of range: 1 to 16")


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
