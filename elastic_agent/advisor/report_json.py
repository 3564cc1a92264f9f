"""The advice as one JSON document (`advise --json FILE`): every figure of the report, for scripts,
dashboards and the HTML report, which read it rather than the advice's objects.

Built from the advice values alone (no simulation runs here), so that every reader shows the same
numbers; docs/advisor.md, "--json", documents every key, and `SCHEMA_VERSION` changes when a key changes
meaning or goes. Figures are plain seconds and pod-hours, unrounded: rounding is a renderer's choice.
Every candidate row has the same keys (`ROW_KEYS`); a figure that does not exist is null, never absent.

`measured` is what the trace's own `waited` says of the judged jobs (null figures when the trace has
none); `current` is the policy the trace was recorded under (`--current`, by default one pod per job,
the policy of the official plugin), simulated on the judged days.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from elastic_agent.advisor.advise import BASELINE, Candidate, ProfileAdvice
from elastic_agent.advisor.current_policy import CurrentPolicy
from elastic_agent.advisor.followers import Following
from elastic_agent.advisor.holdout import Split
from elastic_agent.advisor.installation import shares_state
from elastic_agent.advisor.knee import rule_text
from elastic_agent.advisor.predict_report import predict_gains
from elastic_agent.advisor.together import TogetherRun
from elastic_agent.traces.measures import PolicyResult, percentile
from elastic_agent.traces.workload import TraceJob

SCHEMA_VERSION = 1
ROW_KEYS = (
    "label",
    "kind",
    "settings",
    "wait_mean_s",
    "wait_p95_s",
    "idle_pod_seconds_per_job",
    "boot_pod_seconds_per_job",
    "idle_pod_hours_per_day",
    "on_frontier",
    "recommended",
    "pods_per_job",
    "waited_past_resend",
    "registrations_refused",
    "idle_and_boot_pod_hours_per_day",
)
KINDS = ("flat", "warm_pool", "schedule", "predict", "baseline")


@dataclass(frozen=True)
class Context:
    """What the document says of the run besides the advice: the trace, its days and the targets."""

    path: str
    jobs: Sequence[TraceJob]
    origin: datetime
    split: Split
    target: float
    p95_target: float | None
    resend_s: float
    knee_gain: float
    current_policy: CurrentPolicy = field(default_factory=CurrentPolicy)
    current: Mapping[str, PolicyResult] = field(default_factory=dict)  # the baseline where not given


def kind(properties: Mapping[str, str], schedule: bool = False) -> str:
    """Which kind of candidate a setting is: a schedule, Predict, a warm pool, flat reuse, or none."""
    if schedule or properties.get("ReuseSchedule"):
        return "schedule"
    if properties.get("Predict", "").lower() == "true":
        return "predict"
    if shares_state(properties):
        return "warm_pool"
    return "flat" if properties.get("Reuse", "").lower() == "true" else "baseline"


def row(
    label: str,
    properties: Mapping[str, str],
    result: PolicyResult,
    days: float,
    *,
    schedule: bool = False,
    on_frontier: bool = False,
    recommended: bool = False,
) -> dict[str, Any]:
    return {
        "label": label,
        "kind": kind(properties, schedule),
        "settings": dict(properties),
        "wait_mean_s": result.wait_mean,
        "wait_p95_s": result.wait_p95,
        "idle_pod_seconds_per_job": result.idle_pod_s_per_job,
        "boot_pod_seconds_per_job": result.boot_pod_s_per_job,
        "idle_pod_hours_per_day": result.pod_hours_per_day(days),
        "on_frontier": on_frontier,
        "recommended": recommended,
        "pods_per_job": result.pods_per_job,
        "waited_past_resend": result.waited_past_resend,
        "registrations_refused": result.registrations_refused,
        "idle_and_boot_pod_hours_per_day": result.pod_hours_per_day(days, boot=True),
    }


def _candidate_row(advice: ProfileAdvice, c: Candidate) -> dict[str, Any]:
    return row(
        c.label,
        c.properties,
        c.result,
        advice.days,
        schedule=c.schedule is not None,
        on_frontier=c in advice.frontier,
        recommended=c is advice.recommended,
    )


def _waits(result: PolicyResult, days: float) -> dict[str, Any]:
    per_day = result.pod_hours_per_day(days)
    return {
        "wait_mean_s": result.wait_mean,
        "wait_p95_s": result.wait_p95,
        "idle_pod_hours_per_day": per_day,
        "idle_pod_hours_per_week": 7 * per_day,
    }


def measured(jobs: Sequence[TraceJob], split: Split, profile: str) -> dict[str, Any]:
    """The judged jobs' own waits, from the trace's `waited` (null figures when none carries one)."""
    judged = [job for job in jobs if job.profile == profile and (not split.split or job.at >= split.at)]
    waits = sorted(job.waited for job in judged if job.waited is not None)
    return {
        "jobs": len(judged),
        "jobs_with_waited": len(waits),
        "wait_mean_s": sum(waits) / len(waits) if waits else None,
        "wait_p95_s": percentile(waits, 0.95) if waits else None,
    }


def hourly(result: PolicyResult, origin: datetime, timezone: str) -> list[float | None]:
    """Mean wait by hour of the day in `timezone` (null for an hour in which no judged job came)."""
    zone = ZoneInfo(timezone)
    sums, counts = [0.0] * 24, [0] * 24
    for at, wait in result.waits_at:
        hour = (origin + timedelta(seconds=at)).astimezone(zone).hour
        sums[hour] += wait
        counts[hour] += 1
    return [s / n if n else None for s, n in zip(sums, counts, strict=True)]


def profile_document(advice: ProfileAdvice, context: Context, follow: Following | None) -> dict[str, Any]:
    rec = advice.recommended
    zone = context.split.timezone
    current = context.current.get(advice.profile, advice.baseline)
    rows = [row(BASELINE.name, BASELINE.elastic, advice.baseline, advice.days)]
    rows += [_candidate_row(advice, c) for c in sorted(advice.candidates, key=lambda c: c.cost)]
    return {
        "jobs": advice.jobs,
        "measured": measured(context.jobs, context.split, advice.profile),
        "current": {
            "policy": context.current_policy.describe(advice.profile),
            **_waits(current, advice.days),
        },
        "recommended": {
            "label": rec.label,
            "kind": kind(rec.properties, rec.schedule is not None),
            "settings": dict(rec.properties),
            "verdict": advice.verdict,
            **_waits(rec.result, advice.days),
        },
        "best_single_setting": {
            "label": advice.best_flat.label,
            **_waits(advice.best_flat.result, advice.days),
        },
        "candidates": rows,
        "skipped": dict(advice.skipped),
        "hourly": {
            "current": hourly(current, context.origin, zone),
            "recommended": hourly(rec.result, context.origin, zone),
        },
        "follows_another_stage": follow is not None and follow.followers > 0,
        "following": {
            "jobs": follow.jobs if follow else 0,
            "followers": follow.followers if follow else 0,
        },
        "predict": [
            {
                "label": gain.predict.label,
                "without": gain.without.label if gain.without else None,
                "wait_mean_saved_s": (
                    gain.without.result.wait_mean - gain.predict.result.wait_mean if gain.without else None
                ),
                "idle_pod_hours_per_day_added": (
                    advice.per_day(gain.predict.result) - advice.per_day(gain.without.result)
                    if gain.without
                    else None
                ),
            }
            for gain in predict_gains(advice)
        ],
    }


def document(
    advices: Sequence[ProfileAdvice],
    together: Sequence[TogetherRun],
    context: Context,
    following: Mapping[str, Following],
) -> dict[str, Any]:
    split = context.split
    days = split.days_judged
    return {
        "version": SCHEMA_VERSION,
        "trace": {
            "path": context.path,
            "jobs": len(context.jobs),
            "days": len(split.learned) + len(split.judged),
            "judged_days": len(split.judged),
            "judged_from_s": split.at,
            "timezone": split.timezone,
            "origin": context.origin.isoformat(),
        },
        "targets": {
            "mean_share_of_current": context.target,
            "p95_s": context.p95_target,
            "resend_s": context.resend_s,
        },
        "knee_rule": {
            "min_gain_s_per_pod_hour": context.knee_gain,
            "text": "When no candidate meets the targets, the recommendation is "
            f"{rule_text(context.knee_gain)}.",
        },
        "profiles": {a.profile: profile_document(a, context, following.get(a.profile)) for a in advices},
        "together": [
            {
                "server": run.title,
                "pods_per_job": run.result.pods_per_job,
                "wait_mean_s": run.result.wait_mean,
                "wait_p95_s": run.result.wait_p95,
                "idle_pod_seconds_per_job": run.result.idle_pod_s_per_job,
                "idle_pod_hours_per_day": run.result.pod_hours_per_day(days),
                "idle_pod_hours_per_week": 7 * run.result.pod_hours_per_day(days),
                "predicted_without_key": run.result.predicted_without_key,
                "registrations_refused": run.result.registrations_refused,
            }
            for run in together
        ],
    }


def write(path: str, doc: Mapping[str, Any]) -> None:
    """Write `doc`; a figure that is not a number (NaN, infinity) raises rather than write what JSON
    does not allow."""
    with open(path, "w", encoding="utf-8") as out:
        json.dump(doc, out, indent=2, allow_nan=False)
        out.write("\n")
