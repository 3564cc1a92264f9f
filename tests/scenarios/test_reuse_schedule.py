"""ReuseSchedule: reuse values per cron period, evaluated on the injected clock.

First the schedule itself (which entry is in force when, what validation says), then the pool in
virtual time: the reaper, MaxJobsPerPod and the warm pool follow the period in force, a period's start
fills the warm pool at once from banked keys, a restarted backend keeps applying the schedule from the
pods' annotations, and a schedule edit retires no pod. The virtual stack starts on Tuesday 2023-11-14 at
22:13:20 UTC, so the periods below are written around 22:00 to 00:00 UTC of that Tuesday.
"""

from __future__ import annotations

import json
import math
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.pool import labels
from elastic_agent.service.period_timer import PeriodTimer
from elastic_agent.simulation.run_settings import START
from elastic_agent.status.pages import render_cluster_status
from profiles.cluster import ClusterProfile
from profiles.schedule import Knobs, ScheduleError, parse_schedule
from profiles.validation import validate_elastic_profile
from tests.support import browser
from tests.support.doubles.harness import VirtualStack
from tests.support.live_stack import wait_until
from tests.support.stack_helpers import annotation, pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed, run_to_idle, virtual_stack

BERLIN_OFFICE = [{"periods": ["* 7-18 * * mon-fri"], "timezone": "Europe/Berlin", "MinIdlePods": 4,
                  "IdleTimeout": "30m"}]  # fmt: skip
PLAIN = Knobs(min_idle_pods=0, idle_timeout=600.0, max_jobs_per_pod=None)
MIDNIGHT = datetime(2023, 11, 15, tzinfo=UTC).timestamp()  # the end of the stack's Tuesday
ELEVEN_PM = MIDNIGHT - 3600


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def text(entries: list[dict[str, Any]]) -> str:
    return json.dumps(entries)


# ---- which values are in force ----------------------------------------------------------------------


def test_a_period_is_in_force_during_the_minutes_its_cron_matches_in_its_own_time_zone() -> None:
    office = parse_schedule(text(BERLIN_OFFICE))
    assert office.knobs(at("2026-11-30T06:59:59+01:00"), PLAIN) == PLAIN  # Monday, before seven
    assert office.knobs(at("2026-11-30T07:00:00+01:00"), PLAIN) == Knobs(4, 1800.0, None)
    assert office.knobs(at("2026-11-30T18:59:59+01:00"), PLAIN).min_idle_pods == 4
    assert office.knobs(at("2026-11-30T19:00:00+01:00"), PLAIN) == PLAIN
    assert office.knobs(at("2026-12-05T10:00:00+01:00"), PLAIN) == PLAIN  # a Saturday
    # Summer time: seven in Berlin is five UTC, and APScheduler's time zones know it.
    assert office.knobs(at("2026-06-01T05:00:00+00:00"), PLAIN).min_idle_pods == 4
    assert office.knobs(at("2026-06-01T04:59:00+00:00"), PLAIN) == PLAIN


def test_when_periods_overlap_the_last_entry_wins_and_what_it_leaves_unset_keeps_the_plain_value() -> None:
    entries = [
        {"periods": ["* 8-17 * * *"], "MinIdlePods": 3, "IdleTimeout": "1h", "MaxJobsPerPod": 50},
        {"periods": ["* 12 * * *"], "MinIdlePods": 1},
    ]
    overlapping = parse_schedule(text(entries))
    assert overlapping.knobs(at("2026-12-01T11:30:00+00:00"), PLAIN) == Knobs(3, 3600.0, 50)
    assert overlapping.knobs(at("2026-12-01T12:30:00+00:00"), PLAIN) == Knobs(1, 600.0, None)
    assert overlapping.knobs(at("2026-12-01T13:00:00+00:00"), PLAIN) == Knobs(3, 3600.0, 50)


