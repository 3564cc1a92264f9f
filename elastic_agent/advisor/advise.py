"""One profile's advice: which IdleTimeout and MinIdlePods, or which `ReuseSchedule`, to give it.

Its jobs are replayed in the virtual-time simulator once with one pod per job (the baseline), once per
flat candidate (IdleTimeout x MinIdlePods, day and night) and once per schedule candidate
(schedule_advice.py: warm pods and a longer IdleTimeout in the hours where demand is high, the cheap
values outside) and `Predict` candidate. A candidate that shares nothing with other profiles runs on the
profile's jobs alone; one that draws on what one backend shares (banked keys, predictions) is read from a
run of the whole installation when the caller gives `shared` (installation.py). The simulator's clock
starts at the trace's origin, so the schedules' cron periods fall on the trace's hours. Each candidate
costs pod-seconds beyond the jobs (idle plus boot) and buys wait. The frontier is the candidates no
other candidate beats on both; the recommendation is the cheapest candidate whose mean wait is at most
`target` times the baseline's, whose p95 wait is at most `p95_target` (when given) and under which no
job waits past the create-agent re-send period; else the knee of the frontier (knee.py), never simply
the costliest point. Costs are also given per day of the judged days (`ProfileAdvice.per_day`), the unit
an administrator budgets. The best single setting is chosen by the same rule among the flat
candidates alone, and the two are shown side by side. Schedules are proposed from the trace's first days
and every candidate is judged on the remaining ones (holdout.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from elastic_agent.advisor.installation import shares_state
from elastic_agent.advisor.knee import DEFAULT_MIN_GAIN_S, knee, rule_text
from elastic_agent.advisor.runner import Runner, Started, started
from elastic_agent.advisor.search import SearchOutcome, bisection_order, search_flat
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.schedule_advice import Demand, ScheduleProposal
from elastic_agent.traces.workload import TraceJob
from profiles.quantities import parse_duration

DEFAULT_IDLE_TIMEOUTS = ("2m", "5m", "10m", "20m")
DEFAULT_MIN_IDLE = (0, 1)


@dataclass(frozen=True)
class ScheduleOptions:
    """How schedule candidates are proposed (schedule_advice.py); `enabled=False`: flat ones only."""

    enabled: bool = True
    timezone: str = "UTC"
    quantiles: Sequence[float] = (0.5,)
    busy_idle_timeouts: Sequence[str] = ("30m", "60m")
    plain_idle_timeouts: Sequence[str] = ("2m", "10m")
    busy_share: float = 0.25


@dataclass(frozen=True)
class Candidate:
    label: str
    properties: Mapping[str, str]
    result: PolicyResult
    schedule: ScheduleProposal | None = None

    @property
    def cost(self) -> float:
        """Pod-seconds paid for beyond the jobs themselves, per job: idle plus boot."""
        return self.result.idle_pod_s_per_job + self.result.boot_pod_s_per_job


@dataclass(frozen=True)
class ProfileAdvice:
    profile: str
    jobs: int
    baseline: PolicyResult
    candidates: list[Candidate]
    frontier: list[Candidate]
    recommended: Candidate
    met_target: bool
    best_flat: Candidate
    demand: Demand | None = None
    p95_target: float | None = None
    verdict: str = "met"  # or "p95 relaxed", "missed": see choose()
    skipped: Mapping[str, str] = field(default_factory=dict)  # flat candidates not run: why (search.py)
    days: float = 1.0  # the judged days the figures cover (holdout.py): pod-seconds per day divide by it
    knee_gain: float = DEFAULT_MIN_GAIN_S  # the knee rule's (knee.py), used when the targets are missed

    def per_day(self, result: PolicyResult, boot: bool = False) -> float:
        """Idle pod-hours a day of the judged days under `result` (`boot`: idle and booting)."""
        return result.pod_hours_per_day(self.days, boot)


def frontier(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Candidates not dominated (another as cheap or cheaper and as fast or faster, better on one)."""
    kept = []
    for c in candidates:
        dominated = any(
            o.cost <= c.cost
            and o.result.wait_mean <= c.result.wait_mean
            and (o.cost < c.cost or o.result.wait_mean < c.result.wait_mean)
            for o in candidates
        )
        if not dominated:
            kept.append(c)
    return sorted(kept, key=lambda c: c.cost)


def flat_label(timeout: str, warm: int) -> str:
    return f"IdleTimeout={timeout} MinIdlePods={warm}"


