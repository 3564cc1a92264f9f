"""The search packs the cores (advise.py, whole_trace.py): every candidate it could ask for is started before
it asks for any, the longest runs first, and those it did not ask for are dropped; what it recommends,
runs and skips is what the one-by-one bisection of search.py gives.

The candidates' results are data here (wait falling and idle rising along a row, as the simulator gives
them), handed out by a runner that records what was started and what was read.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from elastic_agent.advisor.advise import ProfileRequest, advise_profile, flat_rows, meets
from elastic_agent.advisor.installation import Installation, InstallationFigures, same_everywhere
from elastic_agent.advisor.runner import Runner, Started
from elastic_agent.advisor.search import bisection_order, search_flat
from elastic_agent.advisor.whole_trace import _start_all
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob


def _result(label: str, mean: float, p95: float, idle: float, boot: float) -> PolicyResult:
    jobs = 100
    return PolicyResult(
        label, jobs, jobs, jobs, 10, mean, mean, p95, p95, p95, 0, idle * jobs, boot * jobs, 0.0, 1, 0,
        0.0, 0.0, 0, 0, 0,
    )  # fmt: skip


BASELINE = _result("one pod per job", 30.0, 40.0, 0.0, 25.0)
TIMEOUTS = ("2m", "5m", "10m", "20m", "30m")
# mean, p95, idle, boot per job
FIGURES = {
    "IdleTimeout=2m MinIdlePods=0": (12.0, 30.0, 5.0, 20.0),
    "IdleTimeout=5m MinIdlePods=0": (7.0, 20.0, 12.0, 12.0),
    "IdleTimeout=10m MinIdlePods=0": (5.0, 9.0, 30.0, 6.0),
    "IdleTimeout=20m MinIdlePods=0": (3.0, 8.0, 70.0, 4.0),
    "IdleTimeout=30m MinIdlePods=0": (2.5, 7.5, 95.0, 3.0),
    "IdleTimeout=2m MinIdlePods=1": (5.5, 12.0, 15.0, 15.0),
    "IdleTimeout=5m MinIdlePods=1": (4.0, 9.5, 20.0, 8.0),
    "IdleTimeout=10m MinIdlePods=1": (3.0, 7.0, 40.0, 5.0),
    "IdleTimeout=20m MinIdlePods=1": (2.0, 6.0, 90.0, 3.0),
    "IdleTimeout=30m MinIdlePods=1": (1.5, 5.5, 120.0, 3.0),
    "Predict=true IdleTimeout=2m": (6.0, 14.0, 9.0, 14.0),
}
RESULTS = {label: _result(label, *figures) for label, figures in FIGURES.items()}


class _Held(concurrent.futures.Future[Any]):
    """A run's result, handed out when it is read (and the read recorded)."""

    def __init__(self, label: str, reads: list[str]) -> None:
        super().__init__()
        self._label, self._reads = label, reads

    def result(self, timeout: float | None = None) -> Any:
        if not self.done():
            self._reads.append(self._label)
            self.set_result(RESULTS[self._label])
        return super().result(timeout)


class Recording(Runner):
    """Starts nothing: records each run started (by its policy's name) and each result read."""

    def __init__(self) -> None:
        super().__init__(1)
        self.started: list[str] = []
        self.read: list[str] = []
        self.futures: dict[str, _Held] = {}

    def submit(self, call: Any, run: Any) -> concurrent.futures.Future[Any]:
        label = run[1].name
        self.started.append(label)
        self.futures[label] = _Held(label, self.read)
        return self.futures[label]


def _request(p95: float | None, **changes: Any) -> ProfileRequest:
    request = ProfileRequest(
        "java",
        [TraceJob(0.0, "java", None, "p", 60.0)],
        SimSettings(),
        TIMEOUTS,
        (0, 1),
        target=0.2,
        p95_target=p95,
        baseline=lambda: BASELINE,
        extra=[("Predict=true IdleTimeout=2m", {"Reuse": "true", "Predict": "true", "IdleTimeout": "2m"})],
    )
    return dataclasses.replace(request, **changes)


def _one_by_one(p95: float | None) -> tuple[list[str], dict[str, str]]:
    """What search.py runs and skips asked one batch at a time, each run made when asked for."""
    ran: list[str] = []

    def run(labels: Sequence[str]) -> Mapping[str, PolicyResult]:
        ran.extend(labels)
        return {label: RESULTS[label] for label in labels}

    levels = [lambda r, t=t: meets(r, BASELINE, 0.2, t) for t in ([p95, None] if p95 else [None])]
    outcome = search_flat(flat_rows(TIMEOUTS, (0, 1)), levels, run)
    return ran, outcome.skipped


