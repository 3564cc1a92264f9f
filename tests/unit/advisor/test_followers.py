"""Which jobs follow another stage (elastic_agent/advisor/followers.py): a later stage of a pipeline run,
or the first stage of a pipeline that another's stage triggers as often as the forecast needs to learn
it; a first stage that only now and then starts near another's end, or a trace without pipeline
counters, follows nothing."""

from __future__ import annotations

from elastic_agent.advisor.followers import following
from elastic_agent.traces.workload import TraceJob

H = 3600.0


def _job(
    at: float, profile: str, pipeline: str, counter: int | None, stage: str, duration: float = 60.0
) -> TraceJob:
    return TraceJob(at, profile, None, pipeline, duration, counter, stage)


def test_a_later_stage_of_a_pipeline_run_follows_and_its_first_stage_does_not() -> None:
    jobs = []
    for run in range(1, 4):
        start = run * H
        jobs += [_job(start, "java", "api", run, "compile")]
        jobs += [_job(start + 65.0, "big", "api", run, "test") for _ in range(3)]
    found = following(jobs)
    assert (found["java"].jobs, found["java"].followers) == (3, 0)
    assert (found["big"].jobs, found["big"].followers) == (9, 9)
    assert found["big"].share == 1.0


def test_a_pipeline_triggered_by_another_stage_follows_once_it_did_so_often_enough() -> None:
    jobs = []
    for run in range(1, 4):
        start = run * H
        jobs.append(_job(start, "java", "lib", run, "build", duration=120.0))
        # The deploy pipeline starts 5 s after lib's build ended, each time.
        jobs.append(_job(start + 125.0, "go", "deploy", run, "deploy"))
    found = following(jobs)
    assert found["go"].followers == 3 and found["java"].followers == 0


def test_a_pipeline_that_starts_near_another_end_by_chance_once_follows_nothing() -> None:
    jobs = [_job(run * H, "java", "lib", run, "build", duration=120.0) for run in range(1, 4)]
    # Once within the window of lib's end, otherwise hours away: not an edge the forecast would fire.
    jobs.append(_job(1 * H + 130.0, "node", "web", 1, "build"))
    jobs += [_job(run * H + 1800.0, "node", "web", run, "build") for run in range(2, 6)]
    assert following(jobs)["node"].followers == 0


def test_a_trace_without_pipeline_counters_has_no_followers() -> None:
    jobs = [_job(i * 10.0, "java", "api", None, "test" if i % 2 else "compile") for i in range(10)]
    assert following(jobs)["java"].followers == 0
