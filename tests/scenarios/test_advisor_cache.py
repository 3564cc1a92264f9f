"""`advise` with its cache of runs (elastic_agent/advisor/cache.py): run again on the same trace, every
simulation comes from the cache and the report and its JSON are the same bytes; `--no-cache` writes
nothing anywhere, and says nothing of a cache."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from elastic_agent.advisor.command import add_arguments, run
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.workload import DEFAULT_ORIGIN, write_trace


def _advise(trace: Path, json_path: Path, *options: str) -> int:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = [
        str(trace),
        "--idle-timeouts",
        "2m,10m",
        "--min-idle",
        "0,1",
        "--no-schedules",
        "--learn-days",
        "0",
    ]
    return run(parser.parse_args([*argv, "--workers", "1", "--quiet", "--json", str(json_path), *options]))


def test_advising_again_takes_every_run_from_the_cache_and_prints_the_same_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "day.jsonl"
    day = generate_pipelines(PipelineSpec(days=0.6, commit_pipelines=6, commits_per_hour=3.0), seed=2)
    write_trace(day[:300], trace, origin=DEFAULT_ORIGIN)
    cache = tmp_path / "cache"
    assert _advise(trace, tmp_path / "cold.json", "--cache-dir", str(cache)) == 0
    cold = capsys.readouterr()
    assert _advise(trace, tmp_path / "warm.json", "--cache-dir", str(cache)) == 0
    warm = capsys.readouterr()
    assert warm.out == cold.out
    assert (tmp_path / "warm.json").read_bytes() == (tmp_path / "cold.json").read_bytes()
    made = next(line for line in cold.err.splitlines() if "from the cache" in line)
    runs = int(made.split(" of ")[1].split()[0])
    assert made == f"advise: 0 of {runs} simulations came from the cache in {cache}"
    assert f"advise: {runs} of {runs} simulations came from the cache in {cache}" in warm.err

    monkeypatch.delenv("GOCD_REUSE_ADVISOR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _advise(trace, tmp_path / "none.json", "--no-cache") == 0
    uncached = capsys.readouterr()
    assert uncached.out == cold.out and "cache" not in uncached.err
    assert (tmp_path / "none.json").read_bytes() == (tmp_path / "cold.json").read_bytes()
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()