def test_the_next_change_is_the_next_start_outside_periods_and_never_later_than_a_change() -> None:
    office = parse_schedule(text(BERLIN_OFFICE))
    friday_evening = at("2026-12-04T20:00:00+01:00")
    assert office.next_change(friday_evening) == at("2026-12-07T07:00:00+01:00")  # Monday morning
    # Every minute of 7-18 matches: the period cannot end before the next quarter hour.
    assert office.next_change(at("2026-12-07T07:00:10+01:00")) == at("2026-12-07T07:15:00+01:00")
    every_five = parse_schedule(text([{"periods": ["*/5 7-18 * * mon-fri"], "MinIdlePods": 1}]))
    assert every_five.next_change(at("2026-12-07T07:00:10+00:00")) == at("2026-12-07T07:01:00+00:00")
    # Walking the wake-ups over a week in a zone whose hours begin at :45 UTC misses no change.
    kathmandu = {"periods": ["* 9-17 * * mon-fri"], "timezone": "Asia/Kathmandu", "MinIdlePods": 2}
    nepal = parse_schedule(text([kathmandu, {"periods": ["*/20 12 * * *"], "MinIdlePods": 5}]))
    moment, seen = at("2026-12-06T00:00:00+00:00"), []
    while moment < at("2026-12-13T00:00:00+00:00"):
        moment = nepal.next_change(moment) or math.inf
        seen.append(moment)
    minute = at("2026-12-06T00:00:00+00:00")
    changes = []
    while minute < at("2026-12-13T00:00:00+00:00"):
        if nepal.in_force(minute) != nepal.in_force(minute - 60):
            changes.append(minute)
        minute += 60
    assert changes and set(changes) <= set(seen), "every minute the entry in force changes is a wake-up"
    change = office.transition(at("2026-12-07T09:00:00+01:00"))
    assert change == (at("2026-12-07T19:00:00+01:00"), None), "the period ends at seven in the evening"


def test_a_schedule_reads_as_yaml_too_and_keeps_one_canonical_text() -> None:
    block = '- periods: ["* 7-18 * * mon-fri"]\n  timezone: Europe/Berlin\n'
    block += "  MinIdlePods: 4\n  IdleTimeout: 30m\n"
    assert parse_schedule(block) == parse_schedule(text(BERLIN_OFFICE))
    assert parse_schedule(block).text == parse_schedule(parse_schedule(block).text).text


# ---- validation -------------------------------------------------------------------------------------


def problems(props: dict[str, str]) -> dict[str, str]:
    return {p["key"]: p["message"] for p in validate_elastic_profile(props)}


def with_schedule(value: str, **more: str) -> dict[str, str]:
    return {"Image": "gocd/agent:v1", "Reuse": "true", "ReuseSchedule": value, **more}


def test_a_valid_schedule_passes_validation() -> None:
    assert problems(with_schedule(text(BERLIN_OFFICE))) == {}


def test_validation_names_every_bad_entry_with_what_is_wrong_in_it() -> None:
    entries = [
        {"periods": ["* 25 * * *"], "timezone": "Mars/Olympus"},
        {"periods": ["* * * * 1-5"], "MinIdlePods": -2},
        {"periods": ["* * 31 2 *"], "IdleTimeout": "soon", "Colour": "blue"},
        {"periods": ["* 9-17 * * mon-fri"], "MaxJobsPerPod": 3},
    ]
    message = problems(with_schedule(text(entries)))["ReuseSchedule"]
    first, second, third = re.split(r"; (?=entry \d+: )", message)
    assert first.startswith("entry 1: ") and "'25'" in first and "unknown time zone 'Mars/Olympus'" in first
    assert second.startswith("entry 2: ") and "by name (mon-fri)" in second
    assert "must not be negative" in second
    assert third.startswith("entry 3: ") and "never matches" in third and "'soon' is not a duration" in third
    assert "'Colour' is not a schedule setting" in third
    assert "entry 4" not in message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("[]", "no entries"),
        ('"every morning"', "must be a list of entries"),
        ("- periods: [* 7 * * *]", "quote cron expressions"),
        ('[{"periods": ["* 7 * *"]}]', "has 4 fields"),
        ('[{"MinIdlePods": 2}]', "periods must be a list"),
        ('[{"periods": ["0 7 * * *"], "MaxJobsPerPod": 0}]', "MaxJobsPerPod 0 is out of range"),
        ('[{"periods": ["0 7 * * *"], "MinIdlePods": true}]', "must be a number or text"),
    ],
)
def test_a_bad_schedule_gets_a_sentence_on_its_key(value: str, fragment: str) -> None:
    assert fragment in problems(with_schedule(value))["ReuseSchedule"]


