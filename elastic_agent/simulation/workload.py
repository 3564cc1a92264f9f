"""Workloads for the virtual-time simulator: a trace format users can fill from their own history, and a
generator of realistic traces (a daily cycle, bursts, a mix of profiles and environments).

Trace format, either
- JSON lines (`.jsonl`, `.json`): one object per job,
  `{"at": 12.5, "profile": "java", "environment": "prod", "pipeline": "api", "duration": 180}`, or
- CSV (`.csv`) with the header `at,profile,environment,pipeline,duration`.
`at` is seconds since the start of the trace, or an ISO 8601 time (then taken relative to the earliest
job); `environment` may be empty (no environment); `duration` is in seconds. Rows are sorted by `at` on
loading; lines starting with `#` and blank lines are skipped.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

DAY_S = 86_400.0
FIELDS = ("at", "profile", "environment", "pipeline", "duration")


@dataclass(frozen=True)
class TraceJob:
    at: float  # seconds since the start of the trace
    profile: str
    environment: str | None
    pipeline: str
    duration: float  # seconds

    def row(self) -> dict[str, Any]:
        return {
            "at": round(self.at, 3),
            "profile": self.profile,
            "environment": self.environment or "",
            "pipeline": self.pipeline,
            "duration": round(self.duration, 3),
        }


class TraceError(ValueError):
    """A trace file that cannot be read, with the line that is wrong."""


# ---- reading and writing ---------------------------------------------------------------------------


def write_trace(jobs: Iterable[TraceJob], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as out:
        if path.suffix == ".csv":
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(job.row() for job in jobs)
        else:
            for job in jobs:
                out.write(json.dumps(job.row(), separators=(",", ":")) + "\n")


def load_trace(path: str | Path) -> list[TraceJob]:
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    return parse_trace(text, csv_format=path.suffix == ".csv", where=str(path))


def parse_trace(text: str, *, csv_format: bool, where: str = "trace") -> list[TraceJob]:
    rows: list[tuple[int, dict[str, Any]]] = []
    if csv_format:
        lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        reader = csv.DictReader(io.StringIO("\n".join(lines)))
        missing = [name for name in FIELDS if name not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{where}: the CSV header lacks {', '.join(missing)} (expected {','.join(FIELDS)})"
            )
        rows = [(number, dict(row)) for number, row in enumerate(reader, start=2)]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                value = json.loads(line)
            except ValueError as error:
                raise TraceError(f"{where}, line {number}: not JSON ({error})") from None
            if not isinstance(value, dict):
                raise TraceError(f"{where}, line {number}: expected a JSON object")
            rows.append((number, value))
    jobs = [_job(row, f"{where}, line {number}") for number, row in rows]
    stamps = [at for at, _ in jobs if isinstance(at, datetime)]
    if stamps and len(stamps) != len(jobs):
        raise TraceError(f"{where}: mixes ISO times and seconds in `at`; use one or the other")
    origin = min(stamps) if stamps else None
    result = []
    for at, (profile, environment, pipeline, duration) in jobs:
        if isinstance(at, datetime):
            seconds = (at - origin).total_seconds() if origin is not None else 0.0
        else:
            seconds = float(at)
        result.append(TraceJob(seconds, profile, environment, pipeline, duration))
    return sorted(result, key=_arrival)


def _job(row: dict[str, Any], where: str) -> tuple[float | datetime, tuple[str, str | None, str, float]]:
    try:
        raw_at = row["at"]
        profile = str(row["profile"]).strip()
        pipeline = str(row.get("pipeline") or "pipeline").strip()
        duration = float(row["duration"])
    except KeyError as error:
        raise TraceError(f"{where}: missing field {error}") from None
    except (TypeError, ValueError):
        raise TraceError(f"{where}: duration must be a number of seconds") from None
    at: float | datetime
    try:
        at = float(raw_at)
    except (TypeError, ValueError):
        try:
            at = datetime.fromisoformat(str(raw_at).replace("Z", "+00:00"))
        except ValueError:
            raise TraceError(f"{where}: at must be seconds or an ISO 8601 time, not {raw_at!r}") from None
    if not profile:
        raise TraceError(f"{where}: profile is empty")
    if not math.isfinite(duration) or duration < 0:
        raise TraceError(f"{where}: duration must be zero or more seconds")
    environment = str(row.get("environment") or "").strip() or None
    return at, (profile, environment, pipeline, duration)


# ---- generating -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileMix:
    name: str
    weight: float
    median_duration_s: float  # job durations are lognormal around this
    duration_sigma: float = 0.8


@dataclass(frozen=True)
class WorkloadSpec:
    jobs: int = 100_000
    days: float = 1.0  # the jobs spread over this many days
    daily_amplitude: float = 0.8  # arrival rate swings +/- this fraction around the mean over a day
    peak_hour: float = 14.0
    burst_share: float = 0.2  # share of jobs that arrive in bursts (a pipeline fanning out)
    burst_size: tuple[int, int] = (5, 40)
    pipelines: int = 80
    profiles: Sequence[ProfileMix] = field(
        default_factory=lambda: (
            ProfileMix("java", 0.45, 240.0),
            ProfileMix("node", 0.30, 120.0),
            ProfileMix("go", 0.15, 90.0),
            ProfileMix("big-memory", 0.10, 600.0, 0.6),
        )
    )
    environments: Sequence[tuple[str | None, float]] = (("build", 0.6), ("test", 0.3), (None, 0.1))
    min_duration_s: float = 10.0
    max_duration_s: float = 2 * 3600.0


def generate(spec: WorkloadSpec, seed: int = 1) -> list[TraceJob]:
    """`spec.jobs` jobs, sorted by arrival. Arrivals: a Poisson process whose rate follows a daily
    cosine (thinning), plus bursts of one pipeline's jobs at the same instant. Each pipeline has one
    profile and one environment; busier pipelines are chosen more often (weights 1/rank)."""
    rng = random.Random(seed)
    horizon = spec.days * DAY_S
    pipelines = _pipelines(spec, rng)
    cumulative = list(itertools.accumulate(1.0 / rank for rank in range(1, len(pipelines) + 1)))
    burst_jobs = round(spec.jobs * spec.burst_share)
    times: list[tuple[float, int]] = []  # (arrival, burst size)
    single = spec.jobs - burst_jobs
    times += [(at, 1) for at in _arrivals(spec, rng, single, horizon)]
    low, high = spec.burst_size
    sizes: list[int] = []
    while burst_jobs > 0:
        sizes.append(min(burst_jobs, rng.randint(low, high)))
        burst_jobs -= sizes[-1]
    times += list(zip(_arrivals(spec, rng, len(sizes), horizon), sizes, strict=True))
    jobs: list[TraceJob] = []
    for at, size in sorted(times):
        name, profile, environment = rng.choices(pipelines, cum_weights=cumulative)[0]
        for _ in range(size):
            duration = rng.lognormvariate(math.log(profile.median_duration_s), profile.duration_sigma)
            duration = min(spec.max_duration_s, max(spec.min_duration_s, duration))
            jobs.append(TraceJob(round(at, 3), profile.name, environment, name, round(duration, 1)))
    return sorted(jobs, key=_arrival)


def _pipelines(spec: WorkloadSpec, rng: random.Random) -> list[tuple[str, ProfileMix, str | None]]:
    profile_weights = [p.weight for p in spec.profiles]
    env_names = [name for name, _ in spec.environments]
    env_weights = [weight for _, weight in spec.environments]
    return [
        (
            f"pipeline-{index:03d}",
            rng.choices(list(spec.profiles), profile_weights)[0],
            rng.choices(env_names, env_weights)[0],
        )
        for index in range(spec.pipelines)
    ]


def _arrivals(spec: WorkloadSpec, rng: random.Random, count: int, horizon: float) -> list[float]:
    """`count` arrival times in [0, horizon), drawn independently from a density that follows the
    daily cycle (rejection sampling): sorted, they are a Poisson process with that rate, given `count`."""
    found: list[float] = []
    top = 1 + spec.daily_amplitude
    while len(found) < count:
        at = rng.uniform(0.0, horizon)
        phase = 2 * math.pi * (at / DAY_S - spec.peak_hour / 24)
        if rng.random() * top <= 1 + spec.daily_amplitude * math.cos(phase):
            found.append(at)
    return found


def describe(jobs: Sequence[TraceJob]) -> str:
    """A one-line summary of a trace."""
    if not jobs:
        return "empty trace"
    span = jobs[-1].at - jobs[0].at
    profiles = sorted({job.profile for job in jobs})
    environments = sorted({job.environment or "(none)" for job in jobs})
    mean = sum(job.duration for job in jobs) / len(jobs)
    return (
        f"{len(jobs)} jobs over {span / 3600:.1f} h, {len(profiles)} profiles ({', '.join(profiles)}), "
        f"{len(environments)} environments ({', '.join(environments)}), mean duration {mean:.0f} s"
    )


def _arrival(job: TraceJob) -> float:
    return job.at
