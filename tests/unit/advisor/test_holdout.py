"""Schedules learned on the first days of a trace and every candidate judged on the rest
(elastic_agent/advisor/holdout.py, SimSettings.judged_from_s)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from elastic_agent.advisor.holdout import split_trace
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceJob, write_trace

H = 3600.0
DAY = 24 * H
MONDAY = datetime(2024, 1, 1, tzinfo=UTC)


def _hourly(days: int) -> list[TraceJob]:
    return [TraceJob(d * DAY + h * H, "java", None, "api", 60.0) for d in range(days) for h in range(24)]


def test_a_week_learns_monday_to_thursday_and_is_judged_on_friday_to_sunday() -> None:
    jobs = _hourly(7)
    split = split_trace(jobs, MONDAY)
    assert split.learned == tuple(date(2024, 1, d) for d in (1, 2, 3, 4))
    assert split.judged == (date(2024, 1, 5), date(2024, 1, 6), date(2024, 1, 7))
    assert split.at == 4 * DAY
    assert split.learning(jobs) == jobs[: 4 * 24] and split.judged_jobs(jobs) == 3 * 24
    line = split.describe(jobs)
    assert "learned on Mon 2024-01-01 to Thu 2024-01-04 (96 jobs)" in line
    assert "judged on Fri 2024-01-05 to Sun 2024-01-07 (72 jobs" in line


def test_the_cut_is_at_midnight_in_the_schedules_time_zone() -> None:
    # Monday 00:00 to Sunday 22:00 UTC is Monday 01:00 to Sunday 23:00 in Berlin, where Friday begins at
    # 23:00 UTC on Thursday.
    split = split_trace(_hourly(7)[:-1], MONDAY, "Europe/Berlin")
    assert split.learned[0] == date(2024, 1, 1) and split.judged[0] == date(2024, 1, 5)
    assert split.at == 4 * DAY - H


def test_the_number_of_learning_days_can_be_set_and_zero_means_no_cut() -> None:
    jobs = _hourly(7)
    two = split_trace(jobs, MONDAY, learn_days=2)
    assert len(two.learned) == 2 and len(two.judged) == 5 and two.at == 2 * DAY
    whole = split_trace(jobs, MONDAY, learn_days=0)
    assert not whole.split and whole.learning(jobs) == jobs and whole.at == 0.0
    assert two.days_judged == 5.0 and whole.days_judged == 7.0, "not cut, every calendar day is judged"
    too_many = split_trace(jobs, MONDAY, learn_days=7)
    assert not too_many.split and "none of its 7 to judge" in too_many.describe(jobs)


def test_a_trace_of_one_day_is_learned_and_judged_whole_and_the_report_says_so() -> None:
    jobs = _hourly(1)
    split = split_trace(jobs, MONDAY)
    assert not split.split and split.at == 0.0 and split.learning(jobs) == jobs
    assert split.describe(jobs).startswith("Learned and judged on the whole trace (24 jobs): the trace's")
    # Two calendar days, but arrivals within one day: still one day, not cut.
    late = [TraceJob(12 * H + k * H, "java", None, "api", 60.0) for k in range(20)]
    assert not split_trace(late, MONDAY).split


def test_the_judged_figures_count_only_the_jobs_and_pod_seconds_from_the_cut() -> None:
    # One pod, kept by a 60m IdleTimeout: it boots for job A before the cut and serves job B after it.
    cut = 2 * H
    trace = [TraceJob(cut - 600, "java", None, "api", 60.0), TraceJob(cut + 1200, "java", None, "api", 60.0)]
    policy = Policy("reuse 60m", {"Reuse": "true", "IdleTimeout": "60m"})
    settings = SimSettings(seed=3, boot_median_s=20.0, boot_bounds_s=(20.0, 20.0))
    whole_run = Simulation(trace, policy, settings)
    whole = whole_run.run()
    judged = Simulation(trace, policy, replace(settings, judged_from_s=cut)).run()
    assert whole.pods_created == 1 and whole.jobs == 2 and judged.jobs == 1
    assert judged.pods_created == 0 and judged.peak_pods == 1, "created before the cut, alive after it"
    first, second = sorted(whole_run.model.jobs(), key=lambda job: job.scheduled_at)
    assert first.wait_s is not None and second.wait_s is not None
    assert judged.waits == [second.wait_s] and judged.assigned == judged.completed == 1
    assert whole.boot_pod_s == pytest.approx(20.0) and judged.boot_pod_s == 0.0
    # Idle before the cut: from A's end to the cut; the rest of the pod's life is the same in both.
    a_end = next(a.finished_at for a in whole_run.model.assignments if a.job_id == first.job_id)
    assert a_end is not None
    assert whole.idle_pod_s - judged.idle_pod_s == pytest.approx(settings.start + cut - a_end)
    assert judged.busy_pod_s == pytest.approx(60.0) and whole.busy_pod_s == pytest.approx(120.0)


def test_the_advisor_proposes_from_the_learning_days_and_says_which_days_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from elastic_agent.cli import main

    # Monday is busy from 09:00 to 10:59, Tuesday from 15:00 to 16:59; Monday learns, Tuesday is judged.
    jobs = [TraceJob(9 * H + k * 120, "java", None, "api", 60.0) for k in range(60)]
    jobs += [TraceJob(DAY + 15 * H + k * 120, "java", None, "api", 60.0) for k in range(60)]
    path = tmp_path / "two_days.csv"
    write_trace(jobs, path, origin=MONDAY)
    argv = ["advise", str(path), "--idle-timeouts", "2m", "--min-idle", "0", "--warm-quantiles", "0"]
    argv += ["--busy-idle-timeouts", "30m", "--plain-idle-timeouts", "2m", "--workers", "1"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Schedules learned on Mon 2024-01-01 (60 jobs); every candidate judged on Tue 2024-01-02" in text
    # Monday's busy hours and the hour before them, which the schedule candidate was proposed for;
    # from the whole trace they would be 8-10,14-16h.
    assert "- every day (mon-sun, UTC): busy 8-10h;" in text
    assert "| schedule: busy IdleTimeout=30m MinIdlePods=0, else IdleTimeout=2m |" in text


def test_a_negative_number_of_learning_days_is_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from elastic_agent.cli import main

    path = tmp_path / "week.csv"
    write_trace(_hourly(7), path, origin=MONDAY)
    assert main(["advise", str(path), "--learn-days", "-1"]) == 2
    assert capsys.readouterr().err == "error: --learn-days: -1 is not 0 or more\n"