def test_a_schedule_needs_reuse() -> None:
    assert "set Reuse to true" in problems(with_schedule(text(BERLIN_OFFICE), Reuse="false"))["ReuseSchedule"]


def test_a_schedule_error_keeps_each_entry_separate() -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(text([{"periods": ["x"]}, {"periods": ["y"]}]))
    assert [problem[:8] for problem in raised.value.problems] == ["entry 1:", "entry 2:"]


# ---- the pool follows the period in force (virtual time) --------------------------------------------

LATE_EVENING = [{"periods": ["* 22-23 * * tue"], "timezone": "UTC", "IdleTimeout": "3h"}]


def test_the_reaper_keeps_idle_pods_for_the_periods_idle_timeout_and_applies_the_plain_one_after_it() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="2m")
    profile = reuse_profile(stack, IdleTimeout="2m", ReuseSchedule=text(LATE_EVENING))
    pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    stack.run_for(MIDNIGHT - 60 - stack.clock.now())
    assert pod in pod_names(stack), "kept past the plain 2m while the evening's 3h holds"
    stack.run_until(lambda: pod not in pod_names(stack), 5 * 60, "the pod to retire after the period ends")
    assert stack.clock.now() < MIDNIGHT + 3 * 60


def test_without_the_schedule_the_same_pod_retires_at_the_plain_idle_timeout() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="2m")
    pod = run_to_idle(stack, schedule(stack, reuse_profile(stack, IdleTimeout="2m"), cluster=cluster))
    stack.run_until(lambda: pod not in pod_names(stack), 10 * 60, "the pod to retire at 2m")


def test_max_jobs_per_pod_follows_the_period_in_force() -> None:
    stack = virtual_stack(boot_delay=5)
    one_job = [{"periods": ["* 22 * * tue"], "MaxJobsPerPod": 1}]
    profile = reuse_profile(stack, ReuseSchedule=text(one_job))
    first = completed(stack, schedule(stack, profile, name="first"))
    assert annotation(stack, first.agent_id or "", labels.ANN_STATE) in ("retiring", None), (
        "retired at its job-completion, not at the next ping"
    )
    stack.run_until(lambda: first.agent_id not in pod_names(stack), 300, "the one-job pod to go")
    stack.run_for(ELEVEN_PM + 60 - stack.clock.now())  # 23:01: no period, no limit
    second = run_to_idle(stack, schedule(stack, profile, name="second"))
    third = completed(stack, schedule(stack, profile, name="third"))
    assert third.agent_id == second, "reused outside the period"


def _warm_pool_at_eleven() -> tuple[VirtualStack, dict[str, str], str]:
    """A stack at 23:00:00 whose 23:00 period wants 3 idle pods, with keys banked since 22:45."""
    # Agents poll slowly, so create-agent reaches the backend before the idle pod takes the job, and its
    # unused key is banked (the schedule wants warm pods in some period, so keys are kept).
    stack = virtual_stack(boot_delay=5, get_work_delay_s=30, get_work_interval_s=30)
    cluster = stack.cluster_profile(idle_timeout="1h")
    warm = [{"periods": ["* 23 * * tue"], "MinIdlePods": 3}]
    profile = reuse_profile(stack, ReuseSchedule=text(warm))
    # 22:45: a key is used for 20 minutes (30 less the 10 to register) after GoCD issued it, up to 110 s
    # before its create-agent came (GoCD's queue)
    stack.run_for(ELEVEN_PM - 15 * 60 - stack.clock.now())
    pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster, name="first"))
    for n in range(3):
        completed(stack, schedule(stack, profile, cluster=cluster, name=f"served-{n}"))
    assert len(stack.backend.keys) >= 2, "the served jobs' keys are banked"
    assert pod_names(stack) == {pod}, "no warm pod before the period"
    assert stack.backend.next_period_change() == ELEVEN_PM
    stack.run_for(ELEVEN_PM - stack.clock.now())
    return stack, cluster, pod


