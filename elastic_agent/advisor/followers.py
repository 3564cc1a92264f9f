"""Which profiles' jobs follow another stage, read from a trace: the only jobs Predict can serve ahead.

Predict (elastic_agent/forecast/shape.py) learns which stage follows which, in a pipeline run and from a
stage to the downstream pipelines its passing triggers, and starts the follower's pods while the stage
before it runs. A first stage triggered by a commit or a timer comes unannounced. So the report says,
per profile, how many of its jobs follow another stage, by the forecast's two rules:

- in its pipeline run (pipeline and pipeline counter), the job's stage is not the run's first stage;
- the job is in the first stage of a pipeline run that began within DOWNSTREAM_S of another pipeline's
  stage run ending, and that upstream stage did so at least MIN_CAME_TRUE times and for at least
  MIN_RATE of the pipeline's runs, as a downstream edge of the forecast must before it fires. A stage
  run ends at its jobs' last `at + duration`: the trace's times are GoCD's, as though none waited.

A trace without pipeline counters (each job its own run) has no followers. This is a count over the
trace, not a simulation: whether Predict's pods come in time is what the Predict candidates' figures say.
Pure: jobs in, counts out.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from elastic_agent.forecast.shape import DOWNSTREAM_S, MIN_CAME_TRUE, MIN_RATE
from elastic_agent.traces.workload import TraceJob

_PipelineRun = tuple[str, int]  # (pipeline, pipeline counter)
_StageRun = tuple[str, int, str, int]  # (pipeline, pipeline counter, stage, stage counter)


@dataclass(frozen=True)
class Following:
    """A profile's jobs in the trace, and how many of them follow another stage."""

    jobs: int
    followers: int

    @property
    def share(self) -> float:
        return self.followers / self.jobs if self.jobs else 0.0


def following(jobs: Sequence[TraceJob]) -> dict[str, Following]:
    """Per profile of `jobs`, its jobs and those that follow another stage."""
    runs: dict[_PipelineRun, list[TraceJob]] = {}
    for job in jobs:
        if job.pipeline_counter is not None:
            runs.setdefault((job.pipeline, job.pipeline_counter), []).append(job)
    first_stage = {key: min(members, key=lambda j: j.at).stage for key, members in runs.items()}
    downstream = _downstream_runs(runs, first_stage)
    counts: dict[str, list[int]] = {}
    for job in jobs:
        seen = counts.setdefault(job.profile, [0, 0])
        seen[0] += 1
        if job.pipeline_counter is None:
            continue
        key = (job.pipeline, job.pipeline_counter)
        if job.stage != first_stage[key] or key in downstream:
            seen[1] += 1
    return {profile: Following(n, followers) for profile, (n, followers) in counts.items()}


def _downstream_runs(
    runs: dict[_PipelineRun, list[TraceJob]], first_stage: dict[_PipelineRun, str]
) -> set[_PipelineRun]:
    """The pipeline runs whose first stage a stage of another pipeline triggered, as the forecast would
    learn it."""
    ends: dict[_StageRun, float] = {}
    for (pipeline, counter), members in runs.items():
        for job in members:
            stage_run = (pipeline, counter, job.stage, job.stage_counter)
            ends[stage_run] = max(ends.get(stage_run, job.at + job.duration), job.at + job.duration)
    ordered = sorted((end, stage_run) for stage_run, end in ends.items())
    times = [end for end, _ in ordered]
    seen: dict[tuple[str, str, str], set[_PipelineRun]] = {}  # (upstream pipeline, stage, pipeline)
    started: dict[str, int] = {}  # runs per pipeline
    for key, members in runs.items():
        pipeline = key[0]
        started[pipeline] = started.get(pipeline, 0) + 1
        begin = min(job.at for job in members if job.stage == first_stage[key])
        window = slice(bisect.bisect_left(times, begin - DOWNSTREAM_S), bisect.bisect_right(times, begin))
        for _, upstream in ordered[window]:
            if upstream[0] != pipeline:
                seen.setdefault((upstream[0], upstream[2], pipeline), set()).add(key)
    followed: set[_PipelineRun] = set()
    for (_, _, pipeline), triggered in seen.items():
        if len(triggered) >= max(MIN_CAME_TRUE, MIN_RATE * started[pipeline]):
            followed.update(triggered)
    return followed
