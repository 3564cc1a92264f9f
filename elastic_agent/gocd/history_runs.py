"""What one job of a stage run was, in a trace's terms: a run on an elastic agent with its wait and the
time it held its agent, or the reason it is left out. Pure: it reads answers already fetched
(`history_calls.py` fetches them) and decides.

What GoCD's answers hold, from gocd/gocd's source:

- The stage instance (`GET /go/api/stages/:pipeline/:counter/:stage/:stage_counter`, API v3:
  api/api-stage-instance-v3 StageRepresenter and its JobInstanceRepresenter; the query is Stage.xml
  `findStageWithJobsByIdentifier`, which joins `buildstatetransitions` and drops `builds.ignored` rows):
  `counter` and `pipeline_counter` are numbers on the stage; each job has `name`, `state`, `result`,
  `scheduled_date` (epoch ms), `rerun`, `original_job_id` and `job_state_transitions[]` of
  `{"state": S, "state_change_time": ms}`. The job's own `pipeline_name`, `pipeline_counter`,
  `stage_name` and `stage_counter` are always null there: the stage says where the jobs sit.
- A job of `run_instance_count` N runs as N jobs named `<name>-runInstance-<i>` (RunMultipleInstance's
  name generator), each a run of its own; GoCD's names are case-insensitive.
- Re-running some jobs of a stage makes a new stage counter holding every job: the ones re-run
  (`rerun: true`) and copies of the others (JobInstance.resetForCopy: `original_job_id` set, the
  original's transitions kept). A copy did not run again, so it is not a run: its original is one.
- A rescheduled job (its agent was lost) is marked `ignored` and a new instance is scheduled in its
  place; the stage instance shows only the new one, which is counted as a run of its own.
- A cancelled job ends Completed with result Cancelled and whatever transitions it reached.

What a run becomes: `waited` is Scheduled -> the first of Assigned, Preparing, Building or Completing
(a missing Assigned does not lose the run); `duration` is that -> Completed, the time the run held its
agent, because the simulator holds the agent for `duration` from the assignment; `built` is Building ->
Completed, for reference. A run cancelled after it got its agent is kept, as Failed: it held the agent
until then, and like a failure it ends its pipeline's run there. The elastic profile and environment are
today's config: GoCD does not record which profile a past run used.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Why a run is left out (the keys of History.left_out, in the order they are reported).
NOT_FINISHED = "still waiting or running when read (a later run of trace picks them up)"
RESCHEDULED = "rescheduled (GoCD ran the job again as a new run, counted on its own)"
NEVER_ASSIGNED = "never got an agent (cancelled while waiting)"
NO_END = "without a Completed time"
OUT_OF_ORDER = "with state transitions out of order (clocks?)"
NO_SCHEDULED_TIME = "without a scheduled time"
COPIED = "copied into a re-run of their stage without running again (their first run is counted)"
UNKNOWN_JOB = "of jobs no longer in their pipeline's config (their elastic profile is unknown)"
NO_ENVIRONMENT = "of pipelines in no environment the token may view (see the warning about them)"
REASONS = (
    NOT_FINISHED,
    RESCHEDULED,
    NEVER_ASSIGNED,
    NO_END,
    OUT_OF_ORDER,
    NO_SCHEDULED_TIME,
    COPIED,
    UNKNOWN_JOB,
    NO_ENVIRONMENT,
)

_ORDER = ("Scheduled", "Assigned", "Preparing", "Building", "Completing", "Completed")
_ON_AGENT = ("Assigned", "Preparing", "Building", "Completing")  # the first of these: the agent has it
_RUN_INSTANCE = re.compile(r"(.+)-runInstance-(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class JobConfig:
    pipeline: str
    stage: str
    job: str
    profile: str | None  # the elastic profile id; None: the job runs on static agents
    environment: str | None  # "" when the pipeline is in none; None: not known (not visible to the token)

    @property
    def name(self) -> str:
        return f"{self.pipeline}/{self.stage}/{self.job}"


@dataclass(frozen=True)
class RunKey:
    """GoCD's job identifier: what makes a row of the trace the same run as another."""

    pipeline: str
    pipeline_counter: int
    stage: str
    stage_counter: int
    job: str


