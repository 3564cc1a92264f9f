"""The GoCD REST double's world: a trace served as GoCD would hold it (every job run in its pipeline's
history, the ground truth matching the trace), the instances a trace does not have named for what they
are, a snapshot cut at `now`, bad traces refused with a sentence; and the server around it: proxy faults
seeded and counted, concurrent calls all answered, GoCD's JSON spacing."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests

from elastic_agent.clock import ManualClock
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DEFAULT_ORIGIN, TraceJob
from tests.support.doubles.gocd_rest import Faults, ServedGoCD, serve, world_from_trace
from tests.support.doubles.gocd_rest.jsonwriters import gson, pretty

ORIGIN_MS = round(DEFAULT_ORIGIN.timestamp() * 1000)
HEADERS_V1 = {"Accept": "application/vnd.go.cd.v1+json"}


@pytest.fixture(scope="module")
def trace() -> list[TraceJob]:
    return generate_pipelines(PipelineSpec(days=0.5, commit_pipelines=4), seed=11)


def job_history(gocd: ServedGoCD, pipeline: str, stage: str, job: str) -> list[dict[str, object]]:
    """Every entry of a job's history, page after page, following GoCD's `next` links."""
    headers = HEADERS_V1 | {"Authorization": f"bearer {gocd.tokens['admin']}"}
    url = f"{gocd.url}/api/jobs/{pipeline}/{stage}/{job}/history"
    entries: list[dict[str, object]] = []
    while url:
        answer = requests.get(url, headers=headers, params={"page_size": 100}, timeout=10).json()
        entries += answer["jobs"]
        url = answer.get("_links", {}).get("next", {}).get("href", "")
    return entries


def test_every_trace_job_is_a_run_in_its_history_and_in_the_truth(trace: list[TraceJob]) -> None:
    world = world_from_trace(trace, origin=DEFAULT_ORIGIN, seed=3)
    truth = {(r.pipeline, r.pipeline_counter, r.stage, r.stage_counter, r.job): r for r in world.truth()}
    for job in trace:
        record = truth.pop((job.pipeline, job.pipeline_counter, job.stage, job.stage_counter, job.job_name))
        assert record.kind == "ran" and (record.profile, record.environment) == (job.profile, job.environment)
        assert record.scheduled_ms == ORIGIN_MS + round(job.at * 1000) and record.result == job.result
        assert record.assigned_ms is not None and record.completed_ms is not None
        assert record.completed_ms - record.assigned_ms == round(job.duration * 1000)
        assert 1_000 <= record.assigned_ms - record.scheduled_ms <= 60_000
    assert {record.pipeline for record in truth.values()} <= {
        p for p in world.pipelines if p.startswith("extra-")
    }
    served: dict[tuple[object, ...], dict[str, object]] = {}
    with serve(world) as gocd:
        for config in (p for p in world.pipelines.values() if not p.name.startswith("extra-")):
            for stage in config.stages:
                for job_config in stage.jobs:
                    for entry in job_history(gocd, config.name, stage.name, job_config.name):
                        key = (
                            entry["pipeline_name"],
                            entry["pipeline_counter"],
                            entry["stage_name"],
                            entry["stage_counter"],
                            entry["name"],
                        )
                        served[key] = entry
    assert len(served) == len(trace)
    for job in trace:
        entry = served[(job.pipeline, job.pipeline_counter, job.stage, str(job.stage_counter), job.job_name)]
        assert (entry["state"], entry["result"]) == ("Completed", job.result)
        assert entry["scheduled_date"] == ORIGIN_MS + round(job.at * 1000)


def test_the_truth_names_each_instance_a_trace_lacks_for_what_it_is(trace: list[TraceJob]) -> None:
    truth = [
        r
        for r in world_from_trace(trace, origin=DEFAULT_ORIGIN, seed=3).truth()
        if r.pipeline.startswith("extra-")
    ]
    kinds = {(r.pipeline, r.stage_counter, r.job, r.kind) for r in truth}
    assert ("extra-rerun", 2, "unit", "copied") in kinds and ("extra-rerun", 2, "lint", "ran") in kinds
    assert {r.kind for r in truth if r.pipeline == "extra-reschedule"} == {"rescheduled", "ran"}
    assert {r.kind for r in truth if r.pipeline == "extra-running"} == {"unfinished"}
    assert {r.job for r in truth if r.pipeline == "extra-multi"} == {
        f"shard-runInstance-{n}" for n in (1, 2, 3)
    }
    assert {r.config_job for r in truth if r.pipeline == "extra-multi"} == {"shard"}
    cancelled = sorted(
        (r.kind, r.result, r.assigned_ms is None) for r in truth if r.pipeline == "extra-cancel"
    )
    assert cancelled == [("never-assigned", "Cancelled", True), ("ran", "Cancelled", False)]
    static = next(r for r in truth if r.pipeline == "extra-static")
    assert (static.kind, static.profile) == ("static", None)
    assert next(r for r in truth if r.pipeline == "extra-templated").profile == "node"
    original = next(r for r in truth if (r.pipeline, r.stage_counter, r.job) == ("extra-rerun", 1, "unit"))
    copy = next(r for r in truth if r.kind == "copied")
    assert (copy.scheduled_ms, copy.assigned_ms, copy.completed_ms) == (
        original.scheduled_ms,
        original.assigned_ms,
        original.completed_ms,
    )
    rescheduled = next(r for r in truth if r.kind == "rescheduled")
    assert rescheduled.completed_ms is None and rescheduled.result == "Unknown"


def test_a_world_is_the_snapshot_at_now(trace: list[TraceJob]) -> None:
    middle = max(job.at for job in trace) / 2
    world = world_from_trace(
        trace, origin=DEFAULT_ORIGIN, seed=3, extras=False, now=DEFAULT_ORIGIN + timedelta(seconds=middle)
    )
    truth = world.truth()
    assert len(truth) == sum(1 for job in trace if job.at <= middle)
    assert all(r.scheduled_ms <= world.now_ms for r in truth)
    unfinished = [r for r in truth if r.kind == "unfinished"]
    assert unfinished and all(r.completed_ms is None and r.result == "Unknown" for r in unfinished)


def test_a_trace_gocd_could_not_have_recorded_is_refused_with_a_sentence(trace: list[TraceJob]) -> None:
    with pytest.raises(ValueError, match="twice"):
        world_from_trace([trace[0], trace[0]], origin=DEFAULT_ORIGIN, seed=1)
    with pytest.raises(ValueError, match="timezone-aware"):
        world_from_trace(trace, origin=DEFAULT_ORIGIN.replace(tzinfo=None), seed=1)
    with pytest.raises(ValueError, match="extra-static"):
        world_from_trace([TraceJob(5.0, "java", None, "extra-static", 60.0)], origin=DEFAULT_ORIGIN, seed=1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Faults(fraction=1.5)


def test_a_proxy_whose_gocd_is_gone_answers_every_call_past_down_after_with_its_own_page() -> None:
    world = world_from_trace([], origin=DEFAULT_ORIGIN, seed=1)
    headers = HEADERS_V1 | {"Authorization": f"bearer {world.tokens['admin']}"}
    gone = Faults(statuses=(502,), endpoints=frozenset({"job_history"}), down_after=3)
    with serve(world, faults=gone) as gocd:
        url = f"{gocd.url}/api/jobs/extra-rerun/test/lint/history"
        answers = [requests.get(url, headers=headers, timeout=10) for _ in range(5)]
        assert requests.get(f"{gocd.url}/api/admin/pipeline_groups", headers=headers, timeout=10).ok

    assert [answer.status_code for answer in answers] == [200, 200, 200, 502, 502]
    assert "<center>nginx</center>" in answers[-1].text and "502 Bad Gateway" in answers[-1].text


def test_proxy_faults_are_seeded_counted_and_carry_retry_after() -> None:
    world = world_from_trace([], origin=DEFAULT_ORIGIN, seed=1)
    headers = HEADERS_V1 | {"Authorization": f"bearer {world.tokens['admin']}"}
    with serve(world, faults=Faults(fraction=1.0, statuses=(429,), retry_after_s=7)) as gocd:
        throttled = requests.get(f"{gocd.url}/api/admin/pipeline_groups", headers=headers, timeout=10)
        assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "7")
    statuses = []
    for _ in range(2):
        with serve(world, faults=Faults(fraction=0.5, seed=4, endpoints=frozenset({"job_history"}))) as gocd:
            url = f"{gocd.url}/api/jobs/extra-rerun/test/lint/history"
            statuses.append([requests.get(url, headers=headers, timeout=10).status_code for _ in range(40)])
            assert requests.get(f"{gocd.url}/api/admin/pipeline_groups", headers=headers, timeout=10).ok
            assert gocd.calls == Counter({"job_history": 40, "pipeline_groups": 1})
    assert statuses[0] == statuses[1] and set(statuses[0]) <= {200, 429, 502, 503, 504}
    assert 10 <= statuses[0].count(200) <= 30
    clock = ManualClock(start=0.0)
    with serve(world, faults=Faults(delay_s=2.5), clock=clock) as gocd:
        requests.get(f"{gocd.url}/api/admin/environments", headers=headers, timeout=10)
        assert gocd.answers == Counter({("environments", 404): 1})  # v1 is not the environments API's v3
    assert clock.now() == 2.5


def test_concurrent_calls_are_all_answered_and_counted(trace: list[TraceJob]) -> None:
    world = world_from_trace(trace, origin=DEFAULT_ORIGIN, seed=3)
    headers = {"Accept": "application/vnd.go.cd.v3+json", "Authorization": f"bearer {world.tokens['dev']}"}
    paths = [
        f"/api/stages/{s.pipeline}/{s.pipeline_counter}/{s.name}/{s.counter}" for s in world.stages[:200]
    ]
    sessions = threading.local()  # a client's connections, kept alive, one pool per thread

    def call(path: str) -> tuple[int, str]:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        answer = sessions.session.get(gocd.url + path, headers=headers, timeout=10)
        return answer.status_code, answer.json()["name"]

    with serve(world) as gocd, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, paths))
        assert gocd.calls["stage_instance"] == len(paths)
    assert answers == [(200, s.name) for s in world.stages[:200]]


def test_json_is_spaced_as_jackson_and_gson_write_it() -> None:
    document = {"a": [{"b": 1, "c": []}, {"d": {}}], "e": ["x", None], "f": "é'"}
    assert pretty(document) == (
        '{\n  "a" : [ {\n    "b" : 1,\n    "c" : [ ]\n  }, {\n    "d" : { }\n  } ],\n'
        '  "e" : [ "x", null ],\n  "f" : "é\'"\n}'
    )
    assert gson({"message": "a 'b' <c> & d=e"}) == (
        '{"message":"a \\u0027b\\u0027 \\u003cc\\u003e \\u0026 d\\u003de"}'
    )
