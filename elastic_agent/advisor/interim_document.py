"""A stand-in for the report document that `advise --json` builds (report_json.py): enough of the same
shape, made from the advice as it is, for `--html` to draw (report_html.py takes the document, not the
advisor's objects). Meant to be replaced by report_json's builder, whole, once that exists.

What it cannot know yet, it says so rather than invents: no measured waits (the trace's `waited` is not
read), "current" is one pod per job (the policy the advisor assumes a trace was recorded under), and the
recommendation rule is today's (the cheapest candidate meeting the targets, else the one that waits
least). Idle pod-hours per day are the candidate's idle pod-seconds over the judged days.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from elastic_agent.advisor.advise import Candidate, ProfileAdvice
from elastic_agent.advisor.holdout import DAY_S, Split
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob

RULE = "the cheapest candidate that meets every wait target; when none does, the one that waits least"


def interim_document(
    path: str,
    jobs: Sequence[TraceJob],
    advices: Sequence[ProfileAdvice],
    origin: datetime,
    split: Split,
    targets: tuple[float, float | None],
) -> dict[str, Any]:
    judged_days = max(jobs[-1].at - split.at, 3600.0) / DAY_S  # an hour at least: no division by ~0
    zone = ZoneInfo(split.timezone)

    def figures(result: PolicyResult) -> dict[str, float]:
        return {
            "wait_mean_s": result.wait_mean,
            "wait_p95_s": result.wait_p95,
            "idle_pod_hours_per_day": result.idle_pod_s / 3600 / judged_days,
        }

    def hourly(result: PolicyResult) -> list[float | None]:
        by_hour: list[list[float]] = [[] for _ in range(24)]
        for at, wait in result.waits_at:
            by_hour[(origin + timedelta(seconds=at)).astimezone(zone).hour].append(wait)
        return [sum(waits) / len(waits) if waits else None for waits in by_hour]

    def row(
        advice: ProfileAdvice, label: str, kind: str, properties: dict[str, str], r: PolicyResult
    ) -> dict[str, Any]:
        return {
            "label": label,
            "kind": kind,
            "settings": properties,
            **figures(r),
            "idle_pod_seconds_per_job": r.idle_pod_s_per_job,
            "boot_pod_seconds_per_job": r.boot_pod_s_per_job,
            "on_frontier": any(c.label == label for c in advice.frontier),
            "recommended": advice.recommended.label == label,
        }

    follows = _following(jobs)
    profiles = {}
    for a in advices:
        rows = [row(a, "one pod per job", "baseline", {"Reuse": "false"}, a.baseline)]
        rows += [
            row(a, c.label, _kind(c), dict(c.properties), c.result)
            for c in sorted(a.candidates, key=lambda c: c.cost)
        ]
        profiles[a.profile] = {
            "measured": {"jobs": a.jobs, "wait_mean_s": None, "wait_p95_s": None},
            "current": figures(a.baseline),
            "recommended": {"settings": dict(a.recommended.properties), **figures(a.recommended.result)},
            "follows_another_stage": a.profile in follows,
            "hourly": {"current": hourly(a.baseline), "recommended": hourly(a.recommended.result)},
            "candidates": rows,
        }
    target, p95 = targets
    return {
        "version": 1,
        "trace": {
            "path": path,
            "jobs": len(jobs),
            "days": (jobs[-1].at - jobs[0].at) / DAY_S,
            "timezone": split.timezone,
        },
        "targets": {"mean_wait_share_of_one_pod_per_job": target, "p95_wait_s": p95},
        "knee_rule": RULE,
        "profiles": profiles,
    }


def _kind(candidate: Candidate) -> str:
    if candidate.schedule is not None:
        return "schedule"
    if candidate.properties.get("Predict") == "true":
        return "predict"
    return "warm_pool" if int(candidate.properties.get("MinIdlePods", "0")) > 0 else "flat"


def _following(jobs: Sequence[TraceJob]) -> set[str]:
    """The profiles with jobs in a stage other than the first of their pipeline's run."""
    first: dict[tuple[str, int | None], str] = {}
    for job in jobs:  # in the order they arrived
        first.setdefault((job.pipeline, job.pipeline_counter), job.stage)
    return {job.profile for job in jobs if job.stage != first[(job.pipeline, job.pipeline_counter)]}
