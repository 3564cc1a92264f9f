"""What `trace` makes of a read that is not a plain success, so that a nightly job notices: a read that
sees no run, one cut short by a proxy part-way (what was read is kept and the next run goes on from
it), and one that cannot tell whether pipelines in no environment are in none."""

from __future__ import annotations

import json
from pathlib import Path

import responses

from tests.support.gocd_history_answers import (
    EXPECTED_ROWS,
    NOT_ADMIN,
    SERVER,
    STAGES,
    fixture,
    only_sentence,
    rows_of,
    serve,
    serve_everything,
    trace,
)

NO_ENVIRONMENTS = {"_embedded": {"environments": []}}
# What nginx answers when GoCD behind it does not (ngx_http_special_response.c's page).
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
# Rails' catch-all (ApplicationController#unresolved): a GoCD without the site URLs API answers so.
UNRESOLVED = "The url you are trying to reach appears to be incorrect."


def test_a_group_administrator_whose_groups_are_all_restricted_gets_no_trace_and_exit_1_saying_why(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    gocd.get(SERVER + "/api/admin/config/server/site_urls", status=403, json=NOT_ADMIN)
    gocd.get(SERVER + "/api/admin/environments", json=NO_ENVIRONMENTS)
    gocd.get(SERVER + "/api/admin/pipeline_groups", json={"_links": {}, "_embedded": {"groups": []}})
    output = tmp_path / "nightly.jsonl"

    status, out, err = trace(token_file, output)

    assert status == 1
    assert only_sentence(err) == (
        "error: No trace was written: it would hold no job run. GoCD showed the token no pipeline at all; "
        "the token is not a system administrator's: GoCD shows it only the pipeline groups it may view. "
        "Check that its user may view the pipeline groups to trace (a group administrator sees only its "
        "own groups, and none whose group is restricted to others), or give a system administrator's token."
    )
    assert not output.exists() and f"nothing was written to {output}" in out


def test_a_token_that_sees_only_static_jobs_is_told_so_and_exits_1(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve(gocd, SERVER + "/api/admin/config/server/site_urls", "site_urls.json", 1)
    serve(gocd, SERVER + "/api/admin/environments", "environments.json", 3)
    groups = {"_embedded": {"groups": [{"name": "ops", "pipelines": [{"name": "deploy"}]}]}}
    gocd.get(SERVER + "/api/admin/pipeline_groups", json=groups)
    serve(gocd, SERVER + "/api/admin/pipelines/deploy", "pipeline_deploy.json", 11)

    status, _, err = trace(token_file, tmp_path / "trace.jsonl")

    assert status == 1
    sentence = only_sentence(err)
    assert "GoCD showed the token 1 pipeline, with no job on an elastic agent profile" in sentence
    assert "(1 jobs on static agents)" in sentence and "Check that --server is the GoCD" in sentence


def test_a_read_a_proxy_cuts_short_keeps_what_was_read_and_the_next_run_reads_only_the_rest(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    # The last stage run read (one call at a time: stage runs are read in order) is refused for good.
    gocd.replace(
        responses.GET, STAGES + "web/11/build/1", status=502, body=NGINX_502, content_type="text/html"
    )
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(token_file, output, "--concurrency", "1")

    assert status == 3
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: a proxy or gateway in front of GoCD answered GET {STAGES}web/11/build/1 with 502 (Bad "
        "Gateway), not GoCD itself (the answer is not GoCD's JSON): GoCD may be restarting or overloaded, "
        "or the proxy cannot reach it in time. Check the proxy and GoCD's health, then run this again. "
        "(the call: stage run web/11/build/1, GET /api/stages/web/11/build/1)"
    ]
    assert "GoCD server's log" not in err and "Traceback" not in err
    assert f"Kept what was read before it: {output} holds 12 job runs (12 new)" in err
    kept = [row for row in EXPECTED_ROWS if (row["pipeline"], row["pipeline_counter"]) != ("web", 11)]
    assert rows_of(output) == kept
    state = json.loads(output.with_name("trace.jsonl.state.json").read_text())
    assert state["resume_from"] == "2026-11-17T12:00:00.000Z"  # where this read began

    gocd.replace(responses.GET, STAGES + "web/11/build/1", json=fixture("stage_web_11_build_1.json"))
    first = len(gocd.calls)
    status, _, err = trace(token_file, output)

    assert status == 0, err
    assert rows_of(output) == EXPECTED_ROWS
    instances = sorted(
        url.removeprefix(STAGES)
        for url in (str(call.request.url) for call in gocd.calls[first:])
        if url.startswith(STAGES) and "history" not in url
    )
    # The refused one, and the runs that are never rows (out of order, never assigned, copies): none of
    # the twelve runs already kept is read again.
    assert instances == ["api/55/build/1", "api/56/build/1", "api/57/test/2", "web/11/build/1"]


def test_when_gocd_cannot_say_whether_the_token_is_an_admins_and_most_runs_are_left_out_it_says_what_to_pass(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    gocd.replace(
        responses.GET, SERVER + "/api/admin/config/server/site_urls", status=404, body=UNRESOLVED,
        content_type="text/html",
    )  # fmt: skip
    gocd.replace(responses.GET, SERVER + "/api/admin/environments", json=NO_ENVIRONMENTS)
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(token_file, output)

    assert status == 1
    # 17: the finished elastic jobs the stage histories list, which cannot tell runs from copies.
    assert only_sentence(err) == (
        "error: 17 of the 17 job runs since 2026-11-17 12:00 UTC were left out: their pipelines (api, web) "
        "are in no environment the token was shown, and a job's environment decides which pods may run it. "
        "GoCD did not say whether the token's user is a system administrator (GET "
        "/api/admin/config/server/site_urls answered 404 (an older GoCD, or a proxy hiding it)). If it is, "
        "GoCD listed every environment, so these pipelines are in none: run this again with "
        "--assume-no-environment --since 2026-11-17T12:00:00Z to keep their runs. If it is not, give an "
        "administrator's token."
    )

    status, _, err = trace(token_file, output, "--assume-no-environment", "--since", "2026-11-17T12:00:00Z")

    assert status == 0, err
    assert rows_of(output) == [dict(row, environment="") for row in EXPECTED_ROWS]


def test_a_few_runs_left_out_that_way_are_a_warning_that_names_the_option_to_pass(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)
    # A proxy that blocks the admin path answers its own page, not GoCD's JSON: not a "no".
    gocd.replace(
        responses.GET, SERVER + "/api/admin/config/server/site_urls", status=403,
        body="<html><body>Forbidden by policy</body></html>", content_type="text/html",
    )  # fmt: skip
    output = tmp_path / "trace.jsonl"

    status, out, err = trace(token_file, output)

    assert status == 0  # web's 2 runs left out, api's 11 kept
    assert (
        "warning: Left out the runs of 1 pipeline in no environment the token may view (web): GoCD lists "
        "to a user who is not an administrator only the environments it may view, so they may be in one "
        "it cannot see, and the environment decides which pods a job may use. Whether the token is an "
        "administrator's could not be told: if it is, GoCD listed every environment and they are in none, "
        "so pass --assume-no-environment to keep their runs; if it is not, give an administrator's token."
    ) in err.splitlines()
    assert "was refused (403) by something other than GoCD" in err
    assert "Left out: 2 job runs of pipelines in no environment the token may view" in out
    assert {row["pipeline"] for row in rows_of(output)} == {"api"}