def meets(r: PolicyResult, baseline: PolicyResult, target: float, p95: float | None) -> bool:
    """Whether a result meets the wait targets: the mean against the baseline's, the p95 (when given),
    and no job waiting past the re-send period."""
    fast = p95 is None or r.wait_p95 <= p95
    return r.wait_mean <= target * baseline.wait_mean and fast and r.waited_past_resend == 0


def choose(
    candidates: Sequence[Candidate],
    baseline: PolicyResult,
    target: float,
    p95_target: float | None,
    knee_gain: float = DEFAULT_MIN_GAIN_S,
) -> tuple[Candidate, str]:
    """The cheapest candidate meeting every wait target ("met"); else, when the p95 target is what no
    candidate reaches, the cheapest meeting the others ("p95 relaxed": a few seconds of p95 are not
    worth any price); else the knee of the frontier (knee.py, with `knee_gain`), past which more idle
    buys little wait ("missed")."""

    for p95, verdict in ((p95_target, "met"), (None, "p95 relaxed")):
        good = [c for c in candidates if meets(c.result, baseline, target, p95)]
        if good:
            return min(good, key=lambda c: (c.cost, c.result.wait_mean)), verdict
    points = frontier(candidates)
    return points[knee([(c.cost, c.result.wait_mean) for c in points], knee_gain)], "missed"


BASELINE = Policy("one pod per job", {"Reuse": "false"})
# A candidate's figures for one profile, from a run of the whole installation (installation.py).
Shared = Callable[[str, Mapping[str, str], ScheduleProposal | None], Started]


def flat_rows(idle_timeouts: Sequence[str], min_idle: Sequence[int]) -> list[list[str]]:
    """The flat candidates' labels, one row per MinIdlePods, by ascending IdleTimeout (search.py)."""
    ordered = sorted(idle_timeouts, key=parse_duration)
    return [[flat_label(t, w) for t in ordered] for w in min_idle]


def _meets_levels(
    baseline: Callable[[], PolicyResult], target: float, p95_target: float | None
) -> list[Callable[[PolicyResult], bool]]:
    """choose()'s levels of targets, as predicates on one result (the baseline read when first needed)."""

    def level(p95: float | None) -> Callable[[PolicyResult], bool]:
        return lambda r: meets(r, baseline(), target, p95)

    return [level(p95_target), level(None)] if p95_target is not None else [level(None)]


@dataclass(frozen=True)
class ProfileRequest:
    """What one profile's advice is asked for: its jobs and settings, the candidates, the targets, and
    where the figures come from. `baseline`: gives its one-pod-per-job figures, waiting for them if they
    are under way (else they are run on its jobs alone); `exhaustive`: run every flat candidate rather
    than search.py's few; `extra`: more candidates, always run as schedules are (prediction_candidates);
    `shared`: gives the figures of a candidate that draws on what one backend shares between profiles
    (installation.py) from a run of the whole installation, instead of a run of this profile alone;
    `days`: the judged days the figures cover; `knee_gain`: the knee rule's (knee.py); `workers` and
    `progress`: the pool's, when no runner is given."""

    profile: str
    jobs: Sequence[TraceJob]
    settings: SimSettings
    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE
    target: float = 0.2
    p95_target: float | None = None
    schedules: Sequence[ScheduleProposal] = ()
    demand: Demand | None = None
    baseline: Callable[[], PolicyResult] | None = None
    exhaustive: bool = False
    extra: Sequence[tuple[str, Mapping[str, str]]] = ()
    shared: Shared | None = None
    days: float = 1.0
    knee_gain: float = DEFAULT_MIN_GAIN_S
    workers: int = 1
    progress: Callable[[str], None] | None = None

    def knobs(self) -> dict[str, dict[str, str]]:
        """The flat candidates' properties, by label."""
        return {
            flat_label(t, w): {"Reuse": "true", "IdleTimeout": t, "MinIdlePods": str(w)}
            for t in self.idle_timeouts
            for w in self.min_idle
        }

    def others(self) -> list[tuple[str, dict[str, str], ScheduleProposal | None]]:
        """The candidates with no exact bound on their cost, always run: schedules, then `extra`."""
        found: list[tuple[str, dict[str, str], ScheduleProposal | None]]
        found = [(s.label, s.properties(), s) for s in self.schedules]
        return found + [(label, dict(properties), None) for label, properties in self.extra]

    def planned(self) -> list[tuple[str, Mapping[str, str], ScheduleProposal | None]]:
        """Every candidate the advice could run: the others, then the flat ones in the order the
        bisection asks for them (each row's middle first)."""
        knobs = self.knobs()
        orders = [bisection_order(row) for row in flat_rows(self.idle_timeouts, self.min_idle)]
        flat = [
            order[rank]
            for rank in range(max(map(len, orders), default=0))
            for order in orders
            if rank < len(order)
        ]
        return [*self.others(), *((label, knobs[label], None) for label in flat)]

    def start(
        self, runner: Runner, label: str, properties: Mapping[str, str], schedule: ScheduleProposal | None
    ) -> Started:
        """One candidate's run, started now: a whole installation's (`shared`) or the profile's alone."""
        if self.shared is not None and shares_state(properties):
            return self.shared(label, properties, schedule)
        return started(runner.submit(simulate, (self.jobs, Policy(label, properties), self.settings)))


