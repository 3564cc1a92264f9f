"""What `advise --current` and `--pod-start` say: the policy a trace was recorded under, and the pod
start-up a user gives instead of the one calibrated on the trace's waits (calibration.py).

Pure parsing and checking, so that `command.py` can check the options before anything is simulated: it
imports nothing of the simulator. A policy is the reuse properties of an elastic profile, checked as GoCD
would check the profile (profiles/validation.py), for every profile or, prefixed `PROFILE:`, for one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from profiles.quantities import parse_duration
from profiles.validation import validate_elastic_profile

ONE_POD_PER_JOB = "one-pod-per-job"
_ALIASES = (ONE_POD_PER_JOB, "official")
# A ReuseSchedule is not among them: its value is a list of periods, which a command line cannot carry.
REUSE_KEYS = ("Reuse", "IdleTimeout", "MinIdlePods", "MaxJobsPerPod", "ReuseScope", "Predict")
_PROFILE_PREFIX = re.compile(r"^([^=:]+):(.*)$", re.DOTALL)
POD_START_RANGE_S = (1.0, 3600.0)


@dataclass(frozen=True)
class CurrentPolicy:
    """The policy a trace was recorded under: `everywhere` for every profile, `per_profile` over it."""

    everywhere: Mapping[str, str] = field(default_factory=lambda: {"Reuse": "false"})
    per_profile: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def properties(self, profile: str) -> dict[str, str]:
        return dict(self.per_profile.get(profile, self.everywhere))

    def describe(self, profile: str | None = None) -> str:
        properties = self.everywhere if profile is None else self.properties(profile)
        if properties.get("Reuse", "false").lower() != "true":
            return "one pod per job, the official plugin's way"
        return ", ".join(f"{key}={value}" for key, value in properties.items())


def parse_current(values: Sequence[str]) -> CurrentPolicy:
    """`--current`, given once or more: `one-pod-per-job` (or `official`), `KEY=VALUE,...` with this
    plugin's reuse properties, or either prefixed `PROFILE:` for that profile alone. ValueError with a
    sentence when wrong."""
    everywhere: dict[str, str] | None = None
    per_profile: dict[str, dict[str, str]] = {}
    for text in values:
        prefixed = _PROFILE_PREFIX.match(text.strip())
        profile, body = (prefixed.group(1).strip(), prefixed.group(2)) if prefixed else (None, text)
        properties = _properties(body, text)
        if profile is None:
            if everywhere is not None:
                raise ValueError(
                    f"--current {text!r}: a policy for every profile was given already; prefix the others "
                    "with their profile (java:Reuse=true,...)"
                )
            everywhere = properties
        elif profile in per_profile:
            raise ValueError(f"--current {text!r}: profile {profile} was given a policy already")
        else:
            per_profile[profile] = properties
    return CurrentPolicy(everywhere or {"Reuse": "false"}, per_profile)


def _properties(body: str, text: str) -> dict[str, str]:
    body = body.strip()
    if body.lower() in _ALIASES:
        return {"Reuse": "false"}
    properties: dict[str, str] = {}
    for item in body.split(","):
        key, equals, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key or not value:
            raise ValueError(
                f"--current {text!r}: write {ONE_POD_PER_JOB}, or this plugin's settings as KEY=VALUE "
                "separated by commas (e.g. Reuse=true,IdleTimeout=10m,MinIdlePods=1)"
            )
        if key not in REUSE_KEYS:
            raise ValueError(f"--current {text!r}: {key} is not one of {', '.join(REUSE_KEYS)}")
        properties[key] = value
    problems = validate_elastic_profile({"Image": "agent", "PodSpecType": "properties", **properties})
    if problems:
        raise ValueError(f"--current {text!r}: {problems[0]['key']}: {problems[0]['message']}")
    reuse = properties.get("Reuse", "false").lower() == "true"
    others = sorted(set(properties) - {"Reuse"})
    if not reuse and others:
        verb = "counts" if len(others) == 1 else "count"
        raise ValueError(
            f"--current {text!r}: {', '.join(others)} {verb} only with Reuse=true; add it, or write "
            f"{ONE_POD_PER_JOB}"
        )
    return properties


@dataclass(frozen=True)
class GivenPodStart:
    """`--pod-start`: a median start-up for every profile (`everywhere`) and for some (`per_profile`)."""

    everywhere: float | None = None
    per_profile: Mapping[str, float] = field(default_factory=dict)

    def for_profile(self, profile: str) -> float | None:
        return self.per_profile.get(profile, self.everywhere)


def parse_pod_starts(values: Sequence[str]) -> GivenPodStart:
    """`--pod-start`, given once or more: `DURATION` (90s, 2m; a bare number is seconds) for every
    profile, or `PROFILE:DURATION` for one. ValueError with a sentence when wrong."""
    everywhere: float | None = None
    per_profile: dict[str, float] = {}
    for text in values:
        prefixed = _PROFILE_PREFIX.match(text.strip())
        profile, body = (prefixed.group(1).strip(), prefixed.group(2)) if prefixed else (None, text)
        seconds = _pod_start(body.strip(), text)
        if profile is None:
            if everywhere is not None:
                raise ValueError(f"--pod-start {text!r}: a start-up for every profile was given already")
            everywhere = seconds
        elif profile in per_profile:
            raise ValueError(f"--pod-start {text!r}: profile {profile} was given a start-up already")
        else:
            per_profile[profile] = seconds
    return GivenPodStart(everywhere, per_profile)


def _pod_start(body: str, text: str) -> float:
    low, high = POD_START_RANGE_S
    try:
        seconds = parse_duration(body, bare_unit_seconds=1.0)
    except ValueError:
        seconds = -1.0
    if not low <= seconds <= high:
        raise ValueError(
            f"--pod-start {text!r}: give a duration from 1s to 1h (e.g. 90s), or PROFILE:DURATION for one "
            "profile"
        )
    return seconds
