"""Pod start-up calibrated per profile on what a trace's jobs really waited, so that every candidate the
advisor simulates starts its pods as the user's cluster does.

A trace written by `trace` carries each job's `waited` (scheduled to assigned). What a job waits is
GoCD's overheads (the assignment tick, the agent's registration and polling), queueing for capacity, and,
when no idle pod could take it, a pod's start-up. Which jobs waited for a cold pod depends on the policy
the trace was recorded under (`--current`): every job under one pod per job, some under reuse. So the
start-up is not read off the waits but fitted by replaying them: the simulator runs the current policy,
and the start-up parameters are moved until the simulated waits match the measured ones. One method for
every policy, and the simulator's own overheads and queueing are subtracted by construction.

The start-up of a profile is lognormal (run_settings.PodStart), parametrised here by its mean `mu` and
the ratio `ratio` of its 95th percentile to its mean, since the mean wait follows the first and the tail
of the waits the second. Each step runs the current policy once and moves:

- `mu` by a secant step on (simulated - measured) mean wait; the first step's slope is the simulated
  share of jobs that started a pod (pods per job, at most 1), as a job that started a pod waits its
  start-up and one that did not waits nothing of it. Where the trace has enough jobs in an hour of the
  day (its mean wait known within 3 %: calibration_fit.py), that hour has its own `mu`, fitted on that
  hour's mean wait; the other hours share one;
- `ratio` by a secant step on the waits' quantile at 1 - 5 % x that share (about the p95 of the jobs
  that started a pod), when nearly every job started one (one pod per job) and that tail holds enough
  waits; otherwise the spread is the default's.

It stops when the mean and tail are within 5 % (the hours' mean error within 6 %) or after MAX_STEPS
runs, and keeps each profile's best step. When the policy shares nothing between profiles, each profile
runs alone and only those not yet fitted run again; otherwise the whole trace runs at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from elastic_agent.advisor.calibration_fit import ProfileFit, relative
from elastic_agent.advisor.current_policy import CurrentPolicy, GivenPodStart
from elastic_agent.advisor.installation import shares_state
from elastic_agent.advisor.runner import Runner
from elastic_agent.simulation.run_settings import PodStart, SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult, percentile
from elastic_agent.traces.workload import TraceJob

CALIBRATED, GIVEN, ASSUMED = "calibrated", "given", "assumed"
MIN_JOBS = 20  # fewer measured waits in a profile: its start-up is assumed, not fitted
MAX_STEPS = 8
DIFFERS = 0.20  # the report says so when simulated and measured differ by more than this


@dataclass(frozen=True)
class WaitFigures:
    """Waits from scheduled to assigned: measured in the trace, or simulated."""

    jobs: int
    wait_mean_s: float
    wait_p95_s: float

    def numbers(self) -> dict[str, float | int]:
        return {"jobs": self.jobs, "wait_mean_s": self.wait_mean_s, "wait_p95_s": self.wait_p95_s}


@dataclass(frozen=True)
class ProfileCalibration:
    """One profile: what its jobs waited (`measured`, None when the trace has no `waited` for it), what
    the simulator gives under the current policy (`current`), and the start-up it uses for every
    candidate (`pod_start`), `source` saying whether it was calibrated, given or assumed."""

    profile: str
    measured: WaitFigures | None
    current: WaitFigures
    pod_start: PodStart
    source: str
    hours: tuple[int, ...] = ()  # the hours of the day fitted on their own
    spread_fitted: bool = False
    runs: int = 0  # simulations this profile's calibration took
    converged: bool = True

    def differences(self) -> tuple[float, float] | None:
        """(mean, p95): simulated less measured, relative to measured; None without measured waits."""
        if self.measured is None:
            return None
        return (
            relative(self.current.wait_mean_s, self.measured.wait_mean_s),
            relative(self.current.wait_p95_s, self.measured.wait_p95_s),
        )

    @property
    def differs(self) -> bool:
        """Whether simulated and measured differ by more than DIFFERS in mean or p95 wait."""
        found = self.differences()
        return found is not None and any(abs(d) > DIFFERS for d in found)

    def numbers(self) -> dict[str, object]:
        """For a JSON report: every figure of the calibration, the same keys for every profile."""
        start = self.pod_start
        return {
            "measured": None if self.measured is None else self.measured.numbers(),
            "current": self.current.numbers(),
            "pod_start": {
                "source": self.source,
                "median_s": start.median_s,
                "sigma": start.sigma,
                "by_hour_median_s": list(start.by_hour) or None,
                "hours_fitted": list(self.hours),
                "timezone": start.timezone,
                "spread_fitted": self.spread_fitted,
                "runs": self.runs,
                "converged": self.converged,
            },
            "differs": self.differs,
        }


@dataclass(frozen=True)
class Calibration:
    """Every profile's calibration, and the policy the trace was recorded under."""

    current: CurrentPolicy
    profiles: Mapping[str, ProfileCalibration]
    default: PodStart  # what is assumed for a profile without measured waits
    runs: int = 0

    def settings(self, base: SimSettings) -> SimSettings:
        """`base` with every profile's start-up: what every candidate is simulated with."""
        starts = tuple((name, c.pod_start) for name, c in sorted(self.profiles.items()))
        return replace(base, pod_starts=starts)


