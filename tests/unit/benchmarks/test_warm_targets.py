"""The warm-start targets' rules (benchmarks/warm_targets_rules.py) on made-up rows, and the benchmark's
options and exit status (benchmarks/warm_targets.py) with its simulations stood in for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks import warm_targets
from benchmarks import warm_targets_rules as rules
from benchmarks.prediction_compare import cases
from elastic_agent.traces.measures import PolicyResult


def row(
    name: str, mean: float, p95: float, idle: float, refused: int = 0, waits: Sequence[float] = ()
) -> PolicyResult:
    jobs = 100
    return PolicyResult(
        policy=name, jobs=jobs, assigned=jobs, completed=jobs, pods_created=1, wait_mean=mean, wait_p50=0.0,
        wait_p95=p95, wait_p99=0.0, wait_max=0.0, waited_past_resend=0, idle_pod_s=idle * jobs,
        boot_pod_s=0.0, busy_pod_s=0.0, peak_pods=1, pods_left=0, simulated_s=0.0, wall_s=0.0, events=0,
        create_agent_sent=0, should_assign_asked=0, registrations_refused=refused, waits=list(waits),
    )  # fmt: skip


REFERENCE = row("flat IdleTimeout 10m", 10.0, 30.0, 100.0)
FLOOR = row("floor", 1.5, 4.0, 5000.0)


def test_a_baseline_is_dominated_only_by_a_predict_row_idling_no_more_and_waiting_less_on_both() -> None:
    baseline = row("flat IdleTimeout 20m", 8.0, 28.0, 200.0)
    idles_more = row("Predict A", 7.0, 27.0, 201.0)
    worse_p95 = row("Predict B", 7.5, 28.5, 150.0)
    [verdict] = rules.dominance(REFERENCE, [baseline], [idles_more, worse_p95])
    assert not verdict.met and "Predict B" in verdict.says, "the nearest row within the idle is named"

    equal_idle = row("Predict C", 7.9, 27.9, 200.0)
    [verdict] = rules.dominance(REFERENCE, [baseline], [idles_more, worse_p95, equal_idle])
    assert verdict.met and verdict.says.startswith("Predict C")


def test_only_baselines_from_the_references_idle_to_three_times_it_are_judged() -> None:
    baselines = [row(f"b{idle}", 9.0, 29.0, idle) for idle in (99.0, 100.0, 300.0, 301.0)]
    cheap = row("Predict", 1.0, 2.0, 50.0)
    judged = [v.row for v in rules.dominance(REFERENCE, baselines, [cheap])]
    assert judged == ["dominance at b100.0", "dominance at b300.0"]


def test_without_a_predict_row_that_idles_as_little_a_baseline_is_not_dominated() -> None:
    [verdict] = rules.dominance(REFERENCE, [REFERENCE], [row("Predict", 1.0, 2.0, 101.0)])
    assert not verdict.met and "no Predict row idles 100 or less" in verdict.says


@pytest.mark.parametrize(
    ("mean", "p95", "idle", "met"),
    [
        (2.99, 10.0, 200.0, True),
        (3.01, 9.0, 150.0, False),
        (2.5, 10.1, 150.0, False),
        (2.5, 9.0, 201.0, False),
    ],
)
def test_the_knee_needs_the_floors_mean_plus_1_5_s_a_10_s_p95_and_twice_the_references_idle(
    mean: float, p95: float, idle: float, met: bool
) -> None:
    verdict = rules.knee(FLOOR, REFERENCE, [row("Predict", mean, p95, idle)])
    assert verdict.met is met


def test_a_missed_knee_names_the_lowest_mean_within_the_idle_and_the_cheapest_row_meeting_the_waits() -> None:
    within = row("Predict within", 3.4, 9.0, 190.0)
    costly = row("Predict costly", 2.9, 8.0, 310.0)
    verdict = rules.knee(FLOOR, REFERENCE, [within, costly])
    assert not verdict.met
    assert (
        "Lowest mean within the idle bound: Predict within" in verdict.says and "0.40 s over" in verdict.says
    )
    assert "Cheapest meeting the waits: Predict costly" in verdict.says


def test_half_needs_half_the_references_mean_at_no_more_than_its_idle() -> None:
    assert rules.half(REFERENCE, [row("Predict", 5.0, 20.0, 100.0)]).met
    assert not rules.half(REFERENCE, [row("Predict", 5.01, 20.0, 100.0)]).met
    assert not rules.half(REFERENCE, [row("Predict", 4.0, 20.0, 100.5)]).met


def test_a_refused_registration_in_any_row_misses_the_refusal_target() -> None:
    assert rules.refusals([REFERENCE, FLOOR]).met
    verdict = rules.refusals([REFERENCE, row("Predict", 1.0, 2.0, 3.0, refused=2)])
    assert not verdict.met and "'Predict': 2" in verdict.says


def test_the_shortfall_splits_a_mean_into_the_jobs_that_waited_for_a_boot_and_the_rest() -> None:
    split = rules.split_waits(row("Predict", 8.5, 30.0, 150.0, waits=[1.0, 1.0, 30.0, 2.0]))
    assert (split.jobs, split.booted, split.from_boots_s, split.from_the_rest_s) == (4, 1, 7.5, 1.0)


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (["--flat", "15m,30m"], "--flat must hold 10m"),
        (["--flat", "10m,soon"], "'soon' is not a duration"),
        (["--schedules", "5m/30m"], "is not ELSE/BUSY/QUANTILE"),
        (["--schedules", "5m/30m/2"], "must be from 0 to 1"),
        (["--min-idle", "0"], "whole numbers above 0"),
        (["--check", "speed"], "speed is not a target"),
        (["--workers", "0"], "--workers at least 1"),
    ],
)
def test_a_bad_option_is_a_sentence_and_exit_status_2(
    argv: list[str], sentence: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        warm_targets.parse(argv)
    assert stopped.value.code == 2
    assert sentence in capsys.readouterr().err


def test_a_checked_target_that_is_missed_exits_1_and_the_results_file_says_which(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every Predict row waits more than flat 10m: dominance is missed; the simulations are stood in for
    by fixed rows (their figures are what the rules read) and the trace is the quick one."""
    figures = {
        "floor": (1.5, 4.0, 5000.0),
        "flat": (10.0, 30.0, 100.0),
        "MinIdlePods alone": (9.0, 29.0, 150.0),
    }

    def simulated(runs: Sequence[tuple[Any, Any, Any]], workers: int, done: Any = None) -> list[PolicyResult]:
        kinds = {policy.name: kind for kind, policy in warm_targets.grid(args, demands)}
        return [row(p.name, *figures.get(kinds[p.name], (11.0, 31.0, 90.0))) for _, p, _ in runs]

    argv = [
        "--flat",
        "10m",
        "--min-idle",
        "1",
        "--predict-idle",
        "2m",
        "--schedules",
        "",
        "--out",
        str(tmp_path),
    ]
    args = warm_targets.parse(argv)
    demands: dict[str, Any] = {}
    monkeypatch.setattr(warm_targets, "simulate_all", simulated)
    monkeypatch.setattr(
        warm_targets, "cases", lambda which, quick, seed, rate: cases(which, True, seed, rate)
    )

    assert warm_targets.main(argv) == 0, "no target checked"
    assert warm_targets.main([*argv, "--check", "dominance"]) == 1
    assert warm_targets.main([*argv, "--check", "refusals"]) == 0
    written = (tmp_path / "warm_targets.md").read_text()
    assert "- dominance at flat IdleTimeout 10m: MISSED." in written
    assert "- 0 registrations refused: met." in written
