"""`python -m elastic_agent advise TRACE`: which IdleTimeout and MinIdlePods to give each profile.

For every profile of the trace, its jobs are replayed in the virtual-time simulator (profiles never share
pods, so each is simulated on its own) once with one pod per job (the baseline) and once per candidate
setting. Each candidate costs idle pod-seconds per job and buys wait. The frontier is the candidates no
other candidate beats on both; the recommendation is the cheapest candidate whose mean wait is at most
`target` times the baseline's (default a fifth) with no job waiting past the create-agent re-send period,
else the candidate with the shortest mean wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from elastic_agent.simulation.measures import PolicyResult
from elastic_agent.simulation.virtual_time import Policy, Run, SimSettings, simulate_all
from elastic_agent.simulation.workload import TraceJob, describe, load_trace

DEFAULT_IDLE_TIMEOUTS = ("2m", "5m", "10m", "20m")
DEFAULT_MIN_IDLE = (0, 1)


@dataclass(frozen=True)
class Candidate:
    idle_timeout: str
    min_idle_pods: int
    result: PolicyResult

    @property
    def label(self) -> str:
        return f"IdleTimeout={self.idle_timeout} MinIdlePods={self.min_idle_pods}"

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


def advise_profile(
    profile: str,
    jobs: Sequence[TraceJob],
    settings: SimSettings,
    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS,
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE,
    target: float = 0.2,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> ProfileAdvice:
    settings_of = [(timeout, warm) for timeout in idle_timeouts for warm in min_idle]
    runs: list[Run] = [(jobs, Policy("one pod per job", {"Reuse": "false"}), settings)]
    for timeout, warm in settings_of:
        knobs = {"Reuse": "true", "IdleTimeout": timeout, "MinIdlePods": str(warm)}
        runs.append((jobs, Policy(f"IdleTimeout={timeout} MinIdlePods={warm}", knobs), settings))

    def done(result: PolicyResult) -> None:
        if progress:
            progress(f"  {profile}: {result.policy}: {result.wall_s:.1f} s")

    baseline, *results = simulate_all(runs, workers, done)
    candidates = [
        Candidate(timeout, warm, result) for (timeout, warm), result in zip(settings_of, results, strict=True)
    ]
    good = [
        c
        for c in candidates
        if c.result.wait_mean <= target * baseline.wait_mean and c.result.waited_past_resend == 0
    ]
    if good:
        recommended = min(good, key=lambda c: (c.cost, c.result.wait_mean))
    else:
        recommended = min(candidates, key=lambda c: (c.result.wait_mean, c.cost))
    return ProfileAdvice(
        profile, len(jobs), baseline, candidates, frontier(candidates), recommended, bool(good)
    )


def render(advice: ProfileAdvice, target: float) -> str:
    base = advice.baseline
    lines = [
        f"## profile {advice.profile} ({advice.jobs} jobs)",
        f"one pod per job: mean wait {base.wait_mean:.1f} s, p95 {base.wait_p95:.1f} s, "
        f"{base.boot_pod_s_per_job + base.idle_pod_s_per_job:.1f} pod-s/job beyond the jobs",
        "",
        "| setting | pods/job | mean wait | p95 wait | waited > re-send | idle+boot pod-s/job | frontier |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for c in sorted(advice.candidates, key=lambda c: c.cost):
        r = c.result
        mark = "*" if c in advice.frontier else ""
        lines.append(
            f"| {c.label} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.waited_past_resend} | {c.cost:.1f} | {mark} |"
        )
    r = advice.recommended.result
    why = (
        f"the cheapest setting with a mean wait at most {target:.0%} of one pod per job's"
        if advice.met_target
        else f"no setting reached {target:.0%} of one pod per job's mean wait; this one waits least"
    )
    lines += [
        "",
        f"Recommended: {advice.recommended.label} ({why}): mean wait {r.wait_mean:.1f} s instead of "
        f"{base.wait_mean:.1f} s, {r.pods_per_job:.3f} pods per job, {advice.recommended.cost:.1f} pod-s "
        "per job beyond the jobs.",
        "",
    ]
    return "\n".join(lines)


def run_advisor(
    trace_path: str,
    *,
    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS,
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE,
    target: float = 0.2,
    seed: int = 1,
    max_jobs: int | None = None,
    out: Callable[[str], None] = print,
    workers: int = 1,
) -> int:
    trace = load_trace(trace_path)
    if max_jobs is not None:
        trace = trace[:max_jobs]
    if not trace:
        out("the trace has no jobs")
        return 1
    out(f"# Advice for {trace_path}\n\n{describe(trace)}\n")
    settings = SimSettings(seed=seed)
    for profile in sorted({job.profile for job in trace}):
        jobs = [job for job in trace if job.profile == profile]
        advice = advise_profile(profile, jobs, settings, idle_timeouts, min_idle, target, workers=workers)
        out(render(advice, target))
    out(
        "Cost is pod-seconds spent booting or idle per job; wait is from scheduling to assignment. "
        "Each profile was simulated alone with this trace's arrivals, pods booting in about "
        f"{settings.boot_median_s:g} s, agents polling every {settings.poll_interval_s:g} s."
    )
    return 0
