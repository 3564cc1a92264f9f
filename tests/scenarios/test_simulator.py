"""The virtual-time simulator itself: determinism, a tiny trace checked by hand, traces on disk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Run, Simulation, simulate_all
from elastic_agent.traces.measures import PolicyResult, percentile
from elastic_agent.traces.workload import (
    TraceError,
    TraceJob,
    WorkloadSpec,
    generate,
    load_trace,
    parse_trace,
    write_trace,
)

REUSE_2M = Policy("reuse 2m", {"Reuse": "true", "IdleTimeout": "2m"})
ONE_PER_JOB = Policy("one pod per job", {"Reuse": "false"})
# Every pod boots in exactly 20 s; agents ask for work with GoCD's back-off, which has no jitter.
FIXED = SimSettings(seed=3, boot_median_s=20.0, boot_bounds_s=(20.0, 20.0))
TINY = [
    TraceJob(1.0, "java", None, "api", 30.0),
    TraceJob(2.0, "java", None, "api", 30.0),
    TraceJob(100.0, "java", None, "api", 10.0),
]


def run(trace: list[TraceJob], policy: Policy, settings: SimSettings = FIXED) -> PolicyResult:
    return Simulation(trace, policy, settings).run()


def test_tiny_trace_with_reuse_matches_the_hand_computed_timeline() -> None:
    # t=5: the first scheduler tick sends create-agent for A and B: two jobs wait, so two pods.
    # t=25: both pods registered (20 s boot) and poll at once: A and B run (waits 24 s and 23 s).
    # t=55: both jobs end, both pods idle; each asks for work at once, then 1, 1.5, 2.25, 3.375, 5.062,
    # 7.593 s later, then every 10 s: at 55, 56, 57.5, 59.75, 63.125, 68.187, 75.78, 85.78, 95.78,
    # 105.78. t=100: C arrives and is admitted at the tick at 100; the first pod takes it at its poll at
    # 105.78 (wait 5.78) without a new pod. Pings at 60, 120, 180, 240: the second pod, idle since 55,
    # goes at 180 (125 s > 2m); the first, idle since 115.78, at 240 (124.22 s).
    result = run(TINY, REUSE_2M)
    assert result.violations == [] and result.plugin_errors == []
    assert result.pods_created == 2 and result.completed == 3
    assert result.waits == pytest.approx([5.78, 23.0, 24.0])
    assert result.wait_mean == pytest.approx(52.78 / 3)
    assert result.waited_past_resend == 0
    assert result.boot_pod_s == pytest.approx(40.0)
    assert result.busy_pod_s == pytest.approx(30.0 + 30.0 + 10.0)
    assert result.idle_pod_s == pytest.approx((180 - 55) + (105.78 - 55) + (240 - 115.78))
    assert result.peak_pods == 2 and result.pods_left == 0


def test_tiny_trace_with_one_pod_per_job_matches_the_hand_computed_timeline() -> None:
    # A and B as above; C's create-agent goes out at the tick at 100, its pod registers at 120.
    result = run(TINY, ONE_PER_JOB)
    assert result.violations == [] and result.plugin_errors == []
    assert result.pods_created == 3 and result.completed == 3
    assert result.waits == pytest.approx([20.0, 23.0, 24.0])
    assert result.boot_pod_s == pytest.approx(60.0)
    assert result.idle_pod_s == pytest.approx(0.0, abs=1e-6)
    assert result.peak_pods == 2 and result.pods_left == 0


def test_same_seed_same_results_different_seed_different_results() -> None:
    trace = generate(WorkloadSpec(jobs=120, days=0.03, pipelines=12), seed=5)
    settings = SimSettings(seed=5)
    first, second = run(trace, REUSE_2M, settings), run(trace, REUSE_2M, settings)
    same = {key: value for key, value in first.numbers().items() if key != "wall_s"}
    assert same == {key: value for key, value in second.numbers().items() if key != "wall_s"}
    assert first.waits == second.waits and first.timeline == second.timeline
    other = run(trace, REUSE_2M, SimSettings(seed=6))
    assert other.waits != first.waits  # boot times and poll phases come from the seed
    assert generate(WorkloadSpec(jobs=50, days=0.01), seed=9) == generate(
        WorkloadSpec(jobs=50, days=0.01), seed=9
    )


def test_simulations_in_worker_processes_give_the_sequential_results() -> None:
    trace = generate(WorkloadSpec(jobs=80, days=0.02, pipelines=8), seed=3)
    one_pod = Policy("one pod per job", {"Reuse": "false"})
    runs: list[Run] = [(trace, one_pod, FIXED), (trace, REUSE_2M, FIXED)]
    sequential, parallel = simulate_all(runs, workers=1), simulate_all(runs, workers=2)
    assert [r.policy for r in parallel] == ["one pod per job", REUSE_2M.name]
    for alone, side_by_side in zip(sequential, parallel, strict=True):
        numbers = {key: value for key, value in alone.numbers().items() if key != "wall_s"}
        assert numbers == {key: value for key, value in side_by_side.numbers().items() if key != "wall_s"}
        assert alone.waits == side_by_side.waits


def test_generated_workload_has_its_shape() -> None:
    spec = WorkloadSpec(jobs=4000, days=1.0)
    trace = generate(spec, seed=2)
    assert len(trace) == 4000
    assert [job.at for job in trace] == sorted(job.at for job in trace)
    assert trace[0].at >= 0 and trace[-1].at < 86_400
    assert {job.profile for job in trace} == {p.name for p in spec.profiles}
    assert None in {job.environment for job in trace}
    afternoon = sum(1 for job in trace if 12 * 3600 <= job.at < 16 * 3600)
    night = sum(1 for job in trace if 0 <= job.at < 4 * 3600)
    assert afternoon > 3 * night  # the daily cycle
    assert all(spec.min_duration_s <= job.duration <= spec.max_duration_s for job in trace)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_traces_round_trip_through_files(tmp_path: Path, suffix: str) -> None:
    trace = generate(WorkloadSpec(jobs=40, days=0.01), seed=4)
    path = tmp_path / f"trace{suffix}"
    write_trace(trace, path)
    assert load_trace(path) == trace


def test_traces_accept_iso_times_and_explain_bad_lines() -> None:
    text = (
        '{"at": "2024-05-01T10:00:30Z", "profile": "java", "environment": "", "pipeline": "p", '
        '"duration": 5}\n'
        "# a comment\n"
        '{"at": "2024-05-01T10:00:00Z", "profile": "go", "environment": "prod", "pipeline": "q", '
        '"duration": 9}\n'
    )
    trace = parse_trace(text, csv_format=False)
    assert [(job.at, job.profile, job.environment) for job in trace] == [
        (0.0, "go", "prod"),
        (30.0, "java", None),
    ]
    with pytest.raises(TraceError, match="line 1: duration must be a number"):
        parse_trace('{"at": 1, "profile": "x", "duration": "long"}', csv_format=False)
    with pytest.raises(TraceError, match="header lacks"):
        parse_trace("at,profile\n1,x\n", csv_format=True)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50.0, 99.0, 100.0)
    assert percentile([], 0.5) == 0.0


def test_advise_command_prints_a_frontier_and_a_recommendation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from elastic_agent.cli import main

    trace = generate(WorkloadSpec(jobs=60, days=0.02, profiles=WorkloadSpec().profiles[:1]), seed=8)
    path = tmp_path / "history.csv"
    write_trace(trace, path)
    assert main(["advise", str(path), "--idle-timeouts", "1m,10m", "--min-idle", "0", "--no-schedules"]) == 0
    text = capsys.readouterr().out
    assert "## profile java (60 jobs)" in text
    assert "| IdleTimeout=1m MinIdlePods=0 |" in text and "| IdleTimeout=10m MinIdlePods=0 |" in text
    # Prediction is a candidate too: the standard trace names a pipeline and stage per job, no counters.
    assert re.search(r"^Recommended: (Predict=true )?IdleTimeout=\S+ ", text, re.MULTILINE)
    assert main(["advise", str(tmp_path / "missing.csv")]) == 2
