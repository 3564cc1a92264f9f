"""The pipeline-shaped trace generator: stages follow stages a few seconds after the previous one passed,
fan-outs stay within their bounds, a failure ends its run, downstream pipelines follow a passed upstream,
timers fire on their hours, commits follow the working week, and a seed fixes everything. Also the
`generate` command that writes one."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from elastic_agent.cli import main
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DAY_S, TraceJob, load_trace

# Two working days: enough runs of every kind, generated in a few hundredths of a second.
SPEC = PipelineSpec(days=2.0)
Run = dict[str, list[TraceJob]]  # stage name -> its jobs, stages in the order they were scheduled


@pytest.fixture(scope="module")
def trace() -> list[TraceJob]:
    return generate_pipelines(SPEC, seed=5)


def runs(jobs: list[TraceJob]) -> dict[tuple[str, int], Run]:
    found: dict[tuple[str, int], Run] = defaultdict(dict)
    for job in sorted(jobs, key=lambda j: j.at):
        assert job.pipeline_counter is not None
        found[(job.pipeline, job.pipeline_counter)].setdefault(job.stage, []).append(job)
    return found


def ends(stage: list[TraceJob]) -> float:
    return max(job.at + job.duration for job in stage)


def passed(run: Run) -> bool:
    return all(job.result == "Passed" for stage in run.values() for job in stage)


def test_each_stage_is_scheduled_a_few_seconds_after_the_previous_one_passed(trace: list[TraceJob]) -> None:
    followed = 0
    for run in runs(trace).values():
        stages = list(run.values())
        for before, after in itertools.pairwise(stages):
            assert all(job.result == "Passed" for job in before)
            assert 1.0 <= after[0].at - ends(before) <= 6.0
            followed += 1
    assert followed > 100


def test_the_jobs_of_a_stage_share_their_time_and_fan_outs_stay_within_1_to_30(trace: list[TraceJob]) -> None:
    sizes = set()
    for run in runs(trace).values():
        assert 1 <= len(run) <= 5
        for stage in run.values():
            assert len({job.at for job in stage}) == 1
            assert len({job.profile for job in stage}) == 1
            assert len({job.job_name for job in stage}) == len(stage)
            sizes.add(len(stage))
    assert min(sizes) == 1 and 20 <= max(sizes) <= 30, "single jobs and wide test fan-outs both occur"


def test_a_failed_stage_ends_its_run(trace: list[TraceJob]) -> None:
    shapes = {name: list(run) for (name, _), run in runs(trace).items() if passed(run)}
    failed = [(name, run) for (name, _), run in runs(trace).items() if not passed(run)]
    assert failed, "a few runs fail"
    for name, run in failed:
        stages = list(run.values())
        assert all(job.result == "Passed" for stage in stages[:-1] for job in stage)
        assert sum(job.result == "Failed" for job in stages[-1]) == 1
        if name in shapes:  # a passed run of the same pipeline shows the stages the failure cut off
            assert list(run) == shapes[name][: len(run)]


def test_a_deploy_pipeline_runs_only_after_its_upstream_passed(trace: list[TraceJob]) -> None:
    every = runs(trace)
    upstream_passes: dict[str, list[float]] = defaultdict(list)
    for (name, _), run in every.items():
        if passed(run):
            upstream_passes[name].append(ends(list(run.values())[-1]))
    deploys = sorted((key, run) for key, run in every.items() if key[0].endswith("-deploy"))
    assert deploys
    own_first_ends: dict[str, list[float]] = defaultdict(list)
    for (name, _), run in deploys:
        start = next(iter(run.values()))[0].at
        after_upstream = [start - at for at in upstream_passes[name.removesuffix("-deploy")]]
        after_own = [start - at for at in own_first_ends[name]]
        # 2 to 10 s after a passed run of its upstream, or, when its own first stage was still active
        # then (GoCD does not trigger it again meanwhile), 1 to 6 s after that stage ended.
        assert any(2.0 <= gap <= 10.0 for gap in after_upstream) or any(
            1.0 <= gap <= 6.0 for gap in after_own
        )
        own_first_ends[name].append(ends(next(iter(run.values()))))


def test_timers_fire_nightly_at_two_and_hourly_on_working_days(trace: list[TraceJob]) -> None:
    starts = {name: [] for name in ("nightly-regression", "hourly-smoke")}  # type: dict[str, list[float]]
    for (name, _), run in runs(trace).items():
        if name in starts:
            starts[name].append(next(iter(run.values()))[0].at)
    assert sorted(starts["nightly-regression"]) == [2 * 3600.0, DAY_S + 2 * 3600.0]
    assert sorted(starts["hourly-smoke"]) == [
        day * DAY_S + h * 3600.0 for day in (0, 1) for h in range(8, 19)
    ]


def test_commits_follow_the_working_week() -> None:
    week = generate_pipelines(PipelineSpec(days=7.0, commit_pipelines=20), seed=2)
    first_stages = [
        job for job in week if job.stage in ("compile", "build") and not job.pipeline.startswith("n")
    ]
    by_day = [sum(1 for job in first_stages if int(job.at // DAY_S) == day) for day in range(7)]
    assert min(by_day[:5]) > 4 * max(by_day[5:]), by_day
    office = sum(1 for job in first_stages if job.at % DAY_S >= 9 * 3600 and job.at % DAY_S < 17 * 3600)
    assert office > 0.6 * len(first_stages)


def test_a_seed_fixes_the_trace() -> None:
    assert generate_pipelines(SPEC, seed=5) == generate_pipelines(SPEC, seed=5)
    assert generate_pipelines(SPEC, seed=5) != generate_pipelines(SPEC, seed=6)


def test_the_generate_command_writes_a_pipeline_shaped_trace_that_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "week.jsonl"
    assert main(["generate", "--days", "2", "--seed", "5", str(output)]) == 0
    assert load_trace(output) == generate_pipelines(SPEC, seed=5)
    assert "jobs over" in capsys.readouterr().out


def test_the_generate_command_refuses_a_file_it_cannot_write_as_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", str(tmp_path / "week.txt")]) == 2
    assert "must end in .jsonl or .csv" in capsys.readouterr().err
    assert not (tmp_path / "week.txt").exists()