def calibrate(
    jobs: Sequence[TraceJob],
    current: CurrentPolicy,
    settings: SimSettings,
    *,
    given: GivenPodStart | None = None,
    timezone: str = "UTC",
    runner: Runner | None = None,
) -> Calibration:
    """Every profile of `jobs` calibrated as the module says; `settings` are the advice's (its seed, its
    GoCD server); `given` start-ups are used as they are, and profiles without measured waits get
    `given`'s or the settings' default."""
    given = given or GivenPodStart()
    own = runner is None
    runner = runner or Runner()
    by_profile: dict[str, list[TraceJob]] = {}
    for job in jobs:
        by_profile.setdefault(job.profile, []).append(job)
    base = replace(settings, judged_from_s=0.0)  # measured and simulated on every job of the trace
    default = settings.pod_start(None)
    fits: dict[str, ProfileFit] = {}
    fixed: dict[str, tuple[PodStart, str]] = {}
    for profile, own_jobs in sorted(by_profile.items()):
        waits = [(job.at, job.waited) for job in own_jobs if job.waited is not None]
        median = given.for_profile(profile)
        if median is not None:
            fixed[profile] = (replace(default, median_s=median, timezone=timezone), GIVEN)
        elif len(waits) < MIN_JOBS:
            fixed[profile] = (replace(default, timezone=timezone), ASSUMED)
        else:
            fits[profile] = ProfileFit(waits, default, timezone, settings.start)
    policy = Policy("current", current.everywhere, per_profile=current.per_profile)
    alone = not any(shares_state(current.properties(p)) for p in by_profile)

    def run(starts: Mapping[str, PodStart], profiles: Sequence[str]) -> dict[str, PolicyResult]:
        step = replace(base, pod_starts=tuple(sorted(starts.items())))
        if not alone:
            return dict(runner.submit(simulate_by_profile, (jobs, policy, step)).result())
        futures = {p: runner.submit(simulate, (by_profile[p], policy, step)) for p in profiles}
        return {p: future.result() for p, future in futures.items()}

    try:
        results, runs = _fit_all(fits, fixed, list(by_profile), run, together=not alone)
    finally:
        if own:
            runner.close()
    found: dict[str, ProfileCalibration] = {}
    for profile in sorted(by_profile):
        result = results[profile]
        simulated = WaitFigures(result.assigned, result.wait_mean, result.wait_p95)
        fit = fits.get(profile)
        if fit is None:
            start, source = fixed[profile]
            measured = _measured([job.waited for job in by_profile[profile] if job.waited is not None])
            found[profile] = ProfileCalibration(profile, measured, simulated, start, source, runs=1)
        else:
            found[profile] = ProfileCalibration(
                profile,
                _measured([w for _, w in fit.waits]),
                simulated,
                fit.best_start(),
                CALIBRATED,
                tuple(sorted(h for h in fit.cells if h is not None)),
                fit.spread_fitted,
                fit.runs,
                fit.converged(),
            )
    return Calibration(current, found, default, runs)


def _fit_all(
    fits: Mapping[str, ProfileFit],
    fixed: Mapping[str, tuple[PodStart, str]],
    profiles: Sequence[str],
    run: Callable[[Mapping[str, PodStart], Sequence[str]], dict[str, PolicyResult]],
    together: bool,
) -> tuple[dict[str, PolicyResult], int]:
    """Step until every fit is within its tolerances (or MAX_STEPS runs); every profile's figures at the
    start-up chosen for it, and the runs it took. `together`: each run is of every profile at once."""
    starts = {p: start for p, (start, _) in fixed.items()} | {p: f.start() for p, f in fits.items()}
    steps = [run(starts, profiles)]
    waiting = [p for p in fits if not fits[p].observe(steps[0][p], starts[p], 0)]
    while waiting and len(steps) < MAX_STEPS:
        for p in waiting:
            fits[p].step()
            starts[p] = fits[p].start()
        steps.append(run(starts, waiting))
        seen = fits if together else waiting
        done = {p for p in seen if fits[p].observe(steps[-1][p], starts[p], len(steps) - 1)}
        waiting = [p for p in waiting if p not in done]
    chosen = dict(steps[0])
    for p, fit in fits.items():
        chosen[p], starts[p] = fit.best_result(), fit.best_start()
    best_steps = {fit.best_step() for fit in fits.values()}
    if together and len(best_steps) == 1:
        chosen = dict(steps[best_steps.pop()])
    elif together and best_steps:
        # The profiles' best steps were different runs: the figures of the start-ups chosen, together.
        steps.append(run(starts, profiles))
        chosen = dict(steps[-1])
    return chosen, len(steps)


def _measured(waits: Sequence[float]) -> WaitFigures | None:
    if not waits:
        return None
    ordered = sorted(waits)
    return WaitFigures(len(ordered), sum(ordered) / len(ordered), percentile(ordered, 0.95))
