"""The advisor's search (elastic_agent/advisor/search.py): on monotone rows of flat candidates it runs
fewer of them than the exhaustive search and recommends the same one, at every level of targets.

The rows' results are written here as data (a PolicyResult per candidate, wait falling and idle rising
along a row, as the simulator gives them); the search only reads them, so no simulation is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elastic_agent.advisor.advise import Candidate, choose, flat_rows, meets
from elastic_agent.advisor.search import search_flat
from elastic_agent.traces.measures import PolicyResult


def _result(label: str, mean: float, p95: float, idle: float, boot: float = 5.0) -> PolicyResult:
    jobs = 100
    return PolicyResult(
        label,
        jobs,
        jobs,
        jobs,
        10,
        mean,
        mean,
        p95,
        p95,
        p95,
        0,
        idle * jobs,
        boot * jobs,
        0.0,
        1,
        0,
        0.0,
        0.0,
        0,
        0,
        0,
    )


BASELINE = _result("one pod per job", 30.0, 40.0, 0.0, 25.0)
ROWS = flat_rows(["10m", "2m", "20m", "5m"], [0, 1])


def _table(values: Mapping[str, tuple[float, float, float, float]]) -> dict[str, PolicyResult]:
    return {label: _result(label, *figures) for label, figures in values.items()}


# mean, p95, idle, boot per job; along each row wait falls and idle rises.
MONOTONE = _table(
    {
        "IdleTimeout=2m MinIdlePods=0": (12.0, 30.0, 5.0, 20.0),
        "IdleTimeout=5m MinIdlePods=0": (7.0, 20.0, 12.0, 12.0),
        "IdleTimeout=10m MinIdlePods=0": (5.0, 9.0, 30.0, 6.0),
        "IdleTimeout=20m MinIdlePods=0": (3.0, 8.0, 70.0, 4.0),
        "IdleTimeout=2m MinIdlePods=1": (5.5, 12.0, 15.0, 15.0),
        "IdleTimeout=5m MinIdlePods=1": (4.0, 9.5, 20.0, 8.0),
        "IdleTimeout=10m MinIdlePods=1": (3.0, 7.0, 40.0, 5.0),
        "IdleTimeout=20m MinIdlePods=1": (2.0, 6.0, 90.0, 3.0),
    }
)


class Counting:
    def __init__(self, results: Mapping[str, PolicyResult]) -> None:
        self.results = results
        self.ran: list[str] = []

    def __call__(self, labels: Sequence[str]) -> dict[str, PolicyResult]:
        self.ran += labels
        return {label: self.results[label] for label in labels}


def _levels(p95: float | None) -> list:  # type: ignore[type-arg]
    targets = [p95, None] if p95 is not None else [None]
    return [lambda r, t=t: meets(r, BASELINE, 0.2, t) for t in targets]


def _exhaustive(results: Mapping[str, PolicyResult], p95: float | None) -> tuple[str, str]:
    everything = [Candidate(label, {}, result) for label, result in results.items()]
    chosen, verdict = choose(everything, BASELINE, 0.2, p95)
    return chosen.label, verdict


def _searched(results: Mapping[str, PolicyResult], p95: float | None) -> tuple[tuple[str, str], Counting]:
    run = Counting(results)
    outcome = search_flat(ROWS, _levels(p95), run)
    assert set(outcome.results) | set(outcome.skipped) == set(results)
    assert not set(outcome.results) & set(outcome.skipped)
    ran = [Candidate(label, {}, result) for label, result in outcome.results.items()]
    chosen, verdict = choose(ran, BASELINE, 0.2, p95)
    return (chosen.label, verdict), run


def test_the_search_recommends_what_the_exhaustive_search_does_and_runs_fewer_candidates() -> None:
    chosen, run = _searched(MONOTONE, 10.0)
    assert chosen == _exhaustive(MONOTONE, 10.0) == ("IdleTimeout=5m MinIdlePods=1", "met")
    assert len(run.ran) < len(MONOTONE) and len(set(run.ran)) == len(run.ran)


def test_the_search_relaxes_the_p95_target_as_choose_does_when_no_candidate_reaches_it() -> None:
    chosen, run = _searched(MONOTONE, 1.0)
    assert chosen == _exhaustive(MONOTONE, 1.0) == ("IdleTimeout=5m MinIdlePods=1", "p95 relaxed")
    assert len(run.ran) < len(MONOTONE)


def test_the_search_runs_every_candidate_when_none_meets_any_target() -> None:
    slow = _table({label: (20.0 - i, 50.0 - i, 10.0 * i, 5.0) for i, label in enumerate(MONOTONE)})
    chosen, run = _searched(slow, 10.0)
    assert chosen == _exhaustive(slow, 10.0) and chosen[1] == "missed"
    assert sorted(run.ran) == sorted(slow)


def test_a_longer_timeout_is_run_while_its_bound_could_still_be_the_cheapest() -> None:
    # 20m's boot falls so far that it is the cheapest of the row: the bound (10m's idle, 30) does not
    # exceed the best cost, so the search must run it.
    results = dict(MONOTONE) | _table(
        {
            "IdleTimeout=10m MinIdlePods=0": (5.0, 9.0, 30.0, 40.0),
            "IdleTimeout=20m MinIdlePods=0": (3.0, 8.0, 31.0, 0.0),
            "IdleTimeout=5m MinIdlePods=1": (6.0, 11.0, 60.0, 8.0),
            "IdleTimeout=10m MinIdlePods=1": (3.0, 7.0, 80.0, 5.0),
            "IdleTimeout=20m MinIdlePods=1": (2.0, 6.0, 90.0, 3.0),
        }
    )
    chosen, run = _searched(results, 10.0)
    assert chosen == _exhaustive(results, 10.0) == ("IdleTimeout=20m MinIdlePods=0", "met")
    # MinIdlePods=1's 10m idles more than the best costs: 20m is not run.
    assert "IdleTimeout=20m MinIdlePods=1" not in run.ran


def test_when_none_meets_any_target_the_search_recommends_the_knee_the_exhaustive_search_does() -> None:
    # Wait falls steeply up to 5m of MinIdlePods=0, then buys a second or two for hundreds of idle
    # pod-seconds: the knee (60 s of waiting per pod-hour) is 5m, not the costliest that waits least.
    knee_shaped = _table(
        {
            "IdleTimeout=2m MinIdlePods=0": (26.0, 40.0, 100.0, 20.0),
            "IdleTimeout=5m MinIdlePods=0": (20.0, 38.0, 200.0, 12.0),
            "IdleTimeout=10m MinIdlePods=0": (19.5, 37.0, 500.0, 6.0),
            "IdleTimeout=20m MinIdlePods=0": (19.0, 36.0, 900.0, 4.0),
            "IdleTimeout=2m MinIdlePods=1": (22.0, 39.0, 400.0, 15.0),
            "IdleTimeout=5m MinIdlePods=1": (19.8, 37.5, 600.0, 8.0),
            "IdleTimeout=10m MinIdlePods=1": (18.5, 36.0, 1000.0, 5.0),
            "IdleTimeout=20m MinIdlePods=1": (17.0, 35.0, 1500.0, 3.0),
        }
    )
    chosen, run = _searched(knee_shaped, 10.0)
    assert chosen == _exhaustive(knee_shaped, 10.0) == ("IdleTimeout=5m MinIdlePods=0", "missed")
    assert sorted(run.ran) == sorted(knee_shaped), "the knee is taken over every candidate"
