"""The advisor judges warm pools, schedules and Predict as one backend runs them: the whole installation at
once, whose figures agree with benchmarks.prediction_compare's; the settings that share nothing are
still searched per profile, and the search still recommends what running every candidate would.

The trace is a small pipeline-shaped morning of traces/pipelines.py, whose test stages run on `big-memory`
after a compile on `java` (and its end-to-end tests after a build on `node`): `big-memory` only ever
follows another profile.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.prediction_compare import Case, policies
from elastic_agent.advisor.advise import ScheduleOptions
from elastic_agent.advisor.command import add_arguments, run
from elastic_agent.advisor.holdout import split_trace
from elastic_agent.advisor.installation import simulate_installation
from elastic_agent.advisor.together import TUNED
from elastic_agent.advisor.whole_trace import Request, TraceAdvice, advise_trace
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation, simulate, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DEFAULT_ORIGIN, TraceJob, write_trace

PREDICT_2M = "Predict=true IdleTimeout=2m"


def _figures(result: PolicyResult) -> dict[str, object]:
    return {key: value for key, value in result.numbers().items() if key not in ("wall_s", "policy")}


@pytest.fixture(scope="module")
def day() -> list[TraceJob]:
    return generate_pipelines(PipelineSpec(days=0.6, commit_pipelines=6, commits_per_hour=3.0), seed=2)


def _settings() -> SimSettings:
    return SimSettings(seed=1, pending_pods_count=1000, start=DEFAULT_ORIGIN.timestamp())


def _advice(jobs: list[TraceJob], request: Request) -> TraceAdvice:
    split = split_trace(jobs, DEFAULT_ORIGIN, "UTC", 0)
    return advise_trace(jobs, DEFAULT_ORIGIN, split, _settings(), request, workers=2, tuned=None)


def _candidate(advice: TraceAdvice, profile: str, label: str) -> PolicyResult:
    found = next(a for a in advice.advices if a.profile == profile)
    return next(c.result for c in found.candidates if c.label == label)


def test_predict_rows_are_the_whole_installations_as_prediction_compare_runs_them(
    day: list[TraceJob],
) -> None:
    advice = _advice(
        day, Request(idle_timeouts=("2m",), min_idle=(0,), schedules=ScheduleOptions(enabled=False))
    )
    rows, _ = policies(Case("pipelines", "", day), _settings(), learn_days=4.0)
    compared = next(p for p in rows if p.name == "prediction, IdleTimeout 2m")
    whole = simulate_by_profile((day, compared, _settings()))
    profiles = sorted({job.profile for job in day})
    assert [a.profile for a in advice.advices] == profiles
    for profile in profiles:
        assert _figures(_candidate(advice, profile, PREDICT_2M)) == _figures(whole[profile]), profile

    tests_alone = [job for job in day if job.profile == "big-memory"]
    alone = Simulation(tests_alone, Policy("alone", compared.elastic), _settings()).run()
    together = _candidate(advice, "big-memory", PREDICT_2M)
    assert alone.predicted_started == 0, "alone, the test stages' profile never sees the compile before them"
    assert together.predicted_started > 0
    assert together.wait_mean < alone.wait_mean


def test_with_warm_pools_and_schedules_the_search_recommends_what_every_candidate_would(
    day: list[TraceJob],
) -> None:
    options = ScheduleOptions(quantiles=(0.5,), busy_idle_timeouts=("30m",), plain_idle_timeouts=("2m",))
    fast, full = (
        _advice(
            day,
            Request(
                idle_timeouts=("2m", "5m", "10m", "20m"),
                min_idle=(0, 1),
                target=0.5,
                p95_target=30.0,
                schedules=options,
                exhaustive=exhaustive,
            ),
        )
        for exhaustive in (False, True)
    )
    assert any(a.skipped for a in fast.advices), "the search left some candidates out"
    for quick, every in zip(fast.advices, full.advices, strict=True):
        assert (quick.recommended.label, quick.best_flat.label, quick.verdict) == (
            every.recommended.label,
            every.best_flat.label,
            every.verdict,
        )
        assert _figures(quick.recommended.result) == _figures(every.recommended.result)
    assert [_figures(r.result) for r in fast.together] == [_figures(r.result) for r in full.together]


def test_a_tuned_server_is_reported_beside_this_one(
    day: list[TraceJob], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "day.jsonl"
    write_trace(day[:400], trace, origin=DEFAULT_ORIGIN)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = [str(trace), "--idle-timeouts", "2m", "--min-idle", "0", "--no-schedules", "--learn-days", "0"]
    assert run(parser.parse_args([*argv, "--workers", "1", "--quiet"])) == 0
    printed = capsys.readouterr().out
    assert "| this server (tick 5s, keys 30m) |" in printed
    assert f"| tuned ({TUNED.describe()}) |" in printed
    assert "GoCD server: assignment tick 5s, registration keys valid 30m" in printed


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--assignment-tick", "0s", "--assignment-tick: '0s' is not between 100ms and 10m"),
        ("--assignment-tick", "soon", "--assignment-tick: 'soon' is not a duration"),
        ("--key-lifetime", "1800000", "counts milliseconds, so 1800000 there is 30m here"),
        ("--tuned-key-lifetime", "30s", "--tuned-key-lifetime:"),
    ],
)
def test_a_bad_server_setting_is_a_sentence_and_exit_status_2(
    option: str, value: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"at": 0, "profile": "p", "environment": "", "pipeline": "x", "duration": 60}\n')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args([str(trace), option, value])) == 2
    assert said in capsys.readouterr().err


def test_an_installation_runs_whole_figures_are_those_of_the_same_run_unsplit(day: list[TraceJob]) -> None:
    warm = {"Reuse": "true", "IdleTimeout": "2m", "MinIdlePods": "1"}
    jobs = day[:300]
    policy = Policy("warm", per_profile={job.profile: warm for job in jobs})
    made = simulate_installation((jobs, policy, _settings()))
    assert _figures(made.whole) == _figures(simulate((jobs, policy, _settings())))
    split = simulate_by_profile((jobs, policy, _settings()))
    assert {p: _figures(r) for p, r in made.by_profile.items()} == {p: _figures(r) for p, r in split.items()}
