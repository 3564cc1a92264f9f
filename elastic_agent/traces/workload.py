"""Workloads for the advisor and the virtual-time simulator: a trace format users can fill from their own
history (`python -m elastic_agent trace` writes it), and a generator of realistic traces (a daily cycle
or a working week, bursts, a mix of profiles and environments).

The trace is what the user hands the advisor, and the simulator's input: both import it from here, and
it imports nothing of either, which keeps the
two packages from importing each other in a circle.

Trace format, either
- JSON lines (`.jsonl`, `.json`): one object per job,
  `{"at": 12.5, "profile": "java", "environment": "prod", "pipeline": "api", "duration": 180}`, or
- CSV (`.csv`) with the header `at,profile,environment,pipeline,duration`.
`at` is seconds since the start of the trace, or an ISO 8601 time (then taken relative to the earliest
job); `environment` may be empty (no environment); `duration` is in seconds. Rows are sorted by `at` on
loading; lines starting with `#` and blank lines are skipped.

A job may also say where it sits in its pipeline, as GoCD's job identifier does (optional fields, and
optional CSV columns): `pipeline_counter` (the pipeline's run, 1 and up; absent: the simulated GoCD
counts runs of the pipeline itself, one per job), `stage` (default `build`), `stage_counter` (default 1),
`job` (the job's name, default `job`) and `result` (`Passed` or `Failed`, default `Passed`). These give a
trace its pipeline shape: the jobs of one stage run, and the stage runs that follow one another.
`waited` (optional, seconds from scheduled to assigned, as `trace` writes it) is what the job really
waited for an agent: the advisor reports it as measured beside its simulation and calibrates its pod
start-up on it (advisor/calibration.py).

How `python -m elastic_agent trace` writes GoCD's runs (gocd/history_runs.py): one row per job run
on an elastic agent that finished, `job` the instance's name, so a job of `run_instance_count` N is N
rows (`unit-runInstance-1` ...); a stage re-run is rows of its own stage counter for the jobs that ran
again, while the jobs GoCD copied into it without running them are not rows (their first run is); a run
cancelled after it got its agent is a row with result `Failed` (it held the agent until then, and ends
its pipeline's run like a failure), one cancelled while waiting is not a row (it never held an agent);
a run whose agent was lost is not a row (GoCD hides that attempt and schedules a new one, which is).

The trace's origin is the absolute time of its time 0: what gives cron periods (office hours, weekends)
a meaning in a trace of seconds. ISO `at` times give it (the earliest job's time); a comment line
`# origin: 2024-01-01T00:00:00+00:00` gives it to a trace of seconds (and, before ISO times, sets time 0
to that instant instead of the earliest job); a trace of seconds without one starts at `DEFAULT_ORIGIN`,
a Monday 00:00 UTC, so that the generated traces' hours are hours of the day (the standard trace's
hour 14, its peak, is 14:00) and a generated week starts on a Monday. `write_trace` writes the line.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
FIELDS = ("at", "profile", "environment", "pipeline", "duration")
SHAPE_FIELDS = ("pipeline_counter", "stage", "stage_counter", "job", "result")  # optional
WAITED = "waited"  # optional too; written only by a trace that has it
RESULTS = ("Passed", "Failed")
DEFAULT_ORIGIN = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday
_ORIGIN_PREFIX = "origin:"


@dataclass(frozen=True)
class TraceJob:
    at: float  # seconds since the start of the trace
    profile: str
    environment: str | None
    pipeline: str
    duration: float  # seconds
    pipeline_counter: int | None = None  # None: the simulated GoCD numbers the pipeline's runs itself
    stage: str = "build"
    stage_counter: int = 1
    job_name: str = "job"
    result: str = "Passed"  # or "Failed"
    waited: float | None = None  # measured seconds from scheduled to assigned; None: not measured

    def row(self) -> dict[str, Any]:
        waited = {} if self.waited is None else {WAITED: round(self.waited, 3)}
        return {
            "at": round(self.at, 3),
            "profile": self.profile,
            "environment": self.environment or "",
            "pipeline": self.pipeline,
            "duration": round(self.duration, 3),
            "pipeline_counter": "" if self.pipeline_counter is None else self.pipeline_counter,
            "stage": self.stage,
            "stage_counter": self.stage_counter,
            "job": self.job_name,
            "result": self.result,
        } | waited


class TraceError(ValueError):
    """A trace file that cannot be read, with the line that is wrong."""


# ---- reading and writing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """A trace as read: its jobs (sorted by arrival) and the absolute time of its time 0."""

    jobs: list[TraceJob]
    origin: datetime  # timezone-aware
    origin_given: bool = True  # False: the trace said nothing, DEFAULT_ORIGIN was assumed

    @property
    def start(self) -> float:
        """The origin in epoch seconds: the simulator's clock at the trace's time 0."""
        return self.origin.timestamp()


def write_trace(jobs: Iterable[TraceJob], path: str | Path, origin: datetime | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as out:
        if origin is not None:
            out.write(f"# {_ORIGIN_PREFIX} {_aware(origin).isoformat()}\n")
        if path.suffix == ".csv":
            jobs = list(jobs)
            measured = (WAITED,) if any(job.waited is not None for job in jobs) else ()
            writer = csv.DictWriter(out, fieldnames=FIELDS + SHAPE_FIELDS + measured, restval="")
            writer.writeheader()
            writer.writerows(job.row() for job in jobs)
        else:
            for job in jobs:
                out.write(json.dumps(job.row(), separators=(",", ":")) + "\n")


def load_trace(path: str | Path) -> list[TraceJob]:
    return read_trace(path).jobs


def read_trace(path: str | Path) -> Trace:
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    return parse_trace_file(text, csv_format=path.suffix == ".csv", where=str(path))


def parse_trace(text: str, *, csv_format: bool, where: str = "trace") -> list[TraceJob]:
    return parse_trace_file(text, csv_format=csv_format, where=where).jobs


def parse_trace_file(text: str, *, csv_format: bool, where: str = "trace") -> Trace:
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
    stamps = [at for at, _, _ in jobs if isinstance(at, datetime)]
    if stamps and len(stamps) != len(jobs):
        raise TraceError(f"{where}: mixes ISO times and seconds in `at`; use one or the other")
    declared = _declared_origin(text, where)
    origin = declared or (min(stamps) if stamps else DEFAULT_ORIGIN)
    if stamps and min(stamps) < origin:
        raise TraceError(f"{where}: a job is scheduled before the origin line's {origin.isoformat()}")
    result = []
    for at, (profile, environment, pipeline, duration), shape in jobs:
        seconds = (at - origin).total_seconds() if isinstance(at, datetime) else float(at)
        result.append(TraceJob(seconds, profile, environment, pipeline, duration, *shape))
    return Trace(sorted(result, key=_arrival), origin, origin_given=bool(declared or stamps))


def _declared_origin(text: str, where: str) -> datetime | None:
    """The first `# origin: ISO-TIME` comment line's time, if there is one."""
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.strip()
        if not body.startswith("#"):
            continue
        body = body[1:].strip()
        if body.lower().startswith(_ORIGIN_PREFIX):
            raw = body[len(_ORIGIN_PREFIX) :].strip()
            try:
                return _iso(raw)
            except ValueError:
                raise TraceError(
                    f"{where}, line {number}: the origin must be an ISO 8601 time, not {raw!r}"
                ) from None
    return None


