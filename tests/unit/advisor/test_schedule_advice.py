"""The schedule advisor: the generated working week, the trace's origin, the demand analysis by hour of
the week, the proposed ReuseSchedule against the product's own validator, and a small simulated case
where a schedule waits like a long flat IdleTimeout for less idle cost.

Everything runs in virtual time on a few hundred jobs at most: the suite is long enough already.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import mean
from zoneinfo import ZoneInfo

import pytest

from elastic_agent.advisor.advise import ProfileRequest, advise_profile, render
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.traces.schedule_advice import analyse, propose
from elastic_agent.traces.workload import (
    DEFAULT_ORIGIN,
    TraceError,
    TraceJob,
    WeekShape,
    WorkloadSpec,
    generate,
    parse_trace_file,
    read_trace,
    write_trace,
)
from profiles.elastic import check_elastic_properties
from profiles.schedule import parse_schedule

H = 3600.0
BERLIN = ZoneInfo("Europe/Berlin")


def _hourly(jobs: list[TraceJob]) -> Counter[int]:
    return Counter(int(job.at // H) for job in jobs)


def test_the_generated_week_is_busy_in_office_hours_and_quiet_at_night_and_at_weekends() -> None:
    jobs = generate(WorkloadSpec(jobs=4000, days=7, week=WeekShape()), seed=3)
    per_hour = _hourly(jobs)
    office = mean(per_hour[day * 24 + hour] for day in range(5) for hour in range(9, 17))
    nights = mean(per_hour[day * 24 + hour] for day in range(5) for hour in range(0, 6))
    weekend = mean(per_hour[day * 24 + hour] for day in (5, 6) for hour in range(24))
    ramp = mean(per_hour[day * 24 + 8] for day in range(5))  # 08:00, halfway up the morning ramp
    assert office > 8 * nights and office > 5 * weekend
    assert nights < ramp < office
    assert all(0 <= job.at < 7 * 24 * H for job in jobs)


def test_without_a_week_shape_the_trace_still_follows_the_daily_cosine() -> None:
    daily = generate(WorkloadSpec(jobs=500, days=1), seed=5)
    per_hour = _hourly(daily)
    # The daily cosine peaks at 14:00 and is lowest at 02:00; a week shape would be empty at night.
    assert sum(per_hour[h] for h in range(12, 17)) > 3 * sum(per_hour[h] for h in range(0, 5)) > 0


def test_a_seconds_trace_without_an_origin_starts_on_a_monday_at_midnight_utc() -> None:
    trace = parse_trace_file('{"at": 50400, "profile": "java", "duration": 60}\n', csv_format=False)
    assert not trace.origin_given and trace.origin == DEFAULT_ORIGIN
    assert DEFAULT_ORIGIN.weekday() == 0 and DEFAULT_ORIGIN.hour == 0
    # The standard trace keeps its meaning: its hour 14 is 14:00.
    assert (trace.origin + timedelta(seconds=trace.jobs[0].at)).hour == 14
    assert trace.start == DEFAULT_ORIGIN.timestamp()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_an_origin_line_is_written_and_read_back(tmp_path: Path, suffix: str) -> None:
    origin = datetime(2026, 1, 5, tzinfo=BERLIN)  # a Monday, 00:00 in Berlin
    jobs = [TraceJob(9 * H, "java", "build", "api", 120.0)]
    path = tmp_path / f"trace{suffix}"
    write_trace(jobs, path, origin=origin)
    trace = read_trace(path)
    assert trace.origin_given and trace.origin == origin and trace.jobs == jobs
    assert (trace.origin + timedelta(seconds=trace.jobs[0].at)).astimezone(BERLIN).hour == 9


def test_iso_times_give_the_origin_and_an_origin_line_moves_time_zero() -> None:
    rows = [
        '{"at": "2026-01-06T09:00:00+01:00", "profile": "java", "duration": 60}',
        '{"at": "2026-01-06T08:30:00Z", "profile": "java", "duration": 60}',
    ]
    trace = parse_trace_file("\n".join(rows), csv_format=False)
    assert trace.origin == datetime(2026, 1, 6, 8, 0, tzinfo=UTC)
    assert [job.at for job in trace.jobs] == [0.0, 1800.0]
    moved = parse_trace_file("# origin: 2026-01-06T00:00:00Z\n" + "\n".join(rows), csv_format=False)
    assert [job.at for job in moved.jobs] == [8 * H, 8.5 * H]
    with pytest.raises(TraceError, match="before the origin"):
        parse_trace_file("# origin: 2026-01-07T00:00:00Z\n" + "\n".join(rows), csv_format=False)


def test_a_bad_origin_line_is_one_clear_sentence() -> None:
    with pytest.raises(TraceError, match=r"line 1: the origin must be an ISO 8601 time, not 'monday'"):
        parse_trace_file('# origin: monday\n{"at": 1, "profile": "java", "duration": 60}', csv_format=False)


def _office_weeks(origin_zone: ZoneInfo = BERLIN) -> tuple[list[TraceJob], datetime]:
    """Two weeks: Monday to Friday one job every two minutes from 09:00 to 17:00 local time, a job every
    two hours at night, one an hour at weekends from 10:00 to 16:00."""
    origin = datetime(2026, 1, 5, tzinfo=origin_zone)
    jobs = []
    for day in range(14):
        base = day * 24 * H
        if day % 7 < 5:
            jobs += [TraceJob(base + 9 * H + k * 120, "java", "build", "api", 60.0) for k in range(240)]
            jobs += [TraceJob(base + hour * H, "java", "build", "api", 60.0) for hour in (0, 2, 4, 6, 20, 22)]
        else:
            jobs += [TraceJob(base + hour * H, "java", "build", "api", 60.0) for hour in range(10, 16)]
    return sorted(jobs, key=lambda job: job.at), origin


def test_the_demand_analysis_finds_the_office_hours_of_a_crafted_fortnight() -> None:
    jobs, origin = _office_weeks()
    demand = analyse(jobs, origin, "Europe/Berlin")
    assert demand.weekly
    kinds = {kind.name: kind for kind in demand.kinds}
    assert kinds["working days"].days == (0, 1, 2, 3, 4) and kinds["quiet days"].days == (5, 6)
    assert kinds["quiet days"].busy_hours == ()
    # 09:00 to 16:59 are busy, 08:00 is the hour of warming up before; demand falls from 15:00.
    assert demand.periods == ["* 8-16 * * mon-fri"]
    assert demand.rising_periods == ["* 8-14 * * mon-fri"]
    # Read in UTC (Berlin is UTC+1 in January) the same hours are an hour earlier.
    assert analyse(jobs, origin, "UTC").periods == ["* 7-15 * * mon-fri"]


def test_less_than_a_week_of_history_takes_every_day_to_be_alike() -> None:
    jobs, origin = _office_weeks()
    demand = analyse([job for job in jobs if job.at < 24 * H], origin, "Europe/Berlin")
    assert not demand.weekly and demand.periods == ["* 8-16 * * mon-sun"]


def test_the_warm_pool_is_sized_from_the_jobs_arriving_within_a_refill_window() -> None:
    burst = [TraceJob(10 * H, "java", "build", "api", 60.0) for _ in range(10)]
    singles = [TraceJob(10 * H + k * 600.0, "java", "build", "api", 60.0) for k in range(1, 11)]
    other_fingerprint = [TraceJob(10 * H + 1, "java", "test", "api", 60.0) for _ in range(5)]
    demand = analyse(sorted(burst + singles + other_fingerprint, key=lambda j: j.at), DEFAULT_ORIGIN)
    # The tenth job of the burst found nine of its fingerprint before it; the other environment's
    # jobs are another fingerprint (their own pods) and count apart.
    assert demand.warm_pods(1.0) == 10
    assert demand.warm_pods(0.4) == 1


def test_the_proposed_schedules_pass_the_products_validator() -> None:
    jobs, origin = _office_weeks()
    week = generate(WorkloadSpec(jobs=3000, days=7, week=WeekShape()), seed=2)
    demands = [analyse(jobs, origin, "Europe/Berlin")]
    demands += [analyse([j for j in week if j.profile == p], DEFAULT_ORIGIN) for p in ("java", "go")]
    for demand in demands:
        proposals = propose(demand, quantiles=(0.0, 0.5), busy_idle_timeouts=("30m", "60m"))
        assert len(proposals) >= 2
        for proposal in proposals:
            properties = proposal.properties()
            values, problems = check_elastic_properties({"Image": "agents/java:1", **properties})
            assert problems == []
            schedule = parse_schedule(properties["ReuseSchedule"])
            assert [entry.periods for entry in schedule.entries] == [
                tuple(entry["periods"]) for entry in json.loads(properties["ReuseSchedule"])
            ]
            assert values["ReuseSchedule"] == schedule


def _office_day() -> list[TraceJob]:
    """One Monday: from 08:00 to 17:00 a pipeline fans out six jobs every 14 minutes (longer than a
    10-minute idle timeout keeps pods), then three lone jobs in the evening, an hour apart."""
    jobs = []
    at = 8 * H
    while at < 17 * H:
        jobs += [TraceJob(at, "java", "build", "api", 60.0) for _ in range(6)]
        at += 14 * 60
    jobs += [TraceJob(18.5 * H + k * H, "java", "build", "api", 60.0) for k in range(3)]
    return jobs


def test_a_schedule_waits_like_the_long_flat_setting_for_less_idle_and_far_less_than_the_short_one() -> None:
    jobs = _office_day()
    demand = analyse(jobs, DEFAULT_ORIGIN)
    proposals = propose(demand, quantiles=(0.0,), busy_idle_timeouts=("30m",), plain_idle_timeouts=("2m",))
    settings = SimSettings(start=DEFAULT_ORIGIN.timestamp())
    # A mean of a quarter of one pod per job's (26 s): a burst's six jobs wait for the assignment tick
    # and then each for a kept pod's next poll, up to 10 s apart once a pod has been idle for a while
    # (GoCD's agent back-off), 5.8 s on average; a fifth would be out of reach.
    advice = advise_profile(
        ProfileRequest(
            "java", jobs, settings, ("10m", "20m"), (0,), 0.25, 10.0, schedules=proposals, demand=demand
        )
    )  # fmt: skip
    short, long, scheduled = advice.candidates
    assert scheduled.schedule is not None
    # Every burst boots its pods with the short setting; the long one and the schedule keep them.
    assert short.result.wait_p95 > 20.0 >= scheduled.result.wait_p95 + 10.0
    assert scheduled.result.wait_p95 <= long.result.wait_p95
    # The schedule lets the pods go at once in the evening, when the long setting keeps each for 20m.
    assert scheduled.result.idle_pod_s_per_job < long.result.idle_pod_s_per_job
    assert scheduled.result.waited_past_resend == 0
    assert advice.recommended is scheduled and advice.best_flat is long and advice.met_target
    text = render(advice, 0.25)
    assert "best single setting: IdleTimeout=20m MinIdlePods=0" in text
    assert "ReuseSchedule: [{" in text


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--timezone", "Mars/Olympus", "--timezone: 'Mars/Olympus' is not an IANA time zone"),
        ("--warm-quantiles", "0.5,2", "--warm-quantiles: '2' is not a share from 0 to 1"),
        ("--busy-idle-timeouts", "soon", "--busy-idle-timeouts: 'soon' is not a duration"),
        ("--pending-pods", "0", "--pending-pods: '0' is not a whole number of at least 1"),
    ],
)
def test_a_bad_advise_option_is_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    from elastic_agent.cli import main

    path = tmp_path / "trace.jsonl"
    write_trace(_office_day(), path)
    assert main(["advise", str(path), option, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


def test_advise_recommends_the_schedule_with_the_clock_at_the_traces_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from elastic_agent.cli import main

    # The office day's bursts, with time 0 at noon in Berlin: they fall from 20:00 to 05:00 there. The
    # periods are proposed from those absolute times, and the simulator's clock must start at the
    # origin for them to fall on the bursts (at any other start the schedule would miss them).
    path = tmp_path / "office.csv"
    write_trace(_office_day(), path, origin=datetime(2026, 1, 5, 12, tzinfo=BERLIN))
    argv = ["advise", str(path), "--idle-timeouts", "10m,20m", "--min-idle", "0", "--warm-quantiles", "0"]
    argv += ["--busy-idle-timeouts", "30m", "--plain-idle-timeouts", "2m", "--timezone", "Europe/Berlin"]
    assert main([*argv, "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "time 0 is 2026-01-05T12:00:00+01:00" in text
    assert "Recommended: schedule: busy IdleTimeout=30m" in text
    assert '"periods": ["* 0-4,19-23 * * mon-sun"], "timezone": "Europe/Berlin"' in text
