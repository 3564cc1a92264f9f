"""`python -m elastic_agent advise TRACE`: which IdleTimeout and MinIdlePods, or which `ReuseSchedule`,
to give each profile.

For every profile of the trace, its jobs are replayed in the virtual-time simulator (profiles never share
pods, so each is simulated on its own) once with one pod per job (the baseline), once per flat candidate
(IdleTimeout x MinIdlePods, day and night) and once per schedule candidate (schedule_advice.py: warm pods
and a longer IdleTimeout in the hours where demand is high, the cheap values outside). The simulator's
clock starts at the trace's origin, so the schedules' cron periods fall on the trace's hours. Each
candidate costs pod-seconds beyond the jobs (idle plus boot) and buys wait. The frontier is the
candidates no other candidate beats on both; the recommendation is the cheapest candidate whose mean
wait is at most `target` times the baseline's, whose p95 wait is at most `p95_target` (when given) and
under which no job waits past the create-agent re-send period; else the candidate with the shortest
wait (p95 when a p95 target is given, else mean). The best single setting is chosen by the same rule
among the flat candidates alone, and the two are shown side by side. Schedules are proposed from the
trace's first days and every candidate is judged on the remaining ones (holdout.py).

The advisor's one module that imports the simulator; `command.py` imports it only when `advise` runs,
so that building the command line (for `serve` too) loads no simulation module.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from elastic_agent.advisor.holdout import split_trace
from elastic_agent.advisor.runner import Runner
from elastic_agent.advisor.search import SearchOutcome, search_flat
from elastic_agent.progress import Progress, progress_bar
from elastic_agent.simulation.virtual_time import Policy, SimSettings, simulate, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.schedule_advice import Demand, ScheduleProposal, analyse, propose
from elastic_agent.traces.workload import TraceJob, describe, read_trace
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
    candidates: Sequence[Candidate], baseline: PolicyResult, target: float, p95_target: float | None
) -> tuple[Candidate, str]:
    """The cheapest candidate meeting every wait target ("met"); else, when the p95 target is what no
    candidate reaches, the cheapest meeting the others ("p95 relaxed": a few seconds of p95 are not
    worth any price); else the one that waits least ("missed")."""

    for p95, verdict in ((p95_target, "met"), (None, "p95 relaxed")):
        good = [c for c in candidates if meets(c.result, baseline, target, p95)]
        if good:
            return min(good, key=lambda c: (c.cost, c.result.wait_mean)), verdict
    if p95_target is not None:
        return min(candidates, key=lambda c: (c.result.wait_p95, c.result.wait_mean, c.cost)), "missed"
    return min(candidates, key=lambda c: (c.result.wait_mean, c.cost)), "missed"


BASELINE = Policy("one pod per job", {"Reuse": "false"})


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


def advise_profile(
    profile: str,
    jobs: Sequence[TraceJob],
    settings: SimSettings,
    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS,
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE,
    target: float = 0.2,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    *,
    schedules: Sequence[ScheduleProposal] = (),
    p95_target: float | None = None,
    demand: Demand | None = None,
    baseline: Callable[[], PolicyResult] | None = None,
    runner: Runner | None = None,
    exhaustive: bool = False,
    extra: Sequence[tuple[str, Mapping[str, str]]] = (),
) -> ProfileAdvice:
    """One profile's advice. `baseline`: gives its one-pod-per-job figures, waiting for them if they are
    under way (else they are run here on its jobs alone); `exhaustive`: run every flat candidate rather
    than search.py's few; `extra`: more candidates, always run as schedules are (prediction_candidates)."""
    own = runner is None
    if runner is None:
        runner = Runner(workers, _reporting(profile, progress))
    try:
        base = baseline or runner.submit(simulate, (jobs, BASELINE, settings)).result
        knobs = {
            flat_label(t, w): {"Reuse": "true", "IdleTimeout": t, "MinIdlePods": str(w)}
            for t in idle_timeouts
            for w in min_idle
        }
        others: list[tuple[str, dict[str, str], ScheduleProposal | None]]
        others = [(s.label, s.properties(), s) for s in schedules]
        others += [(label, dict(properties), None) for label, properties in extra]
        # Candidates with no exact bound on their cost are always run, side by side with the search.
        other_runs = [runner.submit(simulate, (jobs, Policy(label, k), settings)) for label, k, _ in others]

        def run(labels: Sequence[str]) -> dict[str, PolicyResult]:
            runs = [(jobs, Policy(label, knobs[label]), settings) for label in labels]
            done = runner.run_all(simulate, runs)
            return dict(zip(labels, done, strict=True))

        if exhaustive:
            found = SearchOutcome(run(list(knobs)), {})
        else:
            levels = _meets_levels(base, target, p95_target)
            found = search_flat(flat_rows(idle_timeouts, min_idle), levels, run)
        flat = [
            Candidate(label, knobs[label], found.results[label]) for label in knobs if label in found.results
        ]
        candidates = flat + [
            Candidate(label, k, future.result(), schedule)
            for (label, k, schedule), future in zip(others, other_runs, strict=True)
        ]
        baseline_result = base()
    finally:
        if own:
            runner.close()
    recommended, verdict = choose(candidates, baseline_result, target, p95_target)
    best_flat, _ = choose(flat, baseline_result, target, p95_target)
    return ProfileAdvice(
        profile,
        len(jobs),
        baseline_result,
        candidates,
        frontier(candidates),
        recommended,
        verdict == "met",
        best_flat,
        demand,
        p95_target,
        verdict,
        found.skipped,
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
        f"{base.boot_pod_s_per_job + base.idle_pod_s_per_job:.1f} pod-s/job beyond the jobs",
        "",
        "| setting | pods/job | mean wait | p95 wait | waited > re-send | idle pod-s/job "
        "| idle+boot pod-s/job | registrations refused | frontier |",
        "|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for c in sorted(advice.candidates, key=lambda c: c.cost):
        r = c.result
        mark = "*" if c in advice.frontier else ""
        lines.append(
            f"| {c.label} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.waited_past_resend} | {r.idle_pod_s_per_job:.1f} | {c.cost:.1f} | {r.registrations_refused} "
            f"| {mark} |"
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
        why = f"no candidate met {wanted}; this one waits least"
    rec, flat = advice.recommended, advice.best_flat
    lines += ["", f"Recommended: {rec.label} ({why}).", ""]
    if rec is not flat:
        lines += [
            "| | pods/job | mean wait | p95 wait | idle pod-s/job | waited > re-send "
            "| registrations refused |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, c in (("best single setting: " + flat.label, flat), ("recommended: " + rec.label, rec)):
            r = c.result
            lines.append(
                f"| {name} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
                f"{r.idle_pod_s_per_job:.1f} | {r.waited_past_resend} | {r.registrations_refused} |"
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
        "| profile | best single setting | recommended | p95 wait | mean wait | idle pod-s/job | pods/job "
        "| registrations refused |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for a in advices:
        flat, rec = a.best_flat.result, a.recommended.result
        lines.append(
            f"| {a.profile} | {a.best_flat.label} | {a.recommended.label} | "
            f"{flat.wait_p95:.1f} -> {rec.wait_p95:.1f} s | {flat.wait_mean:.1f} -> {rec.wait_mean:.1f} s | "
            f"{flat.idle_pod_s_per_job:.0f} -> {rec.idle_pod_s_per_job:.0f} | "
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


def run_advisor(
    trace_path: str,
    *,
    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS,
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE,
    target: float = 0.2,
    p95_target: float | None = None,
    schedules: ScheduleOptions = ScheduleOptions(),
    seed: int = 1,
    pending_pods: int = 100,
    max_jobs: int | None = None,
    out: Callable[[str], None] = print,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    learn_days: int | None = None,
    exhaustive: bool = False,
    bar: bool = False,
    prediction: bool = True,
) -> int:
    """`bar`: a progress bar on stderr (tqdm), counting simulations."""
    trace = read_trace(trace_path)
    jobs_all = trace.jobs if max_jobs is None else trace.jobs[:max_jobs]
    if not jobs_all:
        out("the trace has no jobs")
        return 1
    assumed = "" if trace.origin_given else " (the trace gives none: assumed)"
    out(f"# Advice for {trace_path}\n\n{describe(jobs_all)}; time 0 is {trace.origin.isoformat()}{assumed}\n")
    split = split_trace(jobs_all, trace.origin, schedules.timezone, learn_days)
    out(split.describe(jobs_all) + "\n")
    settings = SimSettings(
        seed=seed, pending_pods_count=pending_pods, start=trace.start, judged_from_s=split.at
    )
    by_profile: dict[str, list[TraceJob]] = {}
    for job in jobs_all:
        by_profile.setdefault(job.profile, []).append(job)
    profiles = sorted(by_profile)
    # Schedules learn on the learning days only; every candidate is judged on the rest (holdout.py).
    proposals = {
        p: _schedules(split.learning(by_profile[p]), trace.origin, settings, schedules) for p in profiles
    }
    extra = prediction_candidates(idle_timeouts) if prediction else []
    most = 1 + sum(len(idle_timeouts) * len(min_idle) + len(proposals[p][1]) + len(extra) for p in profiles)
    shown = progress_bar(most, bar)
    try:
        runner = Runner(workers, _counting(shown, progress))
        try:
            # One pod per job shares nothing between profiles: one run of the whole trace is every
            # profile's baseline.
            baselines = runner.submit(simulate_by_profile, (jobs_all, BASELINE, settings))

            def advise(profile: str) -> ProfileAdvice:
                demand, proposed = proposals[profile]
                advice = advise_profile(
                    profile,
                    by_profile[profile],
                    settings,
                    idle_timeouts,
                    min_idle,
                    target,
                    schedules=proposed,
                    p95_target=p95_target,
                    demand=demand,
                    baseline=lambda: baselines.result()[profile],
                    runner=runner,
                    exhaustive=exhaustive,
                    extra=extra,
                )
                if advice.skipped and shown.total is not None:
                    shown.total -= len(advice.skipped)
                    shown.refresh()
                return advice

            # Each profile's search waits on its own runs: side by side, they keep the workers busy.
            with concurrent.futures.ThreadPoolExecutor(max(1, min(workers, len(profiles)))) as threads:
                advices = list(threads.map(advise, profiles))
        finally:
            runner.close()
    finally:
        shown.close()
    for advice in advices:
        out(render(advice, target, settings.resend_s))
    out(summary(advices))
    out(
        "Cost is pod-seconds spent booting or idle per job; wait is from scheduling to assignment. "
        "Each profile was simulated alone with this trace's arrivals (one pod per job: the whole trace at "
        "once, its figures split by profile), pods booting in about "
        f"{settings.boot_median_s:g} s, {settings.polling()}."
    )
    return 0


def _schedules(
    jobs: Sequence[TraceJob], origin: datetime, settings: SimSettings, options: ScheduleOptions
) -> tuple[Demand | None, list[ScheduleProposal]]:
    if not options.enabled:
        return None, []
    demand = analyse(
        jobs,
        origin,
        options.timezone,
        refill_window_s=settings.boot_median_s + settings.ping_s,
        busy_share=options.busy_share,
    )
    proposals = propose(
        demand,
        quantiles=options.quantiles,
        busy_idle_timeouts=options.busy_idle_timeouts,
        plain_idle_timeouts=options.plain_idle_timeouts,
    )
    return demand, list(proposals)


def _counting(shown: Progress, progress: Callable[[str], None] | None) -> Callable[[PolicyResult], None]:
    def done(result: PolicyResult) -> None:
        shown.update(1)
        if progress:
            progress(f"  {result.policy}: {result.wall_s:.1f} s")

    return done