def _iso(text: str) -> datetime:
    return _aware(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _aware(moment: datetime) -> datetime:
    """A time without an offset is taken as UTC: comparing naive with aware times would raise."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


_Shape = tuple[int | None, str, int, str, str, float | None]


def _job(
    row: dict[str, Any], where: str
) -> tuple[float | datetime, tuple[str, str | None, str, float], _Shape]:
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
            at = _iso(str(raw_at))
        except ValueError:
            raise TraceError(f"{where}: at must be seconds or an ISO 8601 time, not {raw_at!r}") from None
    if not profile:
        raise TraceError(f"{where}: profile is empty")
    if not math.isfinite(duration) or duration < 0:
        raise TraceError(f"{where}: duration must be zero or more seconds")
    environment = str(row.get("environment") or "").strip() or None
    return at, (profile, environment, pipeline, duration), _shape(row, where)


def _shape(row: dict[str, Any], where: str) -> _Shape:
    """The optional job-identifier fields and the measured wait; blank (CSV) means absent."""
    raw_counter = row.get("pipeline_counter")
    counter = None if raw_counter in (None, "") else _positive(raw_counter, "pipeline_counter", where)
    raw_stage = row.get("stage_counter")
    stage_counter = 1 if raw_stage in (None, "") else _positive(raw_stage, "stage_counter", where)
    stage = str(row.get("stage") or "build").strip() or "build"
    job_name = str(row.get("job") or "job").strip() or "job"
    raw_result = str(row.get("result") or "Passed").strip()
    result = next((known for known in RESULTS if known.lower() == raw_result.lower()), None)
    if result is None:
        raise TraceError(f"{where}: result must be Passed or Failed, not {raw_result!r}")
    return counter, stage, stage_counter, job_name, result, _waited(row.get(WAITED), where)


def _waited(raw: Any, where: str) -> float | None:
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: waited must be zero or more seconds, not {raw!r}")
    return value


def _positive(raw: Any, name: str, where: str) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise TraceError(f"{where}: {name} must be a whole number, 1 or more, not {raw!r}") from None
    if value < 1:
        raise TraceError(f"{where}: {name} must be 1 or more, not {value}")
    return value


# ---- generating -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileMix:
    name: str
    weight: float
    median_duration_s: float  # job durations are lognormal around this
    duration_sigma: float = 0.8


@dataclass(frozen=True)
class WeekShape:
    """A working week's arrival rate, relative to office hours' (1.0), by hour of the trace's week (time 0
    is a Monday 00:00): on Monday to Friday quiet nights, a morning ramp up to office hours, a lunch dip,
    an evening decline; Saturday and Sunday low all day. Piecewise linear, so the ramp is a ramp."""

    ramp_start_h: float = 7.0  # the morning ramp starts here at the night's level ...
    office_start_h: float = 9.0  # ... and reaches office hours here
    office_end_h: float = 17.0  # the evening decline starts here ...
    evening_end_h: float = 20.0  # ... and reaches the night's level here
    lunch_dip: float = 0.25  # 12:00 to 13:00 is this much quieter
    night: float = 0.04
    weekend_day: float = 0.1  # Saturday and Sunday, 09:00 to 18:00
    weekend_night: float = 0.02
    workdays: int = 5  # Monday to Friday

    def rate(self, at_s: float) -> float:
        """Relative arrival rate at `at_s` seconds after time 0."""
        day, hour = divmod((at_s % WEEK_S) / 3600.0, 24.0)
        if day >= self.workdays:
            return self.weekend_day if 9.0 <= hour < 18.0 else self.weekend_night
        if hour < self.ramp_start_h or hour >= self.evening_end_h:
            return self.night
        if hour < self.office_start_h:
            share = (hour - self.ramp_start_h) / (self.office_start_h - self.ramp_start_h)
            return self.night + share * (1.0 - self.night)
        if hour >= self.office_end_h:
            share = (hour - self.office_end_h) / (self.evening_end_h - self.office_end_h)
            return 1.0 - share * (1.0 - self.night)
        return 1.0 - self.lunch_dip if 12.0 <= hour < 13.0 else 1.0


@dataclass(frozen=True)
class WorkloadSpec:
    jobs: int = 100_000
    days: float = 1.0  # the jobs spread over this many days
    daily_amplitude: float = 0.8  # arrival rate swings +/- this fraction around the mean over a day
    peak_hour: float = 14.0
    week: WeekShape | None = None  # set: arrivals follow this working week instead of the daily cosine
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
    cosine or `spec.week` (thinning), plus bursts of one pipeline's jobs at the same instant. Each
    pipeline has one profile and one environment; busier pipelines are chosen more often (weights 1/rank)."""
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
    daily cycle or the week (rejection sampling): sorted, they are a Poisson process with that rate,
    given `count`."""
    found: list[float] = []
    week = spec.week
    top = 1.0 if week is not None else 1 + spec.daily_amplitude
    while len(found) < count:
        at = rng.uniform(0.0, horizon)
        if week is not None:
            rate = week.rate(at)
        else:
            rate = 1 + spec.daily_amplitude * math.cos(2 * math.pi * (at / DAY_S - spec.peak_hour / 24))
        if rng.random() * top <= rate:
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
