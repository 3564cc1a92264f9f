"""The warm-start targets, judged on measured rows: what benchmarks/warm_targets.py checks, apart from the
simulations that measure the rows, so that the rules themselves can be tested on made-up rows.

Every judgement uses rows that were measured, never a curve drawn between them: a Predict row stands for
an idle level only when it idles no more than that level. The targets (all on the same trace and server):
- dominance: for every flat IdleTimeout row and every MinIdlePods-alone row whose idle pod-seconds per
  job lie between the reference's (flat IdleTimeout 10m) and `DOMINANCE_SPAN` times it, some Predict row
  idling no more has a lower mean and a lower p95 wait;
- the knee: a Predict row with a mean within `KNEE_MEAN_OVER_FLOOR_S` of the floor's and a p95 of at
  most `KNEE_P95_S`, idling at most `KNEE_IDLE_SPAN` times the reference;
- half: a Predict row idling no more than the reference with at most half its mean wait;
- no registration refused in any row.
When the knee is missed, `knee_shortfall` says where its mean goes: the jobs that waited for a pod to
boot against those that found one, since the floor (a warm pool that never runs dry) shows what the
second kind costs on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elastic_agent.traces.measures import PolicyResult

DOMINANCE_SPAN = 3.0
KNEE_MEAN_OVER_FLOOR_S, KNEE_P95_S, KNEE_IDLE_SPAN = 1.5, 10.0, 2.0
HALF = 0.5
TARGETS = ("dominance", "knee", "half", "refusals")
# A job that waited longer than this waited for a pod to boot: an existing pod takes a job within the
# assignment tick and the agent's longest get-work back-off (10 s), while a boot takes 5 s at the
# very least and about 25 s typically (SimSettings.boot_median_s).
BOOT_WAIT_S = 12.0


@dataclass(frozen=True)
class Verdict:
    name: str  # the target: one of TARGETS
    row: str  # what was judged: the target, or for dominance the baseline row
    met: bool
    says: str

    def line(self) -> str:
        return f"- {self.row}: {'met' if self.met else 'MISSED'}. {self.says}"


def describe(r: PolicyResult) -> str:
    return f"{r.policy} ({r.wait_mean:.2f} s mean, {r.wait_p95:.1f} s p95, {r.idle_pod_s_per_job:.0f} idle)"


def beats(a: PolicyResult, b: PolicyResult) -> bool:
    """`a` waits less than `b` on both the mean and the p95."""
    return a.wait_mean < b.wait_mean and a.wait_p95 < b.wait_p95


def dominance(
    reference: PolicyResult, baselines: Sequence[PolicyResult], predicted: Sequence[PolicyResult]
) -> list[Verdict]:
    """One verdict per baseline row within the idle span; rows outside it are not judged."""
    low = reference.idle_pod_s_per_job
    high = DOMINANCE_SPAN * low
    verdicts = []
    for row in sorted(baselines, key=lambda r: r.idle_pod_s_per_job):
        idle = row.idle_pod_s_per_job
        if not low <= idle <= high:
            continue
        cheaper = [p for p in predicted if p.idle_pod_s_per_job <= idle]
        winners = sorted((p for p in cheaper if beats(p, row)), key=lambda p: p.wait_mean)
        if winners:
            says = f"{describe(winners[0])} beats {describe(row)}"
        elif cheaper:
            nearest = max(cheaper, key=lambda p: p.idle_pod_s_per_job)
            says = f"no Predict row idling {idle:.0f} or less beats {describe(row)}; nearest: "
            says += describe(nearest)
        else:
            says = f"no Predict row idles {idle:.0f} or less ({describe(row)})"
        verdicts.append(Verdict("dominance", f"dominance at {row.policy}", bool(winners), says))
    return verdicts


def knee(floor: PolicyResult, reference: PolicyResult, predicted: Sequence[PolicyResult]) -> Verdict:
    mean_bound = floor.wait_mean + KNEE_MEAN_OVER_FLOOR_S
    idle_bound = KNEE_IDLE_SPAN * reference.idle_pod_s_per_job
    bounds = f"mean <= {mean_bound:.2f} s, p95 <= {KNEE_P95_S:.0f} s, idle <= {idle_bound:.0f}"
    meeting = [
        p
        for p in predicted
        if p.wait_mean <= mean_bound and p.wait_p95 <= KNEE_P95_S and p.idle_pod_s_per_job <= idle_bound
    ]
    if meeting:
        cheapest = min(meeting, key=lambda p: p.idle_pod_s_per_job)
        return Verdict("knee", "the knee", True, f"{bounds}: {describe(cheapest)}")
    within = [p for p in predicted if p.idle_pod_s_per_job <= idle_bound]
    says = f"{bounds}: no Predict row meets all three."
    if within:
        best = min(within, key=lambda p: p.wait_mean)
        says += (
            f" Lowest mean within the idle bound: {describe(best)}, {best.wait_mean - mean_bound:.2f} s over."
        )
    waits_met = [p for p in predicted if p.wait_mean <= mean_bound and p.wait_p95 <= KNEE_P95_S]
    if waits_met:
        says += (
            f" Cheapest meeting the waits: {describe(min(waits_met, key=lambda p: p.idle_pod_s_per_job))}."
        )
    return Verdict("knee", "the knee", False, says)


def half(reference: PolicyResult, predicted: Sequence[PolicyResult]) -> Verdict:
    bound, idle = HALF * reference.wait_mean, reference.idle_pod_s_per_job
    within = [p for p in predicted if p.idle_pod_s_per_job <= idle]
    lead = f"mean <= {bound:.2f} s (half of {reference.wait_mean:.2f} s) at idle <= {idle:.0f}"
    if not within:
        return Verdict("half", "half at flat 10m's idle", False, f"{lead}: no Predict row idles that little")
    best = min(within, key=lambda p: p.wait_mean)
    return Verdict("half", "half at flat 10m's idle", best.wait_mean <= bound, f"{lead}: {describe(best)}")


def refusals(rows: Sequence[PolicyResult]) -> Verdict:
    refused = {r.policy: r.registrations_refused for r in rows if r.registrations_refused}
    says = "no row had a registration refused" if not refused else f"refused: {refused}"
    return Verdict("refusals", "0 registrations refused", not refused, says)


@dataclass(frozen=True)
class WaitSplit:
    """A row's mean wait, split by whether a job waited for a boot (`BOOT_WAIT_S`)."""

    jobs: int
    booted: int
    from_boots_s: float  # the booted jobs' share of the mean: their waits summed over every job
    from_the_rest_s: float


