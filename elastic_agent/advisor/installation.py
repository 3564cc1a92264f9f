"""Candidates judged as one backend runs them: the whole trace at once, every profile with its setting.

A profile's figures under a setting depend on the other profiles only through what one backend shares
between them: the registration-key bank, which the warm pool (MinIdlePods, a ReuseSchedule period) and
Predict draw on, and Predict's knowledge of which stage follows which, learnt across profiles (a test
stage on one profile follows a compile on another). A setting that uses neither (reuse with no warm pool
and no prediction, or one pod per job) gives a profile the same figures alone as together, so the
advisor's search runs those on each profile's jobs alone, which is cheaper; every other candidate is an
`InstallationRun`: one simulation of the whole trace with that kind of setting on every profile, whose
figures are read per profile. Such a run costs what the per-profile runs of the same candidate cost
together (the same jobs are simulated), and serves every profile's search at once.

What the other profiles run in an installation run: the same flat setting or Predict candidate, or, for
a schedule, their own schedule made with the same options (their plain values when their demand gave
them none). The advisor then runs the profiles' recommendations together (`as_recommended`), so that what
it recommends is also shown as one installation; an installation run made with exactly those settings
(every profile recommended the same warm pool, say) is that run already, and is not run again (`made`).

Every installation run a search could ask for is started up front (advise.py); one that no profile's
search asked for is dropped when every profile has said so (`Started.drop`), cancelled if not begun.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from elastic_agent.advisor.runner import Runner, Started
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Run, Simulation
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob


def shares_state(properties: Mapping[str, str]) -> bool:
    """Whether a setting draws on what one backend shares between profiles (banked keys, predictions)."""
    if properties.get("Predict", "").lower() == "true":
        return True
    if int(properties.get("MinIdlePods", "0") or 0) > 0:
        return True
    return bool(properties.get("ReuseSchedule"))


@dataclass(frozen=True)
class InstallationRun:
    """One whole-trace run: `key` names it (equal keys are one run), `per_profile` is every profile's
    elastic properties in it."""

    key: str
    per_profile: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class InstallationFigures:
    """One whole-trace run's figures: the whole installation's and each profile's."""

    whole: PolicyResult
    by_profile: dict[str, PolicyResult]


def simulate_installation(run: Run) -> InstallationFigures:
    """`simulate_by_profile`, with the whole installation's figures of the same run beside (what
    `simulate` gives of it), so that the recommendations together may be read from it."""
    trace, policy, settings = run
    whole, by_profile = Simulation(trace, policy, settings).run_whole_and_by_profile()
    return InstallationFigures(whole, by_profile)


class Installation:
    """The whole trace's installation runs, each simulated once however many profiles ask for it.
    Thread-safe: every profile's search asks from a thread of its own."""

    def __init__(self, runner: Runner, jobs: Sequence[TraceJob], settings: SimSettings) -> None:
        self._runner = runner
        self._jobs = jobs
        self._settings = settings
        self._runs: dict[str, concurrent.futures.Future[InstallationFigures]] = {}
        self._per_profile: dict[str, Mapping[str, Mapping[str, str]]] = {}
        self._claims: dict[str, set[str]] = {}  # the profiles that may still ask for a run
        self._asked: set[str] = set()  # the runs some profile asked for
        self._lock = threading.Lock()

    def submit(self, run: InstallationRun) -> concurrent.futures.Future[InstallationFigures]:
        with self._lock:
            future = self._runs.get(run.key)
            if future is None:
                policy = Policy(run.key, per_profile=run.per_profile)
                future = self._runner.submit(simulate_installation, (self._jobs, policy, self._settings))
                self._runs[run.key] = future
                self._per_profile[run.key] = run.per_profile
            return future

    def figures(self, run: InstallationRun, profile: str) -> Started:
        """The profile's figures in `run`, started now and waited for when asked for; dropped when
        neither this profile nor another holding a claim on the run asks for it."""
        future = self.submit(run)
        with self._lock:
            self._claims.setdefault(run.key, set()).add(profile)

        def result() -> PolicyResult:
            with self._lock:
                self._asked.add(run.key)
            return future.result().by_profile[profile]

        def drop() -> None:
            with self._lock:
                claims = self._claims[run.key]
                claims.discard(profile)
                if not claims and run.key not in self._asked:
                    future.cancel()

        return Started(result, drop)

    def made(
        self, per_profile: Mapping[str, Mapping[str, str]], settings: SimSettings
    ) -> PolicyResult | None:
        """The whole installation's figures of a run already made (or under way) with exactly these
        settings of every profile and these simulation settings, waited for; None when there is none."""
        if settings != self._settings:
            return None
        wanted = _exactly(per_profile)
        with self._lock:
            found = [
                future
                for key, future in self._runs.items()
                if not future.cancelled() and _exactly(self._per_profile[key]) == wanted
            ]
        for future in found:
            try:
                whole = future.result().whole
            except concurrent.futures.CancelledError:
                continue
            return replace(whole, policy="as recommended")
        return None


def _exactly(per_profile: Mapping[str, Mapping[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """Settings compared key by key, in order."""
    return {profile: list(properties.items()) for profile, properties in per_profile.items()}


def same_everywhere(key: str, properties: Mapping[str, str], profiles: Sequence[str]) -> InstallationRun:
    return InstallationRun(key, {profile: dict(properties) for profile in profiles})