def advise_profile(
    request: ProfileRequest, runner: Runner | None = None, runs: Mapping[str, Started] | None = None
) -> ProfileAdvice:
    """One profile's advice, its runs in `runner` (else in a pool of its own, `request.workers`).
    `runs`: every candidate of `request.planned()`, started already (whole_trace.py starts every
    profile's, the longest first); else they are started here. Every candidate the search could ask for
    is started before it asks for any; the search reads only those it asks for, and the rest are dropped,
    so the advice is the one-by-one search's."""
    r = request
    own = runner is None
    if runner is None:
        runner = Runner(r.workers, _reporting(r.profile, r.progress))
    try:
        base = r.baseline or runner.submit(simulate, (r.jobs, BASELINE, r.settings)).result
        if runs is None:
            runs = {label: r.start(runner, label, k, schedule) for label, k, schedule in r.planned()}
        knobs = r.knobs()
        others = r.others()
        asked = {label for label, _, _ in others}

        def run(labels: Sequence[str]) -> dict[str, PolicyResult]:
            asked.update(labels)
            return {label: runs[label].result() for label in labels}

        if r.exhaustive:
            found = SearchOutcome(run(list(knobs)), {})
        else:
            levels = _meets_levels(base, r.target, r.p95_target)
            found = search_flat(flat_rows(r.idle_timeouts, r.min_idle), levels, run)
        flat = [
            Candidate(label, knobs[label], found.results[label]) for label in knobs if label in found.results
        ]
        candidates = flat + [
            Candidate(label, k, runs[label].result(), schedule) for label, k, schedule in others
        ]
        baseline_result = base()
        for label, run_started in runs.items():
            if label not in asked:
                run_started.drop()
    finally:
        if own:
            runner.close()
    recommended, verdict = choose(candidates, baseline_result, r.target, r.p95_target, r.knee_gain)
    best_flat, _ = choose(flat, baseline_result, r.target, r.p95_target, r.knee_gain)
    return ProfileAdvice(
        r.profile,
        len(r.jobs),
        baseline_result,
        candidates,
        frontier(candidates),
        recommended,
        verdict == "met",
        best_flat,
        r.demand,
        r.p95_target,
        verdict,
        found.skipped,
        r.days,
        r.knee_gain,
    )


def _reporting(profile: str, progress: Callable[[str], None] | None) -> Callable[[PolicyResult], None]:
    def done(result: PolicyResult) -> None:
        if progress:
            progress(f"  {profile}: {result.policy}: {result.wall_s:.1f} s")

    return done


def _targets_text(target: float, p95_target: float | None, resend_s: float) -> str:
    parts = [f"a mean wait at most {target:.0%} of one pod per job's"]
    if p95_target is not None:
        parts.append(f"a p95 wait at most {p95_target:g} s")
    parts.append(f"no job waiting past the re-send period ({resend_s:g} s)")
    return ", ".join(parts)


