"""The GoCD REST double's answers held against gocd/gocd's representers and controllers (the fields below
are written down from the files named, at the HEAD mirrored in /work/.mirror/gocd+gocd): one test per
endpoint, with its paging, its empty answers, what a user without the rights gets, and its error bodies,
over real HTTP with `requests`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DEFAULT_ORIGIN
from tests.support.doubles.gocd_rest import ServedGoCD, World, serve, world_from_trace
from tests.support.paths import TEST_DATA

# api/api-stage-instance-v3/.../representers/StageInstanceRepresenter.java (cancelled_by only when Cancelled)
STAGE_HISTORY_ITEM = [
    "name", "counter", "approval_type", "approved_by", "result", "rerun_of_counter", "pipeline_name",
    "pipeline_counter", "jobs",
]  # fmt: skip
# api/api-stage-instance-v3/.../representers/JobHistoryItemRepresenter.java
STAGE_HISTORY_JOB = ["name", "state", "result", "scheduled_date"]
# api/api-stage-instance-v3/.../representers/StageRepresenter.java
STAGE_INSTANCE = [
    "name", "counter", "approval_type", "approved_by", "scheduled_at", "last_transitioned_time", "result",
    "rerun_of_counter", "fetch_materials", "clean_working_directory", "artifacts_deleted", "pipeline_name",
    "pipeline_counter", "jobs",
]  # fmt: skip
# api/api-stage-instance-v3/.../representers/JobInstanceRepresenter.java
STAGE_INSTANCE_JOB = [
    "name", "state", "result", "scheduled_date", "rerun", "original_job_id", "agent_uuid", "pipeline_name",
    "pipeline_counter", "stage_name", "stage_counter", "job_state_transitions",
]  # fmt: skip
# api/api-job-instance-v1/.../representers/JobInstanceRepresenter.java
JOB = [
    "name", "state", "result", "original_job_id", "scheduled_date", "rerun", "agent_uuid", "pipeline_name",
    "pipeline_counter", "stage_name", "stage_counter", "job_state_transitions",
]  # fmt: skip
# api-shared-v11/.../PipelineConfigRepresenter.java, stages/StageRepresenter.java, stages/JobRepresenter.java
PIPELINE = [
    "_links", "label_template", "lock_behavior", "name", "template", "group", "origin", "parameters",
    "environment_variables", "materials", "stages", "tracking_tool", "timer",
]  # fmt: skip
STAGE_CONFIG = [
    "name", "fetch_materials", "clean_working_directory", "never_cleanup_artifacts", "approval",
    "environment_variables", "jobs",
]  # fmt: skip
JOB_CONFIG = [
    "name", "run_instance_count", "timeout", "elastic_profile_id", "environment_variables", "resources",
    "tasks", "tabs", "artifacts",
]  # fmt: skip
FORBIDDEN = (
    '{\n  "message" : "You are not authorized to perform this action."\n}'  # HaltApiMessages, MessageJson
)
LINK = re.compile(r"http://127\.0\.0\.1:\d+/go/api/")


@pytest.fixture(scope="module")
def world() -> World:
    return world_from_trace(
        generate_pipelines(PipelineSpec(days=1.0, commit_pipelines=4), seed=2), origin=DEFAULT_ORIGIN, seed=7
    )


@pytest.fixture(scope="module")
def gocd(world: World) -> Iterator[ServedGoCD]:
    with serve(world) as served:
        yield served


def get(gocd: ServedGoCD, path: str, version: int, user: str = "admin", **params: Any) -> requests.Response:
    headers = {
        "Accept": f"application/vnd.go.cd.v{version}+json",
        "Authorization": f"bearer {gocd.tokens[user]}",
    }
    return requests.get(gocd.url + path, headers=headers, params=params, timeout=10)


def follow(gocd: ServedGoCD, href: str, version: int, **params: Any) -> Any:
    """The answer at a link GoCD gave."""
    headers = {
        "Accept": f"application/vnd.go.cd.v{version}+json",
        "Authorization": f"bearer {gocd.tokens['admin']}",
    }
    return requests.get(href, headers=headers, params=params, timeout=10).json()


def busiest_stage(world: World) -> tuple[str, str, int]:
    runs: dict[tuple[str, str], int] = {}
    for stage in world.stages:
        runs[(stage.pipeline, stage.name)] = runs.get((stage.pipeline, stage.name), 0) + 1
    (pipeline, stage), count = max(runs.items(), key=lambda item: item[1])
    return pipeline, stage, count


def test_stage_history_pages_newest_first_with_absolute_cursor_links_and_string_counters(
    gocd: ServedGoCD, world: World
) -> None:
    pipeline, stage, count = busiest_stage(world)
    ids = sorted((s.id for s in world.stages if (s.pipeline, s.name) == (pipeline, stage)), reverse=True)
    assert count > 25
    first = get(gocd, f"/api/stages/{pipeline}/{stage}/history", 3)
    assert first.headers["Content-Type"] == "application/vnd.go.cd.v3+json;charset=utf-8"
    page = first.json()
    assert list(page) == ["_links", "stages"]
    assert len(page["stages"]) == 10  # ApiController DEFAULT_PAGE_SIZE
    item = page["stages"][0]
    assert list(item) == STAGE_HISTORY_ITEM and list(item["jobs"][0]) == STAGE_HISTORY_JOB
    assert isinstance(item["counter"], str) and isinstance(item["pipeline_counter"], int)
    history = f"{gocd.url}/api/stages/{pipeline}/{stage}/history"
    assert page["_links"] == {"next": {"href": f"{history}?after={ids[9]}"}}  # at the latest: no previous
    second = follow(gocd, page["_links"]["next"]["href"], 3)  # as given: no page_size, so 10 again
    assert second["_links"] == {
        "previous": {"href": f"{history}?before={ids[10]}"},
        "next": {"href": f"{history}?after={ids[19]}"},
    }
    seen = [s["pipeline_counter"] for s in page["stages"] + second["stages"]]
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == 20
    walked = get(gocd, f"/api/stages/{pipeline}/{stage}/history", 3, page_size=100).json()
    stages = walked["stages"]
    while "next" in walked.get("_links", {}):
        walked = follow(gocd, walked["_links"]["next"]["href"], 3, page_size=100)
        stages += walked["stages"]
    assert len(stages) == count and "next" not in walked.get("_links", {})


def test_stage_history_leaves_out_rescheduled_instances_names_who_cancelled_and_is_empty_for_no_runs(
    gocd: ServedGoCD,
) -> None:
    rescheduled = get(gocd, "/api/stages/extra-reschedule/build/history", 3).json()
    assert [job["name"] for job in rescheduled["stages"][0]["jobs"]] == ["compile"]
    assert "_links" not in rescheduled  # one page holding the latest and the oldest
    cancelled = get(gocd, "/api/stages/extra-cancel/deploy/history", 3).json()["stages"]
    assert [(s["result"], s["cancelled_by"]) for s in cancelled] == [("Cancelled", "admin")] * 2
    empty = get(gocd, "/api/stages/extra-cancel/nosuchstage/history", 3)
    assert empty.status_code == 200 and empty.text == '{\n  "stages" : [ ]\n}'


def test_history_parameters_are_checked_as_api_controller_checks_them(gocd: ServedGoCD) -> None:
    small = get(gocd, "/api/stages/extra-rerun/test/history", 3, page_size=5)
    assert small.status_code == 400
    assert small.text == (  # RoutesHelper.httpException: Gson, HTML-safe
        '{"message":"The query parameter \\u0027page_size\\u0027, '
        'if specified must be a number between 10 and 100."}'
    )
    assert get(gocd, "/api/jobs/extra-rerun/test/lint/history", 1, page_size=101).status_code == 400
    cursor = get(gocd, "/api/stages/extra-rerun/test/history", 3, after="x")
    assert (cursor.status_code, cursor.json()) == (
        400,
        {"message": "The query parameter 'after', if specified, must be a positive integer."},
    )
    assert get(gocd, "/api/stages/extra-rerun/test/history", 3, before="-3").status_code == 400
    missing = get(gocd, "/api/stages/nosuchpipeline/test/history", 3)
    assert (missing.status_code, missing.json()) == (
        404,
        {"message": "Pipeline with name 'nosuchpipeline' was not found!"},
    )
    hidden = get(gocd, "/api/stages/extra-secret/deploy/history", 3, user="dev")
    assert (hidden.status_code, hidden.text) == (403, FORBIDDEN)


def test_stage_instance_has_numbers_for_counters_null_identifiers_in_jobs_and_transitions(
    gocd: ServedGoCD, world: World
) -> None:
    rerun = get(gocd, "/api/stages/extra-rerun/1/test/2", 3).json()
    assert list(rerun) == STAGE_INSTANCE
    assert (rerun["counter"], rerun["rerun_of_counter"], rerun["approved_by"]) == (2, 1, "admin")
    lint, unit = rerun["jobs"]  # ORDER BY builds.name
    assert list(unit) == STAGE_INSTANCE_JOB
    assert [unit[key] for key in ("pipeline_name", "pipeline_counter", "stage_name", "stage_counter")] == [
        None
    ] * 4
    original = next(
        r for r in world.truth() if (r.pipeline, r.stage_counter, r.job) == ("extra-rerun", 1, "unit")
    )
    assert (unit["rerun"], unit["original_job_id"], lint["rerun"], lint["original_job_id"]) == (
        False,
        original.job_id,
        True,
        None,
    )
    assert [t["state"] for t in lint["job_state_transitions"]] == [
        "Scheduled", "Assigned", "Preparing", "Building", "Completing", "Completed",
    ]  # fmt: skip
    assert list(lint["job_state_transitions"][0]) == ["state", "state_change_time"]
    first = get(gocd, "/api/stages/extra-rerun/1/test/1", 3).json()
    copied = next(job for job in first["jobs"] if job["name"] == "unit")
    assert copied["job_state_transitions"] == unit["job_state_transitions"]  # copied from the original
    rescheduled = get(gocd, "/api/stages/extra-reschedule/1/build/1", 3).json()
    assert len(rescheduled["jobs"]) == 1 and rescheduled["jobs"][0]["state"] == "Completed"
    waiting = get(gocd, "/api/stages/extra-running/1/build/1", 3).json()
    assert {job["name"]: job["agent_uuid"] for job in waiting["jobs"]}["lint"] is None
    assert waiting["result"] == "Unknown"


def test_stage_instance_of_a_missing_pipeline_run_or_stage_answers_as_stage_service_does(
    gocd: ServedGoCD, world: World
) -> None:
    missing = get(gocd, "/api/stages/nosuchpipeline/1/test/1", 3)
    assert (missing.status_code, missing.json()) == (
        404,
        {"message": "Pipeline with name 'nosuchpipeline' was not found!"},
    )
    no_run = get(gocd, "/api/stages/extra-rerun/9999/test/1", 3)
    assert no_run.status_code == 404
    assert (
        no_run.text
        == "{\n  \"message\" : \"Not Found { Pipeline 'extra-rerun' with counter '9999' not found }\"\n}"
    )
    null_stage = get(gocd, "/api/stages/extra-rerun/1/test/7", 3).json()  # StageSqlMapDao: a NullStage, 200
    assert (null_stage["counter"], null_stage["jobs"], null_stage["scheduled_at"]) == (0, [], world.now_ms)
    assert "pipeline_name" not in null_stage
    words = get(gocd, "/api/stages/extra-rerun/one/test/1", 3)
    assert (words.status_code, words.json()) == (422, {"message": 'For input string: "one"'})
    open_world = world_from_trace([], origin=DEFAULT_ORIGIN, seed=1)
    open_world.security = False
    with serve(open_world) as served:
        answer = requests.get(
            f"{served.url}/api/stages/nope/1/test/1",
            headers={"Accept": "application/vnd.go.cd.v3+json"},
            timeout=10,
        )
    assert (answer.status_code, answer.json()) == (
        404,
        {"message": "Not Found { Pipeline 'nope' not found }"},
    )


def test_job_history_keeps_rescheduled_instances_leaves_out_copies_and_never_has_transitions(
    gocd: ServedGoCD, world: World
) -> None:
    rescheduled = get(gocd, "/api/jobs/extra-reschedule/build/compile/history", 1)
    assert rescheduled.headers["Content-Type"] == "application/vnd.go.cd.v1+json;charset=utf-8"
    jobs = rescheduled.json()["jobs"]
    assert [list(job) for job in jobs] == [JOB, JOB]
    assert [(job["state"], job["result"]) for job in jobs] == [
        ("Completed", "Passed"),
        ("Rescheduled", "Unknown"),
    ]
    assert all(job["job_state_transitions"] == [] for job in jobs)
    assert (jobs[0]["stage_counter"], jobs[0]["pipeline_counter"]) == ("1", 1)
    unit = get(gocd, "/api/jobs/extra-rerun/test/unit/history", 1).json()["jobs"]
    lint = get(gocd, "/api/jobs/extra-rerun/test/lint/history", 1).json()["jobs"]
    assert [job["stage_counter"] for job in unit] == ["1"]  # the copy in counter 2 is left out
    assert [(job["stage_counter"], job["rerun"]) for job in lint] == [("2", True), ("1", False)]
    assert get(gocd, "/api/jobs/extra-multi/test/shard/history", 1).text == '{\n  "jobs" : [ ]\n}'
    assert len(get(gocd, "/api/jobs/extra-multi/test/shard-runInstance-2/history", 1).json()["jobs"]) == 1
    pipeline, stage, _ = busiest_stage(world)
    job = next(s.jobs[0].name for s in world.stages if (s.pipeline, s.name) == (pipeline, stage))
    page = get(gocd, f"/api/jobs/{pipeline}/{stage}/{job}/history", 1).json()
    assert len(page["jobs"]) == 10 and list(page["_links"]) == ["next"]
    assert re.fullmatch(
        rf"http://127\.0\.0\.1:\d+/go/api/jobs/{pipeline}/{stage}/{job}/history\?after=\d+",
        page["_links"]["next"]["href"],
    )


def test_job_instance_has_transitions_and_answers_the_original_for_a_copy(gocd: ServedGoCD) -> None:
    lint = get(gocd, "/api/jobs/extra-rerun/1/test/2/lint", 1).json()
    assert list(lint) == JOB and lint["rerun"] is True and len(lint["job_state_transitions"]) == 6
    copy = get(gocd, "/api/jobs/extra-rerun/1/test/2/unit", 1).json()
    assert (copy["stage_counter"], copy["original_job_id"]) == ("1", None)  # findJobId: the original
    missing = get(gocd, "/api/jobs/extra-rerun/1/test/1/nosuchjob", 1)
    assert (missing.status_code, missing.json()) == (
        404,
        {"message": "No job instance was found for 'extra-rerun/1/test/1/nosuchjob'."},
    )
    bad = get(gocd, "/api/jobs/extra-rerun/x/test/1/lint", 1)
    assert bad.json() == {"message": "The params 'pipeline_counter' must be a number greater than 0."}


def test_pipeline_groups_list_what_a_group_admin_may_view_and_refuse_a_viewer(gocd: ServedGoCD) -> None:
    admin = get(gocd, "/api/admin/pipeline_groups", 1).json()
    assert list(admin) == ["_links", "_embedded"] and list(admin["_links"]) == ["self", "doc", "find"]
    groups = {group["name"]: group for group in admin["_embedded"]["groups"]}
    assert list(groups["extras"]) == ["_links", "name", "authorization", "pipelines"]
    assert groups["extras"]["authorization"] == {
        "view": {"users": ["dev"], "roles": []},
        "admins": {"users": ["ops"], "roles": []},
    }
    assert (
        groups["admins-only"]["authorization"] == {}
    )  # AuthorizationRepresenter writes only non-empty parts
    pipeline = groups["extras"]["pipelines"][0]
    assert list(pipeline) == ["_links", "name"] and LINK.match(pipeline["_links"]["self"]["href"])
    ops = get(gocd, "/api/admin/pipeline_groups", 1, user="ops").json()
    assert {g["name"] for g in ops["_embedded"]["groups"]} == set(groups) - {"admins-only"}
    viewer = get(gocd, "/api/admin/pipeline_groups", 1, user="dev")
    assert (viewer.status_code, viewer.text) == (403, FORBIDDEN)


def test_pipeline_config_writes_stages_jobs_and_templates_as_the_v11_representer(gocd: ServedGoCD) -> None:
    static = get(gocd, "/api/admin/pipelines/extra-static", 11, user="ops")
    assert (
        static.headers["Content-Type"] == "application/vnd.go.cd.v11+json;charset=utf-8"
        and "ETag" in static.headers
    )
    config = static.json()
    assert list(config) == PIPELINE and list(config["stages"][0]) == STAGE_CONFIG
    job = config["stages"][0]["jobs"][0]
    assert "elastic_profile_id" not in job and job["resources"] == ["linux"]  # addIfNotNull
    shard = get(gocd, "/api/admin/pipelines/extra-multi", 11).json()["stages"][0]["jobs"][0]
    assert list(shard) == JOB_CONFIG and (shard["run_instance_count"], shard["elastic_profile_id"]) == (
        3,
        "java",
    )
    templated = get(gocd, "/api/admin/pipelines/extra-templated", 11).json()
    assert (templated["template"], templated["stages"]) == ("extra-template", None)
    assert templated["parameters"] == [{"name": "PROFILE", "value": "node"}]
    assert (get(gocd, "/api/admin/pipelines/extra-static", 11, user="dev").text) == FORBIDDEN
    assert get(gocd, "/api/admin/pipelines/extra-secret", 11, user="ops").status_code == 403
    missing = get(gocd, "/api/admin/pipelines/nosuchpipeline", 11, user="ops")
    assert (missing.status_code, missing.json()) == (
        404,
        {"message": "Pipeline with name 'nosuchpipeline' was not found!"},
    )


def test_template_config_keeps_parameters_as_written_and_is_shown_to_group_admins(gocd: ServedGoCD) -> None:
    template = get(gocd, "/api/admin/templates/extra-template", 7, user="ops").json()
    assert list(template) == ["_links", "name", "stages"]
    assert template["stages"][0]["jobs"][0]["elastic_profile_id"] == "#{PROFILE}"
    assert get(gocd, "/api/admin/templates/extra-template", 7, user="dev").text == FORBIDDEN
    missing = get(gocd, "/api/admin/templates/nosuchtemplate", 7)
    assert (missing.status_code, missing.json()) == (
        404,
        {"message": "Template with name 'nosuchtemplate' was not found!"},
    )


def test_environments_list_only_what_the_user_may_view(gocd: ServedGoCD) -> None:
    admin = get(gocd, "/api/admin/environments", 3).json()
    environments = admin["_embedded"]["environments"]
    assert [list(e) for e in environments] == [["_links", "name", "pipelines", "environment_variables"]]
    assert environments[0]["name"] == "extras-env"
    pipeline = environments[0]["pipelines"][0]
    assert pipeline["name"] == "extra-rerun" and pipeline["_links"]["find"] == {
        "href": "/api/admin/pipelines/:pipeline_name"
    }
    assert get(gocd, "/api/admin/environments", 3, user="ops").json()["_embedded"] == {"environments": []}


def test_site_urls_are_for_admins_and_the_filter_chain_refuses_others_first(gocd: ServedGoCD) -> None:
    admin = get(gocd, "/api/admin/config/server/site_urls", 1).json()
    assert list(admin) == ["_links", "site_url", "secure_site_url"] and list(admin["_links"]) == [
        "doc",
        "self",
    ]
    assert (admin["site_url"], admin["secure_site_url"]) == (
        "",
        "",
    )  # ServerSiteUrlConfig.toString when unset
    refused = get(gocd, "/api/admin/config/server/site_urls", 1, user="ops")
    assert refused.status_code == 403 and refused.headers["WWW-Authenticate"] == 'Basic realm="GoCD"'
    assert refused.text == '{\n  "message": "You are not authorized to access this resource!"\n}'


def test_tokens_and_media_types_are_checked_before_the_controllers(gocd: ServedGoCD) -> None:
    path = f"{gocd.url}/api/stages/extra-rerun/test/history"
    anonymous = requests.get(path, headers={"Accept": "application/vnd.go.cd.v3+json"}, timeout=10)
    assert (anonymous.status_code, anonymous.json()) == (401, {"message": "You are not authenticated!"})
    wrong = requests.get(
        path,
        headers={"Accept": "application/vnd.go.cd.v3+json", "Authorization": "Bearer " + "0" * 40},
        timeout=10,
    )
    assert (wrong.status_code, wrong.json()) == (401, {"message": "Invalid Personal Access Token."})
    for accept in ("application/json", "application/vnd.go.cd.v2+json", ""):
        refused = requests.get(
            path, headers={"Accept": accept, "Authorization": f"bearer {gocd.tokens['dev']}"}, timeout=10
        )
        assert (refused.status_code, refused.text) == (
            404,
            "The url you are trying to reach appears to be incorrect.\r\n",
        )
    latest = requests.get(
        path,
        headers={"Accept": "application/vnd.go.cd+json", "Authorization": f"bearer {gocd.tokens['dev']}"},
        timeout=10,
    )
    assert latest.status_code == 200 and latest.headers["Content-Type"].startswith(
        "application/vnd.go.cd.v3+json"
    )


# The recorded answers of tests/unit/traces/test_trace_command.py are doubles too: held to the same fields.
RECORDED = TEST_DATA / "gocd_history"


def _recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


def test_the_recorded_stage_answers_have_the_representers_fields_and_types() -> None:
    for path in sorted(RECORDED.glob("stage_history_*.json")):
        for stage in _recorded(path.name)["stages"]:
            optional = {"cancelled_by"} if stage.get("result") == "Cancelled" else set()
            assert set(stage) - optional == set(STAGE_HISTORY_ITEM), path.name
            assert isinstance(stage["counter"], str) and isinstance(stage["pipeline_counter"], int)
            for job in stage["jobs"]:
                assert list(job) == STAGE_HISTORY_JOB, path.name
    for path in sorted(RECORDED.glob("stage_*_*_*_*.json")):
        if path.name.startswith("stage_history_"):
            continue
        stage = _recorded(path.name)
        optional = {"cancelled_by"} if stage.get("result") == "Cancelled" else set()
        assert set(stage) - optional == set(STAGE_INSTANCE), path.name
        assert isinstance(stage["counter"], int)
        for job in stage["jobs"]:
            assert list(job) == STAGE_INSTANCE_JOB, path.name
            assert [
                job[key] for key in ("pipeline_name", "pipeline_counter", "stage_name", "stage_counter")
            ] == [
                None,
                None,
                None,
                None,
            ]


def test_the_recorded_pipeline_configs_have_the_representers_fields() -> None:
    for name in ("pipeline_api.json", "pipeline_web.json", "pipeline_deploy.json"):
        config = _recorded(name)
        assert set(config) == set(PIPELINE), name
        for stage in config["stages"] or []:
            assert set(stage) == set(STAGE_CONFIG), name
            for job in stage["jobs"]:
                assert set(job) - {"elastic_profile_id"} == set(JOB_CONFIG) - {"elastic_profile_id"}, name
