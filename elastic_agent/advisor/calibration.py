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
  day (`_hour_fits`), that hour has its own `mu`, fitted on that hour's mean wait; the other hours share
  one;
- `ratio` by a secant step on the waits' quantile at 1 - 5 % x that share (the p95 under one pod per job,
  the p95 of the jobs that started a pod under reuse), when that tail holds enough waits; otherwise the
  spread is the default's.

It stops when the mean and tail are within 5 % (the hours' mean error within 6 %) or after MAX_STEPS
runs, and keeps each profile's best step. When the policy shares nothing between profiles, each profile
runs alone and only those not yet fitted run again; otherwise the whole trace runs at every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from elastic_agent.advisor.current_policy import CurrentPolicy, GivenPodStart
from elastic_agent.advisor.installation import shares_state
from elastic_agent.advisor.runner import Runner
from elastic_agent.simulation.run_settings import PodStart, SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult, percentile
from elastic_agent.traces.workload import TraceJob

CALIBRATED, GIVEN, ASSUMED = "calibrated", "given", "assumed"
MIN_JOBS = 20  # fewer measured waits in a profile: its start-up is assumed, not fitted
TAIL_WAITS = 20  # the spread is fitted when the tail quantile has this many waits beyond it
HOUR_ERROR = 0.03  # an hour is fitted alone when its mean wait is known this closely
MEAN_TOLERANCE = TAIL_TOLERANCE = 0.05
HOURS_TOLERANCE = 0.06
MAX_STEPS = 8
DIFFERS = 0.20  # the report says so when simulated and measured differ by more than this
Z95 = 1.6448536269514722
MU_RANGE_S = (1.0, 3600.0)
RATIO_RANGE = (1.001, 3.8)  # a 95th percentile at most 3.8 times the mean: sigma up to about 1.5


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
            _relative(self.current.wait_mean_s, self.measured.wait_mean_s),
            _relative(self.current.wait_p95_s, self.measured.wait_p95_s),
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
    fits: dict[str, _Fit] = {}
    fixed: dict[str, tuple[PodStart, str]] = {}
    for profile, own_jobs in sorted(by_profile.items()):
        waits = [(job.at, job.waited) for job in own_jobs if job.waited is not None]
        median = given.for_profile(profile)
        if median is not None:
            fixed[profile] = (replace(default, median_s=median, timezone=timezone), GIVEN)
        elif len(waits) < MIN_JOBS:
            fixed[profile] = (replace(default, timezone=timezone), ASSUMED)
        else:
            fits[profile] = _Fit(waits, default, timezone, settings.start)
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
    fits: Mapping[str, _Fit],
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


@dataclass
class _Best:
    step: int
    error: float  # 1.0: at the tolerances
    start: PodStart
    result: PolicyResult


@dataclass
class _Cell:
    """The jobs of some hours of the day (all of them when hours are not fitted alone) and their mean
    start-up, moved by secant steps on their mean wait."""

    hours: frozenset[int]
    measured_mean: float
    jobs: int
    mu: float
    history: list[tuple[float, float]] = field(default_factory=list)  # (mu, simulated - measured)


class _Fit:
    """One profile's start-up while it is fitted."""

    def __init__(
        self, waits: list[tuple[float, float]], default: PodStart, timezone: str, start_s: float
    ) -> None:
        self.waits = waits
        self.sorted_waits = sorted(w for _, w in waits)
        self.timezone = timezone
        self._zone = ZoneInfo(timezone)
        self._start_s = start_s
        mean = sum(self.sorted_waits) / len(waits)
        mu = default.median_s * math.exp(default.sigma**2 / 2)
        self.cells: dict[int | None, _Cell] = {None: _Cell(frozenset(range(24)), mean, len(waits), mu)}
        self.ratio = math.exp(Z95 * default.sigma - default.sigma**2 / 2)
        self.default_sigma = default.sigma
        self.bounds = default.bounds_s
        self.ratios: list[tuple[float, float]] = []  # (ratio, simulated tail - measured tail)
        self.spread_fitted = False
        self.share = 1.0  # of jobs that started a pod, in the last run
        self.best: _Best | None = None
        self.runs = 0
        self.hour_jobs = [0] * 24
        for at, _ in waits:
            self.hour_jobs[self.hour(at)] += 1

    def hour(self, at: float) -> int:
        return datetime.fromtimestamp(self._start_s + at, self._zone).hour

    def sigma(self) -> float:
        if not self.spread_fitted:
            return self.default_sigma
        return Z95 - math.sqrt(Z95**2 - 2 * math.log(self.ratio))

    def start(self) -> PodStart:
        sigma = self.sigma()
        shrink = math.exp(-(sigma**2) / 2)
        medians = [self._cell(h).mu * shrink for h in range(24)]
        median = sum(m * n for m, n in zip(medians, self.hour_jobs, strict=True)) / sum(self.hour_jobs)
        high = max(self.bounds[1], max(medians) * math.exp(4 * sigma))
        by_hour = tuple(medians) if len(self.cells) > 1 else ()
        return PodStart(median, sigma, (min(1.0, self.bounds[0]), high), by_hour, self.timezone)

    def _cell(self, hour: int) -> _Cell:
        return next(c for c in self.cells.values() if hour in c.hours)

    def best_start(self) -> PodStart:
        assert self.best is not None
        return self.best.start

    def best_result(self) -> PolicyResult:
        assert self.best is not None
        return self.best.result

    def best_step(self) -> int:
        assert self.best is not None
        return self.best.step

    def converged(self) -> bool:
        return self.best is not None and self.best.error <= 1.0

    def observe(self, result: PolicyResult, start: PodStart, step: int) -> bool:
        """Take the figures of run `step`; whether they are within the tolerances."""
        self.runs += 1
        first = step == 0
        self.share = max(0.05, min(1.0, result.pods_per_job))
        if first:
            self._split_hours()
        simulated_by_cell: dict[int | None, list[float]] = {key: [] for key in self.cells}
        keys = {h: next(k for k, c in self.cells.items() if h in c.hours) for h in range(24)}
        for at, wait in result.waits_at:
            simulated_by_cell[keys[self.hour(at)]].append(wait)
        errors = []
        for key, cell in self.cells.items():
            got = simulated_by_cell[key]
            simulated = sum(got) / len(got) if got else 0.0
            cell.history.append((cell.mu, simulated - cell.measured_mean))
            errors.append((cell.jobs, abs(_relative(simulated, cell.measured_mean))))
        total = sum(n for n, _ in errors)
        mean_error = abs(_relative(result.wait_mean, sum(self.sorted_waits) / len(self.sorted_waits)))
        hours_error = sum(n * e for n, e in errors) / max(1, total) if len(self.cells) > 1 else 0.0
        level = 1 - 0.05 * self.share
        tail_error = 0.0
        if self.spread_fitted or (first and (1 - level) * len(self.sorted_waits) >= TAIL_WAITS):
            self.spread_fitted = True
            measured = percentile(self.sorted_waits, level)
            simulated = percentile(sorted(result.waits), level)
            self.ratios.append((self.ratio, simulated - measured))
            tail_error = abs(_relative(simulated, measured))
        error = max(mean_error / MEAN_TOLERANCE, tail_error / TAIL_TOLERANCE, hours_error / HOURS_TOLERANCE)
        if self.best is None or error < self.best.error:
            self.best = _Best(step, error, start, result)
        return error <= 1.0

    def _split_hours(self) -> None:
        """The hours with enough jobs get a cell of their own (at least two of them, else none)."""
        by_hour: dict[int, list[float]] = {}
        for at, wait in self.waits:
            by_hour.setdefault(self.hour(at), []).append(wait)
        enough = [h for h, waits in by_hour.items() if _enough_for_hour(len(waits), self.share, self.sigma())]
        if len(enough) < 2:
            return
        whole = self.cells[None]
        self.cells = {}
        for h in sorted(enough):
            waits = by_hour[h]
            self.cells[h] = _Cell(frozenset({h}), sum(waits) / len(waits), len(waits), whole.mu)
        rest = [w for h, waits in by_hour.items() if h not in enough for w in waits]
        if rest or len(enough) < 24:
            hours = frozenset(range(24)) - set(enough)
            self.cells[None] = _Cell(hours, sum(rest) / max(1, len(rest)), len(rest), whole.mu)

    def step(self) -> None:
        """Move every cell's mean and the spread by a secant step towards the measured waits."""
        low, high = MU_RANGE_S
        for cell in self.cells.values():
            if cell.jobs:
                cell.mu = _secant(cell.history, self.share, low, high)
        if self.spread_fitted and self.ratios:
            cells = self.cells.values()
            scale = sum(c.mu * c.jobs for c in cells) / max(1, sum(c.jobs for c in cells))
            self.ratio = _secant(self.ratios, scale, *RATIO_RANGE)


def _secant(history: Sequence[tuple[float, float]], first_slope: float, low: float, high: float) -> float:
    """The next x towards a residual of 0, from the last two (x, residual) points; `first_slope` when
    there is one point or the two disagree in sign of slope. At most a factor 3 per step, within bounds."""
    x, residual = history[-1]
    slope = first_slope
    if len(history) >= 2:
        x0, residual0 = history[-2]
        if abs(x - x0) > 1e-9 * max(1.0, abs(x)):
            found = (residual - residual0) / (x - x0)
            if found > 0.1 * first_slope:
                slope = found
    moved = x - residual / slope
    return min(high, max(low, x / 3, min(3 * x, moved)))


def _enough_for_hour(jobs: int, share: float, sigma: float) -> bool:
    """Whether an hour's mean wait is known within HOUR_ERROR: jobs that started a pod (`share` of
    them) wait their start-up, the others nearly nothing, so its relative spread is about
    sqrt((1 - share) / share + sigma^2) per cold start."""
    spread = math.sqrt((1 - share) / share + sigma**2)
    return jobs * share > 0 and spread / math.sqrt(jobs * share) <= HOUR_ERROR


def _measured(waits: Sequence[float]) -> WaitFigures | None:
    if not waits:
        return None
    ordered = sorted(waits)
    return WaitFigures(len(ordered), sum(ordered) / len(ordered), percentile(ordered, 0.95))


def _relative(simulated: float, measured: float) -> float:
    """(simulated - measured) / measured, measured counted as at least a second (waits of 0 s)."""
    return (simulated - measured) / max(1.0, measured)