def _cluster_page(stack: VirtualStack, cluster: dict[str, str]) -> str:
    pool = stack.backend.known_pool(ClusterProfile.from_properties(cluster))
    return render_cluster_status(pool, stack.clock)


def test_a_period_that_starts_fills_the_warm_pool_at_once_from_banked_keys() -> None:
    stack, cluster, pod = _warm_pool_at_eleven()
    created = pod_names(stack) - {pod}
    assert created, "the period's start created warm pods"
    stamps = {float(annotation(stack, name, labels.ANN_CREATED_AT) or 0) for name in created}
    assert stamps == {ELEVEN_PM}, "at 23:00:00 exactly: not at a ping (pings come at 20 s past)"
    page = _cluster_page(stack, cluster)
    assert "Reuse schedules" in page and "entry 1 (* 23 * * tue, UTC)" in page
    assert "MinIdlePods 3" in page and "2023-11-15 00:00:00 UTC (in 60m), to the plain values" in page


@pytest.mark.browser
def test_the_schedule_table_renders_in_headless_chromium(tmp_path: Path) -> None:
    stack, cluster, _ = _warm_pool_at_eleven()
    document = browser.html_page("Cluster status", _cluster_page(stack, cluster))
    rendered = browser.render_all({"schedule": document}, tmp_path)["schedule"]
    rows = re.findall(r'<tr data-schedule="[^"]*" data-wanted="(\d+)" data-ready="(-?\d+)" data-keys="(\d+)"',
                      rendered.dom)  # fmt: skip
    assert len(rows) == 1, "one scheduled profile, one row, as the browser built it"
    wanted, ready, keys = (int(n) for n in rows[0])
    assert (wanted, ready, keys) == (3, 3, len(stack.backend.keys))
    assert "Period in force" in rendered.dom and "entry 1 (* 23 * * tue, UTC)" in rendered.dom
    assert rendered.screenshot.stat().st_size > 10_000


def test_a_restarted_backend_applies_the_schedule_from_the_pods_annotation() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="2m")
    profile = reuse_profile(stack, IdleTimeout="2m", ReuseSchedule=text(LATE_EVENING))
    pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    assert annotation(stack, pod, labels.ANN_SCHEDULE) == parse_schedule(text(LATE_EVENING)).text
    stack.settle()
    stack.restart_backend()  # memory gone: the next ping finds the pod and only its annotations
    stack.run_for(30 * 60)
    assert pod in pod_names(stack), "the restarted backend kept the pod for the period's 3h"


def test_a_schedule_edit_keeps_the_fingerprint_so_the_idle_pod_takes_the_next_job() -> None:
    stack = virtual_stack(boot_delay=5)
    before = reuse_profile(stack, ReuseSchedule=text(LATE_EVENING))
    pod = run_to_idle(stack, schedule(stack, before, name="before"))
    edited = reuse_profile(stack, ReuseSchedule=text([{**LATE_EVENING[0], "IdleTimeout": "1h"}]))
    after = completed(stack, schedule(stack, edited, name="after"))
    assert after.agent_id == pod, "the same pod: a schedule edit is not a profile change"


# ---- the production timer ---------------------------------------------------------------------------


class _Backend:
    """Two period starts, then none; records when it was asked to fill the warm pools."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.starts = [START + 30, START + 90]
        self.filled: list[float] = []

    def next_period_change(self) -> float | None:
        return self.starts[0] if self.starts else None

    def on_period_change(self) -> None:
        self.filled.append(self.clock.now())
        self.starts.pop(0)


def test_the_period_timer_fills_the_warm_pools_when_each_period_starts() -> None:
    clock = ManualClock(START)  # its sleep() moves time: the thread runs through the minutes at once
    backend = _Backend(clock)
    stopping = threading.Event()
    PeriodTimer(backend, stopping).start()  # type: ignore[arg-type]
    wait_until(lambda: len(backend.filled) == 2, 10, "both period starts")
    stopping.set()
    assert backend.filled == [START + 30, START + 90]