@pytest.mark.parametrize("p95", [10.0, 1.0, None])
def test_every_candidate_is_started_before_the_search_reads_one_and_it_reads_what_the_bisection_asks(
    p95: float | None,
) -> None:
    runner = Recording()
    advice = advise_profile(_request(p95), runner)
    assert sorted(runner.started) == sorted(RESULTS), "every candidate started, each once"
    ran, skipped = _one_by_one(p95)
    flat_read = [label for label in runner.read if "MinIdlePods" in label]
    assert sorted(flat_read) == sorted(ran), "the candidates read are those the bisection asks for"
    assert advice.skipped == skipped
    assert {c.label for c in advice.candidates} == {*ran, "Predict=true IdleTimeout=2m"}
    dropped = {label for label, future in runner.futures.items() if future.cancelled()}
    assert dropped == set(skipped), "the runs not asked for are dropped, none of them made"


def test_the_packed_advice_is_the_one_by_one_and_the_exhaustive_searchs() -> None:
    packed = advise_profile(_request(10.0), Recording())
    every = advise_profile(_request(10.0, exhaustive=True), Recording())
    assert packed.skipped and not every.skipped
    assert (packed.recommended.label, packed.best_flat.label, packed.verdict) == (
        every.recommended.label,
        every.best_flat.label,
        every.verdict,
    )


def test_the_plan_is_the_others_then_each_rows_middle_first() -> None:
    assert bisection_order(["a", "b", "c", "d", "e"]) == ["c", "b", "e", "a", "d"]
    planned = [label for label, _, _ in _request(10.0).planned()]
    assert planned[0] == "Predict=true IdleTimeout=2m"
    assert planned[1:3] == ["IdleTimeout=10m MinIdlePods=0", "IdleTimeout=10m MinIdlePods=1"]
    assert sorted(planned) == sorted(RESULTS)


def test_whole_installation_runs_start_first_then_the_profiles_with_the_most_jobs() -> None:
    runner = Recording()
    installation = Installation(runner, [], SimSettings())

    def shared_for(profile: str) -> Any:
        def shared(label: str, properties: Mapping[str, str], schedule: object) -> Started:
            return installation.figures(same_everywhere(label, properties, ["go", "java"]), profile)

        return shared

    jobs = [TraceJob(0.0, "java", None, "p", 60.0)]
    requests = {
        "go": _request(10.0, profile="go", jobs=jobs, shared=shared_for("go")),
        "java": _request(10.0, profile="java", jobs=jobs * 3, shared=shared_for("java")),
    }
    _start_all(requests, runner)
    shared = [label for label in runner.started if "MinIdlePods=1" in label or "Predict" in label]
    assert runner.started[: len(shared)] == shared, "the whole installation's runs first"
    assert len(shared) == len(set(shared)) == len(TIMEOUTS) + 1, "each once, however many profiles ask"
    alone = runner.started[len(shared) :]
    assert len(alone) == 2 * len(TIMEOUTS)
    assert runner.started[len(shared)] == "IdleTimeout=10m MinIdlePods=0"  # java's, then go's


def test_an_installation_run_no_profile_asks_for_is_dropped_when_every_profile_has_said_so() -> None:
    runner = Recording()
    installation = Installation(runner, [], SimSettings())
    run = same_everywhere("IdleTimeout=5m MinIdlePods=1", {"MinIdlePods": "1"}, ["go", "java"])
    go, java = installation.figures(run, "go"), installation.figures(run, "java")
    future = runner.futures[run.key]
    go.drop()
    assert not future.cancelled(), "java may still ask"
    java.drop()
    assert future.cancelled()

    asked = same_everywhere("IdleTimeout=2m MinIdlePods=1", {"MinIdlePods": "1"}, ["go", "java"])
    go, java = installation.figures(asked, "go"), installation.figures(asked, "java")
    figures = InstallationFigures(RESULTS[asked.key], {"go": RESULTS["IdleTimeout=5m MinIdlePods=1"]})
    runner.futures[asked.key].set_result(figures)
    assert go.result() == figures.by_profile["go"]  # read, so asked for: never dropped
    go.drop()
    java.drop()
    assert not runner.futures[asked.key].cancelled()


def test_the_recommendations_together_are_an_installation_run_made_with_exactly_their_settings() -> None:
    runner = Recording()
    settings = SimSettings()
    installation = Installation(runner, [], settings)
    warm = {"Reuse": "true", "IdleTimeout": "2m", "MinIdlePods": "1"}
    run = same_everywhere("IdleTimeout=2m MinIdlePods=1", warm, ["go", "java"])
    installation.submit(run)
    runner.futures[run.key].set_result(InstallationFigures(RESULTS[run.key], {}))

    made = installation.made({"go": dict(warm), "java": dict(warm)}, settings)
    assert made is not None and made.policy == "as recommended"
    assert dataclasses.replace(made, policy=run.key) == RESULTS[run.key]
    other = {**warm, "IdleTimeout": "5m"}
    assert installation.made({"go": dict(warm), "java": other}, settings) is None
    assert installation.made({"go": dict(warm), "java": dict(warm)}, SimSettings(scheduler_s=1.0)) is None
    assert installation.made({"go": dict(warm)}, settings) is None
