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
it recommends is also shown as one installation.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from elastic_agent.advisor.runner import Runner
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_by_profile
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


class Installation:
    """The whole trace's installation runs, each simulated once however many profiles ask for it.
    Thread-safe: every profile's search asks from a thread of its own."""

    def __init__(self, runner: Runner, jobs: Sequence[TraceJob], settings: SimSettings) -> None:
        self._runner = runner
        self._jobs = jobs
        self._settings = settings
        self._runs: dict[str, concurrent.futures.Future[dict[str, PolicyResult]]] = {}
        self._lock = threading.Lock()

    def submit(self, run: InstallationRun) -> concurrent.futures.Future[dict[str, PolicyResult]]:
        with self._lock:
            future = self._runs.get(run.key)
            if future is None:
                policy = Policy(run.key, per_profile=run.per_profile)
                future = self._runner.submit(simulate_by_profile, (self._jobs, policy, self._settings))
                self._runs[run.key] = future
            return future

    def figures(self, run: InstallationRun, profile: str) -> Callable[[], PolicyResult]:
        """The profile's figures in `run`, started now and waited for when called."""
        future = self.submit(run)
        return lambda: future.result()[profile]


def same_everywhere(key: str, properties: Mapping[str, str], profiles: Sequence[str]) -> InstallationRun:
    return InstallationRun(key, {profile: dict(properties) for profile in profiles})