@dataclass(frozen=True)
class JobRun:
    scheduled_ms: int  # epoch milliseconds, UTC
    profile: str
    environment: str
    pipeline: str
    waited_s: float  # scheduled -> assigned
    duration_s: float  # assigned -> completed: the time it held its agent
    built_s: float  # building -> completed
    cancelled: bool  # cancelled after it got its agent (kept: it held the agent)
    pipeline_counter: int | None = None  # None: the entry did not say
    stage: str = "build"
    stage_counter: int = 1
    job: str = "job"
    result: str = "Passed"  # or "Failed" (a failed or cancelled run)

    @property
    def key(self) -> RunKey:
        return RunKey(self.pipeline, self.pipeline_counter or 0, self.stage, self.stage_counter, self.job)


def config_name(instance_name: str) -> str:
    """The configured job a job instance runs: `unit-runInstance-3` runs `unit`."""
    match = _RUN_INSTANCE.fullmatch(instance_name)
    return match[1] if match else instance_name


def find_config(instance_name: str, jobs: Mapping[str, JobConfig]) -> JobConfig | None:
    """The config of a job instance among a stage's jobs (keyed by lower-cased name)."""
    exact = jobs.get(instance_name.lower())
    return exact if exact is not None else jobs.get(config_name(instance_name).lower())


def stage_job_run(
    item: Mapping[str, Any], job: JobConfig, pipeline_counter: int | None, stage_counter: int
) -> JobRun | str:
    """One job of a stage instance as a run, or the reason (one of REASONS) it is left out. The stage
    gives the counters (GoCD renders the job's own as null there)."""
    if item.get("original_job_id") is not None:
        return COPIED
    times = transitions(item.get("job_state_transitions"))
    scheduled = times.get("Scheduled", millis(item.get("scheduled_date")))
    if scheduled is None:
        return NO_SCHEDULED_TIME
    state = item.get("state")
    if state == "Rescheduled" or "Rescheduled" in times:
        return RESCHEDULED
    if state != "Completed":
        return NOT_FINISHED
    if "Completed" not in times:
        return NO_END
    in_order = [scheduled] + [times[name] for name in _ORDER[1:] if name in times]
    if any(later < earlier for earlier, later in itertools.pairwise(in_order)):
        return OUT_OF_ORDER
    on_agent = next((times[name] for name in _ON_AGENT if name in times), None)
    if on_agent is None:
        return NEVER_ASSIGNED
    completed = times["Completed"]
    assert job.profile is not None and job.environment is not None  # the caller checked both
    name = item.get("name")
    return JobRun(
        scheduled_ms=scheduled,
        profile=job.profile,
        environment=job.environment,
        pipeline=job.pipeline,
        waited_s=(on_agent - scheduled) / 1000,
        duration_s=(completed - on_agent) / 1000,
        built_s=(completed - times.get("Building", on_agent)) / 1000,
        cancelled=item.get("result") == "Cancelled",
        pipeline_counter=pipeline_counter,
        stage=job.stage,
        stage_counter=stage_counter,
        job=name if isinstance(name, str) and name else job.job,
        result="Failed" if item.get("result") in ("Failed", "Cancelled") else "Passed",
    )


def counter(value: Any) -> int | None:
    """A pipeline or stage counter, a number or (stage history's `counter`) a string of digits; None
    when absent or not a counter of 1 or more."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value >= 1 else None


def transitions(raw: Any) -> dict[str, int]:
    """State -> the first time GoCD recorded it; entries without a state or a time are skipped (the run
    is then judged on the ones it has)."""
    times: dict[str, int] = {}
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, Mapping):
            continue
        state, at = entry.get("state"), millis(entry.get("state_change_time"))
        if isinstance(state, str) and at is not None:
            times.setdefault(state, at)
    return times


def millis(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return int(value)