def split_waits(r: PolicyResult) -> WaitSplit:
    waits = r.waits
    jobs = max(1, len(waits))
    booted = [w for w in waits if w > BOOT_WAIT_S]
    rest = sum(w for w in waits if w <= BOOT_WAIT_S)
    return WaitSplit(len(waits), len(booted), sum(booted) / jobs, rest / jobs)


def knee_shortfall(
    floor: PolicyResult, reference: PolicyResult, predicted: Sequence[PolicyResult]
) -> list[str]:
    """Why no row reaches the knee: the mean of the best rows within its idle bound, split into the
    jobs that waited for a boot and the rest, beside the floor's."""
    idle_bound = KNEE_IDLE_SPAN * reference.idle_pod_s_per_job
    within = sorted((p for p in predicted if p.idle_pod_s_per_job <= idle_bound), key=lambda p: p.wait_mean)[
        :3
    ]
    lines = [
        f"| row | idle pod-s/job | mean | jobs that waited > {BOOT_WAIT_S:g} s (a boot) | their share of the "
        "mean | the rest's share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in [floor, *within]:
        split = split_waits(r)
        booted = f"{split.booted} of {split.jobs} ({split.booted / max(1, split.jobs):.1%})"
        lines.append(
            f"| {r.policy} | {r.idle_pod_s_per_job:.0f} | {r.wait_mean:.2f} s | {booted} | "
            f"{split.from_boots_s:.2f} s | {split.from_the_rest_s:.2f} s |"
        )
    return lines
