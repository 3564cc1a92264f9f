"""The pool's record of what reuse did (pool/ledger.py): waits from the first create-agent to the
assignment with an exact mean and a p95 never below the true one, idle time split over the hours it spans,
windows of the last day and week, and memory that stays bounded however long the backend runs."""

from __future__ import annotations

import pytest

from elastic_agent.pool.ledger import HOUR_S, HOURS, MAX_ASKED, MAX_FINGERPRINTS, ReuseLedger

START = 1_700_000_000.0
DAY_S = 24 * HOUR_S


def test_a_jobs_wait_runs_from_its_first_create_agent_to_its_assignment() -> None:
    ledger = ReuseLedger()
    ledger.asked(7, START)
    ledger.asked(7, START + 5)  # GoCD re-sends: the wait started at the first
    ledger.served(7, "v1:fp", START + 12)
    ledger.served(8, "v1:fp", START + 13)  # asked before a restart: served, no wait known
    figures = ledger.figures(START + 20, DAY_S)["v1:fp"]
    assert (figures.served, figures.waits, figures.mean_wait_s) == (2, 1, 12.0)


def test_the_p95_wait_is_never_below_the_true_one_and_at_most_a_tenth_above() -> None:
    ledger = ReuseLedger()
    for n in range(1, 101):  # waits of 1 .. 100 s: the 95th is 95 s
        ledger.asked(n, START)
        ledger.served(n, "v1:fp", START + n)
    figures = ledger.figures(START + 200, DAY_S)["v1:fp"]
    assert figures.p95_wait_s is not None and 95.0 <= figures.p95_wait_s <= 95.0 * 1.1
    assert figures.mean_wait_s == pytest.approx(50.5)


def test_jobs_per_pod_and_idle_time_count_within_the_window_only() -> None:
    ledger = ReuseLedger()
    ledger.started("v1:fp", START)
    for n in range(3):
        ledger.served(n, "v1:fp", START + n)
    ledger.idled("v1:fp", START + 0.5 * HOUR_S, START + 2.5 * HOUR_S)  # over three hours
    week = ledger.figures(START + 3 * DAY_S, 7 * DAY_S)["v1:fp"]
    assert (week.served, week.started, week.jobs_per_pod, week.idle_s) == (3, 1, 3.0, 2 * HOUR_S)
    assert ledger.figures(START + 3 * DAY_S, DAY_S) == {}, "nothing in the last day"
    now = START + 3 * HOUR_S
    with_open = ledger.figures(now, DAY_S, idle_now=[("v1:fp", now - HOUR_S)])["v1:fp"]
    assert with_open.idle_s == 3 * HOUR_S, "a pod idle now counts its idle time so far"


def test_the_records_stay_bounded_however_long_the_backend_runs() -> None:
    ledger = ReuseLedger()
    job = 0
    for hour in range(3 * HOURS):  # three weeks, a new fingerprint every hour, jobs never assigned
        now = START + hour * HOUR_S
        for _ in range(200):
            job += 1
            ledger.asked(job, now)
        ledger.served(-hour, f"v1:fp-{hour % (MAX_FINGERPRINTS + 50)}", now)
        ledger.started("v1:steady", now)
        ledger.idled("v1:steady", now - 2 * HOURS * HOUR_S, now)
    sizes = ledger.sizes()
    assert sizes["ledger_jobs_asked"] == MAX_ASKED
    assert sizes["ledger_fingerprints"] == MAX_FINGERPRINTS
    assert sizes["ledger_hours"] <= MAX_FINGERPRINTS * HOURS
    steady = ledger.figures(START + 3 * HOURS * HOUR_S, 7 * DAY_S)["v1:steady"]
    assert steady.started == HOURS, "a week of hourly pods: older ones are forgotten"
