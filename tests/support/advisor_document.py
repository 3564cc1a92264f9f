"""Advisor report documents built by hand, in the shape `advise --json` writes
(elastic_agent/advisor/report_json.py: `document`, `profile_document`, `row`), for the tests of the HTML
report (elastic_agent/advisor/report_html.py), which takes such a document and nothing else. They hold a
part of a real document's keys and no key of their own: tests/scenarios/test_advisor_json.py compares
them with one the command wrote (`key_paths`).

The figures are made up but shaped like a real run's: waits fall as idle pod-hours rise, warm pools and
Predict sit between the cheap flat settings and the costly schedules, and the hours of the night have no
jobs (null). Every kind of candidate appears, so every marker of the legend is drawn. `sections` reads a
rendered page back, per profile.
"""

from __future__ import annotations

import re
from typing import Any

SCHEDULE = "busy IdleTimeout=60m warm pool p50, else IdleTimeout=2m"
CANDIDATES: list[tuple[str, str, dict[str, str], float, float, float]] = [
    # label, kind, settings, mean wait, p95 wait, idle pod-s per job
    ("one pod per job", "baseline", {"Reuse": "false"}, 31.0, 48.0, 0.0),
    ("IdleTimeout=2m MinIdlePods=0", "flat", {"IdleTimeout": "2m"}, 14.0, 40.0, 35.0),
    ("IdleTimeout=10m MinIdlePods=0", "flat", {"IdleTimeout": "10m"}, 9.5, 33.0, 120.0),
    (
        "IdleTimeout=2m MinIdlePods=1",
        "warm_pool",
        {"IdleTimeout": "2m", "MinIdlePods": "1"},
        8.0,
        31.0,
        210.0,
    ),
    ("IdleTimeout=10m MinIdlePods=1", "warm_pool", {"IdleTimeout": "10m", "MinIdlePods": "1"}, 7.9, 30, 330),
    ("Predict=true IdleTimeout=2m", "predict", {"Predict": "true", "IdleTimeout": "2m"}, 6.1, 27.0, 140.0),
    (SCHEDULE, "schedule", {"ReuseSchedule": "0 8 * * 1-5 IdleTimeout=60m MinIdlePods=3"}, 4.0, 18.0, 900.0),
]
RECOMMENDED = "Predict=true IdleTimeout=2m"
ON_FRONTIER = ("one pod per job", "IdleTimeout=2m MinIdlePods=0", "IdleTimeout=10m MinIdlePods=0")
FRONTIER = {*ON_FRONTIER, RECOMMENDED, SCHEDULE}
JOBS_PER_DAY = 1000.0


def hours_per_day(idle_s_per_job: float, scale: float = 1.0) -> float:
    return idle_s_per_job * JOBS_PER_DAY * scale / 3600


def profile(scale: float = 1.0, follows: bool = False) -> dict[str, Any]:
    """One profile's part; `scale` stretches its waits and costs, so that two profiles differ."""
    rows = [
        {
            "label": label,
            "kind": kind,
            "settings": settings,
            "wait_mean_s": mean * scale,
            "wait_p95_s": p95 * scale,
            "idle_pod_seconds_per_job": idle * scale,
            "boot_pod_seconds_per_job": 25.0 if kind == "baseline" else 6.0,
            "idle_pod_hours_per_day": hours_per_day(idle, scale),
            "on_frontier": label in FRONTIER,
            "recommended": label == RECOMMENDED,
        }
        for label, kind, settings, mean, p95, idle in CANDIDATES
    ]
    chosen = next(row for row in rows if row["recommended"])
    baseline = rows[0]
    day = [None] * 6 + [10.0 + hour for hour in range(14)] + [None] * 4
    return {
        "measured": {"jobs": 7000, "wait_mean_s": 33.5 * scale, "wait_p95_s": 51.0 * scale},
        "current": {
            "policy": "one pod per job, the official plugin's way",
            **{key: baseline[key] for key in ("wait_mean_s", "wait_p95_s", "idle_pod_hours_per_day")},
        },
        "recommended": {
            "settings": chosen["settings"],
            **{key: chosen[key] for key in ("wait_mean_s", "wait_p95_s", "idle_pod_hours_per_day")},
        },
        "follows_another_stage": follows,
        "hourly": {
            "current": [None if w is None else w * scale * 2 for w in day],
            "recommended": [None if w is None else w * scale * 0.4 for w in day],
        },
        "candidates": rows,
    }


def document(names: tuple[str, ...] = ("java", "big-memory")) -> dict[str, Any]:
    """A whole report document with one profile per name (the second follows another stage)."""
    return {
        "version": 1,
        "trace": {"path": "week.jsonl", "jobs": 7000 * len(names), "days": 7.0},
        # The shapes report_json.document writes.
        "targets": {"mean_share_of_current": 0.2, "p95_s": 10.0, "resend_s": 120.0},
        "knee_rule": {
            "min_gain_s_per_pod_hour": 60.0,
            "text": "When no candidate meets the targets, the recommendation is the cheapest point of the "
            "frontier from which no costlier point saves at least 60 s of the jobs' waiting (summed over "
            "them) per extra pod-hour idle or booting (`--knee-gain`).",
        },
        "profiles": {
            name: profile(1 + index / 2, follows=index % 2 == 1) for index, name in enumerate(names)
        },
    }


_SECTION = re.compile(r'<section id="[^"]+" data-profile="([^"]*)">(.*?)</section>', re.DOTALL)
_RECOMMENDED = re.compile(r'<tr class="recommended" data-kind="\w+">.*?<td class="settings">(.*?)</td>')


def key_paths(value: Any, path: str = "") -> set[str]:
    """Every key of a document as a path (`profiles.*.current.wait_mean_s`, `...candidates[].label`); the
    objects keyed by data (profile names, settings, skipped labels) count as one `*` key."""
    if isinstance(value, list):
        return set().union(*(key_paths(item, f"{path}[]") for item in value)) if value else set()
    if not isinstance(value, dict):
        return set()
    if path.rsplit(".", 1)[-1] in ("profiles", "settings", "skipped"):
        items = [("*", item) for item in value.values()]
    else:
        items = list(value.items())
    paths: set[str] = set()
    for key, item in items:
        inner = f"{path}.{key}" if path else key
        paths |= {inner} | key_paths(item, inner)
    return paths


def sections(page: str) -> list[tuple[str, str]]:
    """A rendered page's profile sections, in order: (the profile's name as the page writes it, the body)."""
    return _SECTION.findall(page)


def plots(section: str) -> list[str]:
    """The kinds of plot in a profile's section that are inline SVG, in order."""
    return re.findall(r'<figure data-plot="(\w+)"><svg\b', section)


def recommended_labels(section: str) -> list[str]:
    """The labels of the candidate rows the section's table marks as recommended (escaped)."""
    return _RECOMMENDED.findall(section)