def render(advice: ProfileAdvice, target: float, resend_s: float = 120.0) -> str:
    base = advice.baseline
    lines = [f"## profile {advice.profile} ({advice.jobs} jobs)", ""]
    if advice.demand is not None:
        lines += ["Demand by hour:", advice.demand.summary(), ""]
    lines += [
        f"one pod per job: mean wait {base.wait_mean:.1f} s, p95 {base.wait_p95:.1f} s, "
        f"{base.boot_pod_s_per_job + base.idle_pod_s_per_job:.1f} pod-s/job beyond the jobs "
        f"({advice.per_day(base, boot=True):.1f} pod-h/day), {advice.per_day(base):.1f} idle pod-h/day",
        "",
        "| setting | pods/job | mean wait | p95 wait | waited > re-send | idle pod-s/job | idle pod-h/day "
        "| idle+boot pod-s/job | idle+boot pod-h/day | registrations refused | frontier |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for c in sorted(advice.candidates, key=lambda c: c.cost):
        r = c.result
        mark = "*" if c in advice.frontier else ""
        lines.append(
            f"| {c.label} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.waited_past_resend} | {r.idle_pod_s_per_job:.1f} | {advice.per_day(r):.1f} | {c.cost:.1f} | "
            f"{advice.per_day(r, boot=True):.1f} | {r.registrations_refused} | {mark} |"
        )
    if advice.skipped:
        lines += ["", "Not run (they cannot be the recommendation; `--exhaustive` runs them):"]
        lines += [f"- {label}: {why}" for label, why in advice.skipped.items()]
    wanted = _targets_text(target, advice.p95_target, resend_s)
    if advice.verdict == "met":
        why = f"the cheapest candidate with {wanted}"
    elif advice.verdict == "p95 relaxed":
        relaxed = _targets_text(target, None, resend_s)
        why = f"no candidate reached a p95 wait of {advice.p95_target:g} s; the cheapest with {relaxed}"
    else:
        why = f"no candidate met {wanted}; this one is the frontier's knee, {rule_text(advice.knee_gain)}"
    rec, flat = advice.recommended, advice.best_flat
    idle = advice.per_day(rec.result)
    lines += [
        "",
        f"Recommended: {rec.label} ({why}).",
        f"It keeps {idle:.1f} pod-hours a day idle ({7 * idle:.1f} a week), "
        f"{advice.per_day(rec.result, boot=True):.1f} a day idle or booting.",
        "",
    ]
    if rec is not flat:
        lines += [
            "| | pods/job | mean wait | p95 wait | idle pod-s/job | idle pod-h/day | waited > re-send "
            "| registrations refused |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, c in (("best single setting: " + flat.label, flat), ("recommended: " + rec.label, rec)):
            r = c.result
            lines.append(
                f"| {name} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
                f"{r.idle_pod_s_per_job:.1f} | {advice.per_day(r):.1f} | {r.waited_past_resend} | "
                f"{r.registrations_refused} |"
            )
        lines.append("")
    else:
        lines += ["No schedule candidate did better than this single setting.", ""]
    if rec.schedule is not None:
        lines += ["Elastic profile properties:", ""]
        lines += [f"    {key}: {value}" for key, value in rec.properties.items()]
        lines.append("")
    return "\n".join(lines)


def summary(advices: Sequence[ProfileAdvice]) -> str:
    """Per profile, the best single setting against the recommendation, on one line each."""
    lines = [
        "## Summary: best single setting -> recommended",
        "",
        "| profile | best single setting | recommended | p95 wait | mean wait | idle pod-s/job "
        "| idle pod-h/day | idle pod-h/week | pods/job | registrations refused |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for a in advices:
        flat, rec = a.best_flat.result, a.recommended.result
        lines.append(
            f"| {a.profile} | {a.best_flat.label} | {a.recommended.label} | "
            f"{flat.wait_p95:.1f} -> {rec.wait_p95:.1f} s | {flat.wait_mean:.1f} -> {rec.wait_mean:.1f} s | "
            f"{flat.idle_pod_s_per_job:.0f} -> {rec.idle_pod_s_per_job:.0f} | "
            f"{a.per_day(flat):.1f} -> {a.per_day(rec):.1f} | "
            f"{7 * a.per_day(flat):.1f} -> {7 * a.per_day(rec):.1f} | "
            f"{flat.pods_per_job:.3f} -> {rec.pods_per_job:.3f} | "
            f"{flat.registrations_refused} -> {rec.registrations_refused} |"
        )
    return "\n".join(lines) + "\n"


def prediction_candidates(
    idle_timeouts: Sequence[str], how_many: int = 2
) -> list[tuple[str, dict[str, str]]]:
    """`Predict=true` with the cheapest flat IdleTimeouts: run like schedules, with no bound on their cost."""
    cheapest = sorted(idle_timeouts, key=parse_duration)[:how_many]
    return [
        (f"Predict=true IdleTimeout={t}", {"Reuse": "true", "Predict": "true", "IdleTimeout": t})
        for t in cheapest
    ]
