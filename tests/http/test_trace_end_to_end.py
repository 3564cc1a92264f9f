"""`trace` end to end: a fake GoCD server that answers over HTTP as gocd/gocd's source says
(tests/support/doubles/gocd_rest) serves a pipeline-shaped history with the cases a trace must get
right (run instances, a stage re-run with a copied job, a rescheduled job, cancelled runs, runs still
going, a static job, a template, a group only administrators see); `trace` reads it, and the trace holds
every elastic job run of the window with its wait and duration, checked against the server's own ground
truth, not against its answers; `advise` then runs on what it wrote and covers every profile."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.service import trace_command
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from tests.support.doubles.gocd_rest import Faults, ServedGoCD, World, serve, world_from_trace
from tests.support.doubles.gocd_rest.server import PROXY_STATUSES

ORIGIN = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday


@pytest.fixture(scope="module")
def world() -> World:
    jobs = generate_pipelines(PipelineSpec(days=2, commits_per_hour=3), seed=3)
    return world_from_trace(jobs, origin=ORIGIN, seed=3)


@pytest.fixture
def gocd(world: World) -> Iterator[ServedGoCD]:
    with serve(world) as served:
        yield served


def trace(gocd: ServedGoCD, world: World, output: Path, user: str, *options: str) -> tuple[int, str, str]:
    token = output.parent / f"{user}-token"
    token.write_text(gocd.tokens[user] + "\n")
    parser = argparse.ArgumentParser()
    trace_command.add_arguments(parser)
    args = parser.parse_args(["--server", gocd.url, "--token-file", str(token), "-o", str(output), *options])
    out, err = StringIO(), StringIO()
    status = trace_command.run(args, out=out, err=err, clock=ManualClock(world.now_ms / 1000))
    return status, out.getvalue(), err.getvalue()


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if not line.startswith("#")]


def expected_rows(
    world: World, *, since_ms: int, hidden: frozenset[str] = frozenset()
) -> list[tuple[Any, ...]]:
    """Every job instance that ran on an elastic agent since `since_ms`, from the server's ground truth:
    (identifier, at, profile, environment, waited, duration, result)."""
    rows = []
    for record in world.truth():
        if record.kind != "ran" or record.profile is None or record.scheduled_ms < since_ms:
            continue
        if record.pipeline in hidden:
            continue
        assert record.assigned_ms is not None and record.completed_ms is not None
        rows.append(
            (
                (record.pipeline, record.pipeline_counter, record.stage, record.stage_counter, record.job),
                datetime.fromtimestamp(record.scheduled_ms / 1000, UTC).isoformat(timespec="milliseconds")[
                    :-6
                ]
                + "Z",
                record.profile,
                record.environment or "",
                round((record.assigned_ms - record.scheduled_ms) / 1000, 3),
                round((record.completed_ms - record.assigned_ms) / 1000, 3),
                "Passed" if record.result == "Passed" else "Failed",
            )
        )
    return sorted(rows)


def written_rows(path: Path) -> list[tuple[Any, ...]]:
    return sorted(
        (
            (row["pipeline"], row["pipeline_counter"], row["stage"], row["stage_counter"], row["job"]),
            row["at"], row["profile"], row["environment"], row["waited"], row["duration"], row["result"],
        )
        for row in rows_of(path)
    )  # fmt: skip


def test_trace_writes_every_elastic_run_of_the_served_history_with_its_wait_and_duration(
    gocd: ServedGoCD, world: World, tmp_path: Path
) -> None:
    output = tmp_path / "trace.jsonl"

    status, out, err = trace(gocd, world, output, "admin", "--since", ORIGIN.isoformat())

    assert status == 0, err
    assert written_rows(output) == expected_rows(world, since_ms=int(ORIGIN.timestamp() * 1000))
    # Every instance of a run_instance_count job is a row of its own, the re-run job too, the copy not.
    jobs = {(row["pipeline"], row["stage_counter"], row["job"]) for row in rows_of(output)}
    assert {("extra-multi", 1, f"shard-runInstance-{i}") for i in (1, 2, 3)} <= jobs
    assert ("extra-rerun", 2, "lint") in jobs and ("extra-rerun", 2, "unit") not in jobs
    assert "Left out: 1 job run copied into a re-run of their stage" in out
    assert "Left out: 1 job run never got an agent (cancelled while waiting)." in out
    # One stage instance per stage run read, never more.
    assert gocd.calls["stage_instance"] == len({row[0][:4] for row in written_rows(output)}) + 1  # + copy's
    assert gocd.calls["job_history"] == 0 and gocd.calls["job_instance"] == 0


def test_a_second_read_extends_the_trace_with_no_duplicate_and_reads_only_new_stage_runs(
    tmp_path: Path,
) -> None:
    # The same installation read at two times: first a day in (runs going then are cut there, as GoCD
    # would show them), then at the end. Without the extras, which are placed relative to `now`.
    early = datetime.fromtimestamp(ORIGIN.timestamp() + 86400, UTC)
    jobs = generate_pipelines(PipelineSpec(days=2, commits_per_hour=3), seed=3)
    first_world = world_from_trace(jobs, origin=ORIGIN, seed=3, now=early, extras=False)
    world = world_from_trace(jobs, origin=ORIGIN, seed=3, extras=False)
    output = tmp_path / "trace.jsonl"
    since = ORIGIN.isoformat()
    with serve(first_world) as first:
        assert trace(first, first_world, output, "admin", "--since", since)[0] == 0
        first_url = first.url
    first_rows = len(rows_of(output))
    with serve(world) as later:
        # The same server a day later (the double listens on another port each time).
        state = output.with_name(output.name + ".state.json")
        state.write_text(state.read_text().replace(first_url, later.url, 1))
        status, out, err = trace(later, world, output, "admin")
        instances = later.calls["stage_instance"]

    assert status == 0, err
    assert written_rows(output) == expected_rows(world, since_ms=int(ORIGIN.timestamp() * 1000))
    new = len(rows_of(output)) - first_rows
    assert f"Summary: {new} new job run" in out
    all_runs = len({row[0][:4] for row in written_rows(output)})
    assert instances < all_runs / 2  # the first day's stage runs are not read again


def test_retries_get_through_a_proxy_that_refuses_a_tenth_of_the_calls(world: World, tmp_path: Path) -> None:
    output = tmp_path / "trace.jsonl"
    with serve(world, faults=Faults(fraction=0.1, retry_after_s=0, seed=5)) as gocd:
        status, out, err = trace(gocd, world, output, "admin", "--since", ORIGIN.isoformat())
        refused = sum(count for (_, code), count in gocd.answers.items() if code in PROXY_STATUSES)

    assert status == 0, err
    assert refused > 10
    assert f"; {refused} retries." in out
    assert written_rows(output) == expected_rows(world, since_ms=int(ORIGIN.timestamp() * 1000))


@pytest.mark.slow  # the client's back-off before it gives up on a call: about 15 s
def test_a_read_whose_gocd_goes_down_behind_a_proxy_part_way_keeps_what_it_read_and_the_next_run_completes_it(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "trace.jsonl"
    since = ORIGIN.isoformat()
    gone = Faults(statuses=(502,), endpoints=frozenset({"stage_instance"}), down_after=40)
    with serve(world, faults=gone) as gocd:
        status, _, err = trace(gocd, world, output, "admin", "--since", since)
        first_url = gocd.url

    assert status == 3, err
    [error] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "a proxy or gateway in front of GoCD answered GET" in error and "with 502 (Bad Gateway)" in error
    assert "GoCD server's log" not in err
    kept = written_rows(output)
    everything = expected_rows(world, since_ms=int(ORIGIN.timestamp() * 1000))
    assert kept and set(kept) < set(everything)  # what the 40 stage runs read held, and nothing else
    assert f"{output} holds {len(kept)} job runs" in err

    with serve(world) as gocd:
        state = output.with_name(output.name + ".state.json")
        state.write_text(state.read_text().replace(first_url, gocd.url, 1))
        status, _, err = trace(gocd, world, output, "admin")
        again = gocd.calls["stage_instance"]

    assert status == 0, err
    assert written_rows(output) == everything
    assert again < len({row[0][:4] for row in everything})  # the stage runs kept are not read again


def test_a_group_admin_that_sees_no_environment_gets_no_trace_and_exit_1_until_it_says_they_are_in_none(
    gocd: ServedGoCD, world: World, tmp_path: Path
) -> None:
    output = tmp_path / "trace.jsonl"

    status, _, err = trace(gocd, world, output, "ops", "--since", ORIGIN.isoformat())

    assert status == 1, err
    assert "warning: The token's user is not a GoCD system administrator" in err
    # `ops` sees no environment (GoCD lists them to non-admins by role rules only): every run is left
    # out rather than written with a blank environment it may not have, and that is no success.
    assert "in no environment the token may view" in err and not output.exists()
    assert "were left out: their pipelines" in err and "run this again with --assume-no-environment" in err

    status, _, err = trace(
        gocd, world, output, "ops", "--fresh", "--assume-no-environment", "--since", ORIGIN.isoformat()
    )

    assert status == 0, err
    # Everything but the group only administrators see; the runs of extras-env's pipelines are written
    # with no environment, as asked.
    got = {row[0][0] for row in written_rows(output)}
    assert "extra-secret" not in got and got
    want = {row[0][0] for row in expected_rows(world, since_ms=int(ORIGIN.timestamp() * 1000))} - {
        "extra-secret"
    }
    assert got == want


def test_advise_runs_on_the_written_trace_and_covers_its_profiles(
    gocd: ServedGoCD, world: World, tmp_path: Path
) -> None:
    output = tmp_path / "trace.jsonl"
    assert trace(gocd, world, output, "admin", "--since", ORIGIN.isoformat())[0] == 0
    profiles = {row["profile"] for row in rows_of(output)}

    advice = subprocess.run(
        [sys.executable, "-m", "elastic_agent", "advise", str(output), "--no-schedules", "--no-prediction",
         "--idle-timeouts", "10m", "--min-idle", "0", "--quiet", "--learn-days", "0"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip

    assert advice.returncode == 0, advice.stderr
    for profile in profiles:
        assert profile in advice.stdout
