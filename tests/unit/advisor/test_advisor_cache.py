"""The advisor's cache of runs (elastic_agent/advisor/cache.py): a run made again on the same jobs, policy,
settings and code comes from disk with the same figures; any of the four changed is a miss; an entry that
cannot be read is made again, never a crash; and the entries are written whole or not at all."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import elastic_agent
from elastic_agent.advisor.cache import MISSING, RunCache, code_version, default_directory
from elastic_agent.advisor.runner import Runner
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob

MADE: list[str] = []


def _made(run: Any) -> PolicyResult:
    jobs, policy, _ = run
    MADE.append(policy.name)
    n = len(jobs)
    return PolicyResult(
        policy.name, n, n, n, n, 1.5, 1.0, 2.0, 3.0, 4.0, 0, 10.0, 20.0, 30.0, 1, 0, 5.0, 0.1, 7, 8, 9
    )


JOBS = [TraceJob(float(k), "java", None, "p", 60.0) for k in range(5)]
POLICY = Policy("IdleTimeout=5m", {"Reuse": "true", "IdleTimeout": "5m"})
SETTINGS = SimSettings(seed=1)


def _run(runner: Runner, run: Any = (JOBS, POLICY, SETTINGS)) -> PolicyResult:
    result: PolicyResult = runner.submit(_made, run).result()
    return result


def test_a_run_made_again_comes_from_the_cache_with_the_same_figures(tmp_path: Path) -> None:
    MADE.clear()
    first = _run(Runner(1, cache=RunCache(tmp_path)))
    cache = RunCache(tmp_path)
    again = _run(Runner(1, cache=cache))
    assert again == first and MADE == ["IdleTimeout=5m"]
    assert (cache.hits, cache.misses) == (1, 0)
    assert cache.said() == f"advise: 1 of 1 simulations came from the cache in {tmp_path}"


@pytest.mark.parametrize(
    "changed",
    [
        (JOBS[:4], POLICY, SETTINGS),
        ([*JOBS[:4], dataclasses.replace(JOBS[4], duration=61.0)], POLICY, SETTINGS),
        (JOBS, Policy("IdleTimeout=5m", {"Reuse": "true", "IdleTimeout": "10m"}), SETTINGS),
        (JOBS, POLICY, SimSettings(seed=2)),
        (JOBS, POLICY, dataclasses.replace(SETTINGS, scheduler_s=1.0)),
    ],
    ids=["fewer jobs", "a job's duration", "the policy", "the seed", "the assignment tick"],
)
def test_a_changed_trace_policy_or_setting_is_a_miss(tmp_path: Path, changed: Any) -> None:
    MADE.clear()
    _run(Runner(1, cache=RunCache(tmp_path)))
    cache = RunCache(tmp_path)
    _run(Runner(1, cache=cache), changed)
    assert (cache.hits, cache.misses) == (0, 1) and len(MADE) == 2


def test_another_version_of_the_code_is_a_miss(tmp_path: Path) -> None:
    run = (JOBS, POLICY, SETTINGS)
    assert RunCache(tmp_path, "0.1.0+aaaa").key(_made, run) != RunCache(tmp_path, "0.1.0+bbbb").key(
        _made, run
    )
    assert RunCache(tmp_path).key(_made, run) == RunCache(tmp_path).key(_made, run)
    assert code_version().startswith(f"{elastic_agent.__version__}+")


def test_a_corrupt_entry_is_made_again_and_written_anew(tmp_path: Path) -> None:
    MADE.clear()
    first = _run(Runner(1, cache=RunCache(tmp_path)))
    (entry,) = tmp_path.rglob("*.pickle")
    for garbage in (b"", b"not a pickle", entry.read_bytes()[:20]):
        entry.write_bytes(garbage)
        cache = RunCache(tmp_path)
        assert _run(Runner(1, cache=cache)) == first
        assert (cache.hits, cache.misses) == (0, 1)
    assert len(MADE) == 4
    cache = RunCache(tmp_path)
    assert cache.get(entry.stem) == first, "written anew"


def test_an_entry_under_another_key_is_not_taken(tmp_path: Path) -> None:
    cache = RunCache(tmp_path)
    cache.put("ab" + "0" * 62, "figures")
    (entry,) = tmp_path.rglob("*.pickle")
    entry.rename(entry.with_name("ab" + "1" * 62 + ".pickle"))
    assert cache.get("ab" + "1" * 62) is MISSING


def test_entries_are_renamed_into_place_and_a_directory_that_cannot_be_written_only_keeps_none(
    tmp_path: Path,
) -> None:
    _run(Runner(1, cache=RunCache(tmp_path / "cache")))
    assert [p.suffix for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [".pickle"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    cache = RunCache(blocked)
    assert _run(Runner(1, cache=cache)).policy == "IdleTimeout=5m"
    assert (cache.hits, cache.misses) == (0, 1)


def test_a_run_whose_policy_holds_an_objects_address_is_not_kept(tmp_path: Path) -> None:
    policy = Policy("odd", plugin=lambda world: world)  # type: ignore[arg-type,return-value]
    assert RunCache(tmp_path).key(_made, (JOBS, policy, SETTINGS)) is None


def test_the_cache_is_under_xdg_cache_home_unless_the_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOCD_REUSE_ADVISOR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_directory() == tmp_path / "gocd-reuse-advisor"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_directory() == Path.home() / ".cache" / "gocd-reuse-advisor"
    monkeypatch.setenv("GOCD_REUSE_ADVISOR_CACHE", str(tmp_path / "here"))
    assert default_directory() == tmp_path / "here"
    monkeypatch.setenv("GOCD_REUSE_ADVISOR_CACHE", "off")
    assert default_directory() is None
