"""Warnings about ReuseSchedule entries that change nothing or bring a plain value back
(profiles/schedule_warnings.py), as the backend sends them to GoCD and the status page shows them, and
the example of docs/profiles.md held to them."""

from __future__ import annotations

import json
import re
from typing import Any

from elastic_agent.status.pages import render_cluster_status
from profiles.cluster import ClusterProfile
from profiles.quantities import parse_duration
from profiles.schedule import Knobs, parse_schedule
from profiles.schedule_warnings import schedule_warnings
from tests.support.paths import ROOT
from tests.support.stack_helpers import reuse_profile, schedule
from tests.support.virtual_helpers import run_to_idle, virtual_stack

PLAIN = Knobs(min_idle_pods=0, idle_timeout=120.0, max_jobs_per_pod=None)
OFFICE: dict[str, Any] = {"periods": ["* 7-18 * * mon-fri"], "timezone": "Europe/Berlin", "MinIdlePods": 4,
                          "IdleTimeout": "30m"}  # fmt: skip
MONDAY = {"periods": ["* 7-9 * * mon"], "timezone": "Europe/Berlin"}


def warnings(*entries: dict[str, Any], plain: Knobs = PLAIN) -> tuple[str, ...]:
    return schedule_warnings(parse_schedule(json.dumps(list(entries))), plain)


def test_an_entry_with_the_values_of_the_entry_it_overrides_changes_nothing() -> None:
    found = warnings(OFFICE, MONDAY | {"MinIdlePods": 4, "IdleTimeout": "30m"})
    assert found == (
        "entry 2 (* 7-9 * * mon, Europe/Berlin) changes nothing: while it is in force the values are those "
        "that hold without it (MinIdlePods 4, IdleTimeout 30m, MaxJobsPerPod no limit)",
    )


def test_an_entry_that_sets_only_the_plain_values_where_no_other_entry_holds_changes_nothing() -> None:
    weekend = {"periods": ["* * * * sat-sun"], "timezone": "Europe/Berlin", "IdleTimeout": "2m"}
    found = [w.split(":")[0] for w in warnings(OFFICE, weekend)]
    assert found == ["entry 2 (* * * * sat-sun, Europe/Berlin) changes nothing"]
    # Read in another time zone the weekend may meet Berlin's office hours: not compared, not warned about.
    assert warnings(OFFICE, weekend | {"timezone": "America/New_York"}) == ()
    assert warnings({"periods": ["* 22 * * *"]})[0].startswith("entry 1 (* 22 * * *, UTC) changes nothing")


def test_an_entry_that_changes_a_value_is_not_warned_about() -> None:
    assert warnings(OFFICE, MONDAY | {"MinIdlePods": 8, "IdleTimeout": "30m"}) == ()
    # Equal to the entry it overrides where they overlap, but not after 18:59, where the plain 2m would hold.
    assert warnings(OFFICE, OFFICE | {"periods": ["* 9-20 * * mon-fri"]}) == ()
    # Equal to the plain values, but overriding office hours' 30m on Monday mornings.
    assert warnings(OFFICE, MONDAY | {"MinIdlePods": 0, "IdleTimeout": "2m"}) == ()


def test_an_entry_that_leaves_out_a_value_the_entry_it_overrides_sets_is_warned_about() -> None:
    assert warnings(OFFICE, MONDAY | {"MinIdlePods": 8}) == (
        "entry 2 (* 7-9 * * mon, Europe/Berlin) sets no IdleTimeout: where it overrides entry 1, the plain "
        "2m holds, not entry 1's 30m",
    )
    # Periods that never meet (nights and office hours) override nothing.
    nights = {"periods": ["* 0-5 * * mon-fri"], "timezone": "Europe/Berlin", "MinIdlePods": 1}
    assert warnings(OFFICE, nights) == ()


def _documented_example() -> tuple[str, Knobs]:
    page = (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8")
    block = page.split("## Reuse that follows the week", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    header = re.match(r"# elastic profile: (.*), ReuseSchedule=\n", block)
    assert header is not None, "the example names the profile's plain values on its first line"
    values = dict(item.split("=", 1) for item in header.group(1).split(", "))
    plain = Knobs(int(values["MinIdlePods"]), parse_duration(values["IdleTimeout"]), None)
    return block, plain


def test_the_documented_schedule_example_parses_and_each_of_its_entries_changes_something() -> None:
    text, plain = _documented_example()
    parsed = parse_schedule(text)
    assert len(parsed.entries) == 2
    assert schedule_warnings(parsed, plain) == ()
    # Office hours change the plain values; Monday mornings, inside office hours, change office hours'.
    office, monday = (entry.over(plain) for entry in parsed.entries)
    assert office != plain and monday != office
    assert monday.idle_timeout == office.idle_timeout, "Monday mornings keep office hours' IdleTimeout"


def test_a_profile_in_use_with_an_entry_that_changes_nothing_gets_a_health_warning_and_a_status_row() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="2m")
    noop = [OFFICE, MONDAY | {"MinIdlePods": 4, "IdleTimeout": "30m"}]
    profile = reuse_profile(stack, IdleTimeout="2m", ReuseSchedule=json.dumps(noop))
    run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    stack.run_for(70)  # a server-ping
    found = [m for m in stack.gocd.health_messages if "changes nothing" in m.message]
    assert [m.type for m in found] == ["warning"]
    assert "entry 2 (* 7-9 * * mon, Europe/Berlin) changes nothing" in found[0].message
    pool = stack.backend.known_pool(ClusterProfile.from_properties(cluster))
    assert "Warning: entry 2 (* 7-9 * * mon, Europe/Berlin) changes nothing" in render_cluster_status(
        pool, stack.clock
    )


def test_a_profile_whose_every_entry_changes_something_gets_no_schedule_warning() -> None:
    stack = virtual_stack(boot_delay=5)
    cluster = stack.cluster_profile(idle_timeout="2m")
    meant = [OFFICE, MONDAY | {"MinIdlePods": 8, "IdleTimeout": "30m"}]
    profile = reuse_profile(stack, IdleTimeout="2m", ReuseSchedule=json.dumps(meant))
    run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    stack.run_for(70)
    assert not [m for m in stack.gocd.health_messages if "ReuseSchedule" in m.message]
    pool = stack.backend.known_pool(ClusterProfile.from_properties(cluster))
    page = render_cluster_status(pool, stack.clock)
    assert "Reuse schedules" in page and "schedule-warning" not in page
