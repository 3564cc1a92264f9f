"""The advice's section on pod start-up: per profile, what its jobs waited in the trace beside what the
simulator gives under the policy the trace was recorded under, the start-up every candidate is simulated
with, and, where the two differ by more than 20 % or nothing was measured, what that means for the advice;
and the current policy simulated on the judged days, when it is not one pod per job.

Words only: the figures are calibration.py's, so that a JSON or HTML report can take the same values.
"""

from __future__ import annotations

from collections.abc import Mapping

from elastic_agent.advisor.calibration import ASSUMED, DIFFERS, GIVEN, Calibration, ProfileCalibration
from elastic_agent.advisor.current_policy import CurrentPolicy
from elastic_agent.simulation.run_settings import PodStart
from elastic_agent.traces.measures import PolicyResult


def render_calibration(calibration: Calibration) -> str:
    profiles = [calibration.profiles[name] for name in sorted(calibration.profiles)]
    policy = calibration.current
    lines = [
        "## Pod start-up, calibrated on the trace's waits",
        "",
        f"The trace was recorded under: {policy.describe()} (`--current`)."
        + "".join(f" {name}: {policy.describe(name)}." for name in sorted(policy.per_profile)),
        "Measured: what the trace's jobs waited (scheduled to assigned); simulated current: the simulator "
        "replaying that policy with the pod start-up shown, on every job of the trace. Every candidate "
        'below is simulated with that start-up (docs/advisor.md, "Calibration").',
        "",
        "| profile | jobs measured | mean wait measured | simulated | p95 wait measured | simulated "
        "| pod start-up | from |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for c in profiles:
        m, s = c.measured, c.current
        lines.append(
            f"| {c.profile} | {m.jobs if m else 0} | {_s(m.wait_mean_s) if m else '-'} | {_s(s.wait_mean_s)} "
            f"| {_s(m.wait_p95_s) if m else '-'} | {_s(s.wait_p95_s)} | {describe_start(c.pod_start)} "
            f"| {_source(c)} |"
        )
    notes = [note for note in map(meaning, profiles) if note]
    if notes:
        lines += [
            "",
            f"Where measured and simulated differ by more than {DIFFERS:.0%}, or nothing was measured:",
        ]
        lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def render_current(policy: CurrentPolicy, current: Mapping[str, PolicyResult], days: float) -> str:
    """The policy the trace was recorded under, simulated on the judged days like every candidate: the
    figures each recommendation is to be compared with when that policy is not one pod per job."""
    lines = [
        "## The current policy, simulated",
        "",
        "The policy the trace was recorded under (`--current`), simulated on the judged days with the "
        "calibrated pod start-up, as every candidate was: what a recommendation changes.",
        "",
        "| profile | policy | mean wait | p95 wait | idle pod-hours a day | a week |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in sorted(current):
        result = current[name]
        per_day = result.pod_hours_per_day(days)
        lines.append(
            f"| {name} | {policy.describe(name)} | {_s(result.wait_mean)} | {_s(result.wait_p95)} "
            f"| {per_day:.1f} | {7 * per_day:.1f} |"
        )
    return "\n".join(lines) + "\n"


def describe_start(start: PodStart) -> str:
    text = f"median {start.median_s:.0f} s, sigma {start.sigma:.2f}"
    if start.by_hour:
        low, high = min(start.by_hour), max(start.by_hour)
        text += f" (by hour, {start.timezone}: {low:.0f} to {high:.0f} s)"
    return text


def _source(c: ProfileCalibration) -> str:
    if c.source == GIVEN:
        return "--pod-start"
    if c.source == ASSUMED:
        return "assumed"
    spread = "" if c.spread_fitted else ", spread assumed"
    return f"fitted in {c.runs} runs{spread}" + ("" if c.converged else " (not converged)")


def meaning(c: ProfileCalibration) -> str:
    """What the advice must be read with for this profile: nothing when measured and simulated agree."""
    start = f"about {c.pod_start.median_s:.0f} s (sigma {c.pod_start.sigma:.2f})"
    if c.measured is None:
        return (
            f"{c.profile}: the trace has no measured waits (`waited`, which `python -m elastic_agent trace` "
            f"writes), so pods are assumed to start in {start}. If yours start slower, every wait below is "
            "understated, and so is what reuse saves; give `--pod-start`, or trace your GoCD server."
        )
    differences = c.differences()
    if c.source == ASSUMED:
        return (
            f"{c.profile}: only {c.measured.jobs} jobs with a measured wait, too few to calibrate on: pods "
            f"are assumed to start in {start}."
        )
    if differences is None or not c.differs:
        return ""
    mean, p95 = differences
    worst = mean if abs(mean) >= abs(p95) else p95
    which = "mean" if worst is mean else "p95"
    given = c.source == GIVEN
    why = "with the start-up `--pod-start` gives" if given else f"after {c.runs} calibration runs"
    if worst < 0:
        cause = (
            "Pods that start slower than `--pod-start` says would do this."
            if given
            else "Waits that are not pod starts (jobs queueing for capacity the simulator does not model, "
            "static agents, a `--current` that reuses more than the installation did) would do this."
        )
        return (
            f"{c.profile}: simulated current waits {-worst:.0%} less than measured ({which}) {why}: the "
            "advice understates every candidate's waits and what avoiding a pod start saves. " + cause
        )
    cause = (
        "Pods that start faster than `--pod-start` says would do this."
        if given
        else "Pods that start faster than the simulator's GoCD overheads allow (check `--assignment-tick`), "
        "or a `--current` that reuses less than the installation did, would do this."
    )
    return (
        f"{c.profile}: simulated current waits {worst:.0%} more than measured ({which}) {why}: the advice "
        "overstates every candidate's waits and what reuse saves. " + cause
    )


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s"
