"""One profile's pod start-up while calibration.py fits it: its parameters (the mean start-up of each
group of hours of the day and the ratio of the 95th percentile to the mean), the secant steps that move
them towards the measured waits, and the best step seen. calibration.py says why it is fitted so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from elastic_agent.simulation.run_settings import PodStart
from elastic_agent.traces.measures import PolicyResult, percentile

TAIL_WAITS = 20  # the spread is fitted when the tail quantile has this many waits beyond it ...
# ... and nearly every job started a pod: where many found a warm one, the tail mixes the two and moves
# with the share of cold starts, and fitting it moves the median off (RESULTS.md, "Calibration").
SPREAD_SHARE = 0.8
HOUR_ERROR = 0.03  # an hour is fitted alone when its mean wait is known this closely
MEAN_TOLERANCE = TAIL_TOLERANCE = 0.05
HOURS_TOLERANCE = 0.06
Z95 = 1.6448536269514722
MU_RANGE_S = (1.0, 3600.0)
RATIO_RANGE = (1.001, 3.8)  # a 95th percentile at most 3.8 times the mean: sigma up to about 1.5


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


class ProfileFit:
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
            errors.append((cell.jobs, abs(relative(simulated, cell.measured_mean))))
        total = sum(n for n, _ in errors)
        mean_error = abs(relative(result.wait_mean, sum(self.sorted_waits) / len(self.sorted_waits)))
        hours_error = sum(n * e for n, e in errors) / max(1, total) if len(self.cells) > 1 else 0.0
        level = 1 - 0.05 * self.share
        tail_error = 0.0
        tail_known = (1 - level) * len(self.sorted_waits) >= TAIL_WAITS
        if self.spread_fitted or (first and self.share >= SPREAD_SHARE and tail_known):
            self.spread_fitted = True
            measured = percentile(self.sorted_waits, level)
            simulated = percentile(sorted(result.waits), level)
            self.ratios.append((self.ratio, simulated - measured))
            tail_error = abs(relative(simulated, measured))
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


def relative(simulated: float, measured: float) -> float:
    """(simulated - measured) / measured, measured counted as at least a second (waits of 0 s)."""
    return (simulated - measured) / max(1.0, measured)
