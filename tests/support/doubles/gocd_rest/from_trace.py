"""A GoCD installation whose job history is a trace: each TraceJob becomes one job instance of its
pipeline's run and stage run, scheduled at the trace's time, run on an elastic agent of its profile for
its duration (timeline.py), with its result; with `extras`, the cases a real history holds that a trace
does not (extras.py).

The config is read back from the trace: a pipeline's stages and jobs in the order they first appear, a
job's elastic profile and a pipeline's environment those of its latest run (GoCD keeps one config; a
trace whose job changed profile is served with today's, while `truth()` keeps each run's own). Pipelines
are grouped by their name's first part (`svc-03-deploy` in `svc`); `admin` is a system administrator,
`ops` administers every group of the trace and of the extras, `dev` may view them. A job without
`pipeline_counter` gets its own run of the pipeline, counted after the trace's own counters. A trace's
`stage_counter` above 1 is the whole stage run again (ScheduleService.rerunStage: every job fresh, no
`rerun_of_counter`); a rerun of failed jobs only, with copies of the others, is one of the extras.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from elastic_agent.traces.workload import TraceJob
from tests.support.doubles.gocd_rest import extras as extra_cases
from tests.support.doubles.gocd_rest.timeline import agent_uuid, agent_wait_ms, cut, transitions
from tests.support.doubles.gocd_rest.world import (
    Environment,
    JobConfig,
    JobRun,
    PipelineConfig,
    PipelineGroup,
    StageConfig,
    StageRun,
    User,
    World,
)

USERS = (("admin", True), ("ops", False), ("dev", False))
GROUP_ADMINS = ("ops",)
GROUP_VIEWERS = ("dev",)
AFTER_LAST_S = 60.0  # the default `now`: this long after the last transition

StageKey = tuple[str, int, str, int]


def world_from_trace(
    jobs: list[TraceJob], *, origin: datetime, seed: int, extras: bool = True, now: datetime | None = None
) -> World:
    """The installation serving `jobs` (see the module's docstring); ValueError with a sentence for a
    trace GoCD could not have recorded."""
    if origin.tzinfo is None or (now is not None and now.tzinfo is None):
        raise ValueError("the origin and now of a GoCD history must be timezone-aware datetimes")
    origin_ms = round(origin.timestamp() * 1000)
    rng = random.Random(seed)
    stage_runs = [
        _stage_run(key, trace_jobs, origin_ms, rng) for key, trace_jobs in _by_stage_run(jobs).items()
    ]
    last = max(
        (t.at_ms for run in stage_runs for job in run.jobs for t in job.transitions), default=origin_ms
    )
    now_ms = round(now.timestamp() * 1000) if now is not None else last + round(AFTER_LAST_S * 1000)
    world = World(
        now_ms=now_ms,
        users={name: User(name, _token(seed, name), admin) for name, admin in USERS},
        groups=_groups(jobs),
        pipelines=_pipelines(jobs),
        stages=_as_of(stage_runs, now_ms),
        environments=_environments(jobs),
    )
    if extras:
        taken = {name.lower() for name in world.pipelines}
        extra_cases.add(world, rng, taken=taken, viewers=GROUP_VIEWERS, admins=GROUP_ADMINS)
    world.assign_ids()
    return world


def _by_stage_run(jobs: Iterable[TraceJob]) -> dict[StageKey, list[TraceJob]]:
    ordered = sorted(jobs, key=lambda job: job.at)
    counters: dict[str, int] = defaultdict(int)
    for job in ordered:
        if job.pipeline_counter is not None:
            counters[job.pipeline] = max(counters[job.pipeline], job.pipeline_counter)
    found: dict[StageKey, list[TraceJob]] = defaultdict(list)
    for job in ordered:
        if "/" in job.pipeline + job.stage + job.job_name:
            raise ValueError(f"GoCD names cannot hold '/': {job.pipeline}/{job.stage}/{job.job_name}")
        counter = job.pipeline_counter
        if counter is None:
            counters[job.pipeline] += 1
            counter = counters[job.pipeline]
        key = (job.pipeline, counter, job.stage, job.stage_counter)
        if any(other.job_name.lower() == job.job_name.lower() for other in found[key]):
            where = f"{job.pipeline}/{counter}/{job.stage}/{job.stage_counter}/{job.job_name}"
            raise ValueError(f"the trace has job {where} twice: a stage run has one instance of each job")
        found[key].append(job)
    return found


def _stage_run(key: StageKey, jobs: list[TraceJob], origin_ms: int, rng: random.Random) -> StageRun:
    pipeline, counter, stage, stage_counter = key
    run = StageRun(pipeline, counter, stage, stage_counter, created_ms=origin_ms + round(jobs[0].at * 1000))
    for job in jobs:
        scheduled = origin_ms + round(job.at * 1000)
        assigned = scheduled + agent_wait_ms(rng)
        timeline = transitions(scheduled, assigned, max(0, round(job.duration * 1000)))
        run.add(
            JobRun(
                job.job_name,
                job.job_name,
                scheduled,
                timeline,
                result=job.result,
                agent_uuid=agent_uuid(rng),
                profile=job.profile,
                environment=job.environment or None,
            )
        )
    return run


def _as_of(runs: list[StageRun], now_ms: int) -> list[StageRun]:
    """What the server holds at `now_ms`: no run scheduled later, the others cut there."""
    kept = []
    for run in runs:
        run.jobs = [cut(job, now_ms) for job in run.jobs if job.scheduled_ms <= now_ms]
        if run.jobs:
            kept.append(run)
    return kept


def _latest(jobs: Iterable[TraceJob]) -> dict[tuple[str, str, str], TraceJob]:
    latest: dict[tuple[str, str, str], TraceJob] = {}
    for job in sorted(jobs, key=lambda job: job.at):
        latest[(job.pipeline, job.stage, job.job_name)] = job
    return latest


def _pipelines(jobs: list[TraceJob]) -> dict[str, PipelineConfig]:
    layout: dict[str, dict[str, dict[str, str]]] = {}  # pipeline -> stage -> job -> profile
    # In the order first seen: a dict keeps a key where it was first put, whatever is put there later.
    for (pipeline, stage, job), last in _latest(jobs).items():
        layout.setdefault(pipeline, {}).setdefault(stage, {})[job] = last.profile
    return {
        name: PipelineConfig(
            name,
            _group_name(name),
            tuple(
                StageConfig(stage, tuple(JobConfig(job, profile) for job, profile in stage_jobs.items()))
                for stage, stage_jobs in stages.items()
            ),
        )
        for name, stages in layout.items()
    }


def _environments(jobs: list[TraceJob]) -> list[Environment]:
    latest: dict[str, str | None] = {}
    for job in sorted(jobs, key=lambda job: job.at):
        latest[job.pipeline] = job.environment or None
    members: dict[str, list[str]] = defaultdict(list)
    for pipeline, environment in latest.items():
        if environment:
            members[environment].append(pipeline)
    return [Environment(name, tuple(pipelines)) for name, pipelines in members.items()]


def _groups(jobs: list[TraceJob]) -> list[PipelineGroup]:
    members: dict[str, list[str]] = defaultdict(list)
    for pipeline in dict.fromkeys(job.pipeline for job in sorted(jobs, key=lambda job: job.at)):
        members[_group_name(pipeline)].append(pipeline)
    return [PipelineGroup(name, tuple(names), GROUP_VIEWERS, GROUP_ADMINS) for name, names in members.items()]


def _group_name(pipeline: str) -> str:
    return pipeline.split("-")[0] or pipeline


def _token(seed: int, user: str) -> str:
    """40 characters, the length GoCD's AccessTokenService accepts."""
    return hashlib.sha1(f"gocd-rest-double:{seed}:{user}".encode()).hexdigest()
