"""Recorded GoCD API answers for `trace`'s tests (tests/unit/traces/), served through `responses`, with
the helpers that run the command and read what it wrote.

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
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import responses
from responses import matchers

from elastic_agent.clock import Clock, ManualClock
from elastic_agent.service import trace_command
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


def trace(
    token_file: Path, output: Path, *options: str, server: str = SERVER, clock: Clock | None = None
) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    trace_command.add_arguments(parser)
    options = ("--server", server, "--token-file", str(token_file), "-o", str(output), *options)
    args = parser.parse_args(options)
    out, err = StringIO(), StringIO()
    status = trace_command.run(args, out=out, err=err, clock=clock or ManualClock(NOW))
    assert TOKEN not in out.getvalue() + err.getvalue()
    return status, out.getvalue(), err.getvalue()


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if not line.startswith("#")]


# Every run of the fixtures, as the trace must have it (hand-worked from the transitions):
# `duration` Assigned -> Completed (Preparing when there is no Assigned), `waited` Scheduled -> Assigned.
def row(
    at: str,
    profile: str,
    env: str,
    pipeline: str,
    duration: float,
    shape: tuple[Any, ...],
    waited: float,
    built: float,
) -> dict[str, Any]:
    counter, stage, stage_counter, job, result = shape
    return {
        "at": at,
        "profile": profile,
        "environment": env,
        "pipeline": pipeline,
        "duration": duration,
        "pipeline_counter": counter,
        "stage": stage,
        "stage_counter": stage_counter,
        "job": job,
        "result": result,
        "waited": waited,
        "built": built,
    }


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


def only_sentence(err: str) -> str:
    """The error line; a traceback or a second line fails the test."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


FORBIDDEN = {"message": "You are not authorized to perform this action."}  # HaltApiMessages.forbiddenMessage
# /api/admin/** is refused to a user who is not an administrator by the security filters first (newsecurity
# AuthorizeFilterChain), with their own message (tests/support/doubles/gocd_rest/app.py).
NOT_ADMIN = {"message": "You are not authorized to access this resource!"}


def serve_other_stage_histories(mock: responses.RequestsMock) -> None:
    serve(mock, STAGES + "api/test/history", "stage_history_api_test_1.json", 3)
    serve(mock, STAGES + "web/build/history", "stage_history_web_build_1.json", 3)
