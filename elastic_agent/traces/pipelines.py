"""Pipeline-shaped traces: what a GoCD server's job history looks like when its jobs come from pipelines
of stages, as the standard trace's independent arrivals and bursts do not.

A generated installation has a fixed set of pipelines, each a list of stages (1 to 5) and each stage a
number of jobs (1 to 30) on one elastic profile, with a typical duration per stage. A pipeline run starts
when it is triggered, by a commit, a timer or its upstream; each stage is scheduled a few seconds after
the previous one passed, its jobs together (one `at`); a stage lasts as long as its longest job; a failed
stage ends the run (its failing job has result Failed, no later stage is scheduled, no downstream is
triggered). This is GoCD's own sequence: the scheduler checks waiting work every 5 s
(gocd-protocol.md section 4), and an auto-triggered pipeline is not triggered again while its first stage
is still active (gocd/gocd SchedulingCheckerService.canAutoTriggerConsumer, StageActiveChecker), so the
commits made meanwhile are built together by one run that starts when that stage ends.

The shapes, and why they are defensible (`PipelineSpec`'s defaults):
- JVM services (`svc-NN`, 40 % of the commit-triggered pipelines): compile on `java` (1 or 2 jobs,
  typically 2.5 to 6.5 min), a test stage fanning out to 4 to 30 jobs on `big-memory` (2 to 10 min: test
  suites are split into parallel jobs on a heavier image), package on `java` (1 job, 1 to 2 min). Half of
  them have a downstream `svc-NN-deploy`: deploy on `go` (1 job, 1 to 3 min), smoke tests on `node` (1 to
  4 jobs, 1 to 3 min).
- Front ends (`web-NN`, 25 %): build on `node` (1 job, 1 to 3 min), unit tests on `node` (3 to 12 jobs,
  1 to 4 min), end-to-end tests on `big-memory` (2 to 8 jobs, 3 to 10 min).
- Go services (`go-NN`, 25 %): build on `go` (1 or 2 jobs, 40 s to 2 min), tests on `go` (2 to 10 jobs, 1 to
  3 min).
- Libraries (`lib-NN`, 10 %): one stage, build on `java` (1 job, 2 to 5 min); each triggers 1 to 3 of the
  JVM services downstream (their consumers rebuild on a new version).
- Timers (GoCD's `<timer>`, cron): a nightly regression every day at 02:00 (prepare on `java`, 1 job;
  regression on `big-memory`, 20 to 30 jobs of 10 to 30 min; report on `node`, 1 job) and an hourly smoke
  run from 08:00 to 18:00 on working days (`go`, 5 jobs, 2 min).
- Commits: a Poisson process per pipeline whose rate follows the working week (`workload.WeekShape`);
  `commits_per_hour` is the whole installation's rate in office hours (40: a few hundred developers'
  pushes to a few dozen pipelines), shared out with weights 1/rank^0.7 (a few busy repositories, a long
  tail). The trigger is the commit's time: a webhook, not GoCD's one-minute material poll.
- Variation: a job lasts its stage's typical duration times a lognormal factor (sigma 0.25: the same
  suite on the same image); a stage fails with probability 2 % (compile, build, deploy), 6 % (tests) or
  8 % (end-to-end and nightly regression).
- Gaps: a stage is scheduled 1 to 6 s after the previous one passed (the scheduler's 5 s tick and its
  work), a downstream pipeline 2 to 10 s after its upstream passed (the dependency material's update).

Open loop: the times are those GoCD scheduled in the generated history, and that history assumes every
job got its agent at once. The simulator replays them as they are; it does not delay a stage when the
previous one waited for agents in the replay, nor hold back a commit's run while a first stage that
started late is still running. Deterministic for a seed.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from datetime import datetime

from elastic_agent.traces.workload import DAY_S, DEFAULT_ORIGIN, TraceJob, WeekShape

_HOUR_S = 3600.0


@dataclass(frozen=True)
class StageKind:
    """What a stage of a kind is like: its profile, fan-out and typical duration ranges (a pipeline
    draws its own values from them once), and how often it fails."""

    name: str
    profile: str
    jobs: tuple[int, int]
    typical_s: tuple[float, float]
    fail_p: float


@dataclass(frozen=True)
class Family:
    """A kind of pipeline: its stages, its share of the commit-triggered pipelines, and what it triggers."""

    prefix: str
    stages: tuple[StageKind, ...]
    share: float
    deploy_share: float = 0.0  # share of these pipelines with a downstream deploy pipeline
    consumers: tuple[int, int] = (0, 0)  # downstream JVM services it triggers (libraries)


def _stage(
    name: str, profile: str, jobs: tuple[int, int], minutes: tuple[float, float], fail_p: float
) -> StageKind:
    return StageKind(name, profile, jobs, (minutes[0] * 60, minutes[1] * 60), fail_p)


SERVICE = Family(
    "svc",
    (
        _stage("compile", "java", (1, 2), (2.5, 6.5), 0.02),
        _stage("test", "big-memory", (4, 30), (2, 10), 0.06),
        _stage("package", "java", (1, 1), (1, 2), 0.02),
    ),
    0.40,
    deploy_share=0.5,
)
FRONTEND = Family(
    "web",
    (
        _stage("build", "node", (1, 1), (1, 3), 0.02),
        _stage("unit", "node", (3, 12), (1, 4), 0.06),
        _stage("e2e", "big-memory", (2, 8), (3, 10), 0.08),
    ),
    0.25,
)
GO_SERVICE = Family(
    "go",
    (_stage("build", "go", (1, 2), (0.7, 2), 0.02), _stage("test", "go", (2, 10), (1, 3), 0.06)),
    0.25,
)
LIBRARY = Family("lib", (_stage("build", "java", (1, 1), (2, 5), 0.02),), 0.10, consumers=(1, 3))
DEPLOY = (_stage("deploy", "go", (1, 1), (1, 3), 0.02), _stage("smoke", "node", (1, 4), (1, 3), 0.06))
NIGHTLY = (
    _stage("prepare", "java", (1, 1), (2, 4), 0.02),
    _stage("regression", "big-memory", (20, 30), (10, 30), 0.08),
    _stage("report", "node", (1, 1), (1, 2), 0.02),
)
HOURLY = (_stage("smoke", "go", (5, 5), (2, 2), 0.02),)


@dataclass(frozen=True)
class PipelineSpec:
    days: float = 7.0
    commit_pipelines: int = 60  # pipelines triggered by commits (their deploy pipelines come on top)
    commits_per_hour: float = 40.0  # the whole installation, in office hours
    week: WeekShape = field(default_factory=WeekShape)
    families: tuple[Family, ...] = (SERVICE, FRONTEND, GO_SERVICE, LIBRARY)
    nightly_at_h: float = 2.0  # every day
    hourly: tuple[float, float] = (8.0, 18.0)  # on the hour, first and last, on working days
    stage_gap_s: tuple[float, float] = (1.0, 6.0)
    downstream_gap_s: tuple[float, float] = (2.0, 10.0)
    duration_sigma: float = 0.25
    environment: str | None = None
    origin: datetime = DEFAULT_ORIGIN  # a Monday: the week's hours are hours of the day


@dataclass(frozen=True)
class Stage:
    name: str
    profile: str
    jobs: int
    typical_s: float
    fail_p: float


@dataclass
class Pipeline:
    name: str
    stages: list[Stage]
    commit_rate: float = 0.0  # runs per office hour (0: triggered otherwise)
    downstream: list[str] = field(default_factory=list)
    counter: int = 0
    first_stage_ends: float = -math.inf  # of the latest run: until then a commit waits
    waiting_commit: bool = False


def _make(name: str, kinds: tuple[StageKind, ...], rng: random.Random) -> Pipeline:
    stages = [
        Stage(kind.name, kind.profile, rng.randint(*kind.jobs), rng.uniform(*kind.typical_s), kind.fail_p)
        for kind in kinds
    ]
    return Pipeline(name, stages)


def installation(spec: PipelineSpec, rng: random.Random) -> dict[str, Pipeline]:
    """The pipelines, their commit rates and their downstream links."""
    pipelines: dict[str, Pipeline] = {}
    shares = [family.share for family in spec.families]
    weights = [1.0 / rank**0.7 for rank in range(1, spec.commit_pipelines + 1)]
    rng.shuffle(weights)
    total = sum(weights)
    numbers: dict[str, int] = {}
    libraries: list[Pipeline] = []
    for index in range(spec.commit_pipelines):
        family = rng.choices(spec.families, shares)[0]
        numbers[family.prefix] = numbers.get(family.prefix, 0) + 1
        pipeline = _make(f"{family.prefix}-{numbers[family.prefix]:02d}", family.stages, rng)
        pipeline.commit_rate = spec.commits_per_hour * weights[index] / total
        pipelines[pipeline.name] = pipeline
        if rng.random() < family.deploy_share:
            deploy = _make(f"{pipeline.name}-deploy", DEPLOY, rng)
            pipelines[deploy.name] = deploy
            pipeline.downstream.append(deploy.name)
        if family.consumers != (0, 0):
            libraries.append(pipeline)
    services = [
        name for name in pipelines if name.startswith(SERVICE.prefix) and not name.endswith("-deploy")
    ]
    for library in libraries:
        if services:
            count = min(len(services), rng.randint(*LIBRARY.consumers))
            library.downstream.extend(rng.sample(services, count))
    pipelines["nightly-regression"] = _make("nightly-regression", NIGHTLY, rng)
    pipelines["hourly-smoke"] = _make("hourly-smoke", HOURLY, rng)
    return pipelines


def _timers(spec: PipelineSpec, horizon: float) -> list[tuple[float, str]]:
    """The cron triggers: the nightly run every day, the hourly one on the hour on working days."""
    found = []
    for day in range(math.ceil(spec.days)):
        found.append((day * DAY_S + spec.nightly_at_h * _HOUR_S, "nightly-regression"))
        if day % 7 < spec.week.workdays:
            first, last = spec.hourly
            found += [
                (day * DAY_S + hour * _HOUR_S, "hourly-smoke") for hour in range(int(first), int(last) + 1)
            ]
    return [(at, name) for at, name in found if at < horizon]


def _commits(pipeline: Pipeline, spec: PipelineSpec, rng: random.Random, horizon: float) -> list[float]:
    """A Poisson process at the pipeline's rate times the week's shape (thinning; the shape tops at 1)."""
    times, at = [], 0.0
    rate_s = pipeline.commit_rate / _HOUR_S
    while rate_s > 0:
        at += rng.expovariate(rate_s)
        if at >= horizon:
            break
        if rng.random() <= spec.week.rate(at):
            times.append(at)
    return times


def generate_pipelines(spec: PipelineSpec, seed: int = 1) -> list[TraceJob]:
    """A pipeline-shaped trace of `spec.days` days, sorted by arrival (see the module's docstring)."""
    rng = random.Random(seed)
    horizon = spec.days * DAY_S
    pipelines = installation(spec, rng)
    # Triggers in time order: (at, order, pipeline, kind). Commits, timers and downstream triggers share it,
    # so a run triggered later than another is numbered later, as GoCD's counters are.
    order = iter(range(1 << 62))
    events: list[tuple[float, int, str, str]] = []
    for pipeline in pipelines.values():
        events += [
            (at, next(order), pipeline.name, "commit") for at in _commits(pipeline, spec, rng, horizon)
        ]
    events += [(at, next(order), name, "timer") for at, name in _timers(spec, horizon)]
    heapq.heapify(events)
    jobs: list[TraceJob] = []
    while events:
        at, _, name, kind = heapq.heappop(events)
        pipeline = pipelines[name]
        if kind != "timer" and at < pipeline.first_stage_ends:
            if not pipeline.waiting_commit:  # the changes meanwhile are built by one run, when it ends
                pipeline.waiting_commit = True
                gap = rng.uniform(*spec.stage_gap_s)
                heapq.heappush(events, (pipeline.first_stage_ends + gap, next(order), name, kind))
            continue
        pipeline.waiting_commit = False
        passed_at = _run(pipeline, at, spec, rng, jobs)
        if passed_at is not None:
            for downstream in pipeline.downstream:
                gap = rng.uniform(*spec.downstream_gap_s)
                heapq.heappush(events, (passed_at + gap, next(order), downstream, "upstream"))
    return sorted((job for job in jobs if job.at < horizon), key=lambda job: job.at)


def _run(
    pipeline: Pipeline, at: float, spec: PipelineSpec, rng: random.Random, jobs: list[TraceJob]
) -> float | None:
    """One run from `at`: its jobs appended to `jobs`; when its last stage passed (None: a stage failed)."""
    pipeline.counter += 1
    start = at
    for number, stage in enumerate(pipeline.stages):
        durations = [
            round(stage.typical_s * rng.lognormvariate(0.0, spec.duration_sigma), 1)
            for _ in range(stage.jobs)
        ]
        failed = rng.random() < stage.fail_p
        failing = rng.randrange(stage.jobs) if failed else -1
        for index, duration in enumerate(durations):
            jobs.append(
                TraceJob(
                    round(start, 3),
                    stage.profile,
                    spec.environment,
                    pipeline.name,
                    duration,
                    pipeline.counter,
                    stage.name,
                    1,
                    f"{stage.name}-{index + 1}" if stage.jobs > 1 else stage.name,
                    "Failed" if index == failing else "Passed",
                )
            )
        ends = start + max(durations)
        if number == 0:
            pipeline.first_stage_ends = ends
        if failed:
            return None
        if number + 1 < len(pipeline.stages):
            start = ends + rng.uniform(*spec.stage_gap_s)
    return ends
