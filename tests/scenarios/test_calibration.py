"""The advisor's pod start-up, calibrated on traces whose truth is known: their waits are those the
simulator gave with a chosen start-up under a chosen policy (tests/support/measured_traces.py), seeded
otherwise than the advisor's runs, as an installation's own waits would be. The calibrated simulation of
the current policy must land within 15 % of the measured mean and p95 wait, and recover the start-up."""

from __future__ import annotations

import pytest

from elastic_agent.advisor.calibration import ASSUMED, CALIBRATED, GIVEN, calibrate
from elastic_agent.advisor.calibration_report import render_calibration
from elastic_agent.advisor.current_policy import CurrentPolicy, GivenPodStart, parse_current
from elastic_agent.simulation.run_settings import PodStart, SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import DEFAULT_ORIGIN, ProfileMix, TraceJob, WorkloadSpec, generate
from tests.support.measured_traces import recorded

TRUE_START_S = 90.0
ORIGIN_S = DEFAULT_ORIGIN.timestamp()  # the traces' time 0: Monday 00:00 UTC
ADVISOR = SimSettings(seed=1, start=ORIGIN_S)  # the advisor's: pods start in 25 s unless calibrated
INSTALLATION = SimSettings(seed=5, boot_median_s=TRUE_START_S, start=ORIGIN_S)


@pytest.fixture(scope="module")
def jobs() -> list[TraceJob]:
    return generate(WorkloadSpec(jobs=2000, days=0.5), seed=2)


@pytest.fixture(scope="module")
def slow_start(jobs: list[TraceJob]) -> list[TraceJob]:
    """The waits of an installation whose pods take 90 s to start, one pod per job."""
    return recorded(jobs, Policy("one pod per job", {"Reuse": "false"}), INSTALLATION)


REUSE = "Reuse=true,IdleTimeout=10m"


@pytest.fixture(scope="module")
def reuse_recorded(jobs: list[TraceJob]) -> list[TraceJob]:
    """The waits of the same installation running this plugin with IdleTimeout 10m."""
    return recorded(jobs, Policy("reuse", parse_current([REUSE]).everywhere), INSTALLATION)


def _within(simulated: float, measured: float, share: float = 0.15) -> bool:
    return abs(simulated - measured) <= share * measured


def test_a_slow_start_installation_is_calibrated_so_the_simulated_current_policy_matches_its_waits(
    slow_start: list[TraceJob],
) -> None:
    calibration = calibrate(slow_start, CurrentPolicy(), ADVISOR)
    assert sorted(calibration.profiles) == ["big-memory", "go", "java", "node"]
    for c in calibration.profiles.values():
        assert c.source == CALIBRATED and c.measured is not None
        assert _within(c.current.wait_mean_s, c.measured.wait_mean_s), c
        assert _within(c.current.wait_p95_s, c.measured.wait_p95_s), c
        assert _within(c.pod_start.median_s, TRUE_START_S), c
        assert not c.differs
    # Every candidate of the advice is simulated with it.
    assert calibration.settings(ADVISOR).pod_start("java") == calibration.profiles["java"].pod_start


def test_the_uncalibrated_simulator_misses_the_slow_start_and_the_report_says_what_that_means(
    slow_start: list[TraceJob],
) -> None:
    calibration = calibrate(slow_start, CurrentPolicy(), ADVISOR, given=GivenPodStart(25.0))
    java = calibration.profiles["java"]
    assert java.source == GIVEN and java.pod_start.median_s == 25.0
    assert java.measured is not None and java.current.wait_mean_s < 0.5 * java.measured.wait_mean_s
    assert java.differs
    text = render_calibration(calibration)
    assert "java: simulated current waits" in text and "less than measured" in text
    assert "understates every candidate's waits" in text


def test_a_trace_recorded_under_reuse_gives_back_its_pod_start_when_told_the_policy(
    reuse_recorded: list[TraceJob],
) -> None:
    calibration = calibrate(reuse_recorded, parse_current([REUSE]), ADVISOR)
    for c in calibration.profiles.values():
        assert c.source == CALIBRATED and c.measured is not None
        assert _within(c.pod_start.median_s, TRUE_START_S), c
        assert _within(c.current.wait_mean_s, c.measured.wait_mean_s), c
        assert _within(c.current.wait_p95_s, c.measured.wait_p95_s), c


def test_read_as_one_pod_per_job_a_trace_recorded_under_reuse_understates_the_pod_start(
    reuse_recorded: list[TraceJob],
) -> None:
    # Most of its jobs took a warm pod: taken for cold starts, their waits say pods start fast.
    calibration = calibrate(reuse_recorded, CurrentPolicy(), ADVISOR)
    for c in calibration.profiles.values():
        assert c.pod_start.median_s < 0.6 * TRUE_START_S, c


def test_the_start_up_is_calibrated_per_hour_of_day_where_the_trace_has_enough_jobs() -> None:
    # One profile's half day, 250 jobs an hour: its pods start in 40 s, but in 120 s from 06:00 to 12:00
    # (a node autoscaler adding nodes for the morning).
    java_only = (ProfileMix("java", 1.0, 120.0),)
    spec = WorkloadSpec(jobs=3000, days=0.5, daily_amplitude=0.0, profiles=java_only)
    hours = tuple(120.0 if 6 <= hour < 12 else 40.0 for hour in range(24))
    varying = PodStart(40.0, 0.3, (5.0, 600.0), hours)
    installation = SimSettings(seed=5, pod_starts=(("java", varying),), start=ORIGIN_S)
    measured = recorded(generate(spec, seed=4), Policy("one pod per job", {"Reuse": "false"}), installation)
    java = calibrate(measured, CurrentPolicy(), ADVISOR).profiles["java"]
    assert java.hours == tuple(range(12))
    for hour in java.hours:
        assert _within(java.pod_start.by_hour[hour], hours[hour]), (hour, java.pod_start)
    assert java.measured is not None
    assert _within(java.current.wait_mean_s, java.measured.wait_mean_s)
    assert _within(java.current.wait_p95_s, java.measured.wait_p95_s)


def test_without_measured_waits_the_default_start_up_is_assumed_and_the_report_says_so(
    jobs: list[TraceJob],
) -> None:
    calibration = calibrate(jobs[:300], CurrentPolicy(), ADVISOR)
    for c in calibration.profiles.values():
        assert c.source == ASSUMED and c.measured is None and c.pod_start.median_s == 25.0
    text = render_calibration(calibration)
    assert "the trace has no measured waits (`waited`" in text
    assert "pods are assumed to start in about 25 s (sigma 0.30)" in text


def test_each_profiles_pods_start_as_its_own_pod_start_says() -> None:
    jobs = [TraceJob(60.0 * n, profile, None, f"p-{profile}", 30.0) for n in range(20) for profile in "ab"]
    fixed = PodStart(80.0, 0.0, (80.0, 80.0))
    settings = SimSettings(seed=1, boot_median_s=10.0, boot_bounds_s=(10.0, 10.0), pod_starts=(("a", fixed),))
    result = Simulation(jobs, Policy("one pod per job", {"Reuse": "false"}), settings).run_by_profile()
    assert min(result["a"].waits) >= 80.0
    assert max(result["b"].waits) < 80.0 and min(result["b"].waits) >= 10.0
