"""What a GoCD installation holds, as its config and its database do: users and their tokens, pipeline
groups with who may view and administer them, pipelines of stages of jobs (or a template with
parameters), environments, and the stage runs with their job instances and state transitions.

The world is a snapshot at `now_ms`: a transition later than that has not happened. It is built once
(`world_from_trace`, or by hand) and only read while served, so the server needs no locks.

Job instances are GoCD's `builds` rows (server/.../maps/JobInstance.xml): `ignored` marks the old
instance of a rescheduled job (ScheduleService.rescheduleJob), `original` the job a copy in a rerun stage
was copied from (JobInstance.resetForCopy: originalJobId), `rerun` a job that ran again in a rerun stage
(SingleJobInstance/RunMultipleInstance.createRerunInstances). Database ids grow with creation time
(`assign_ids`): a stage run and its jobs when it is scheduled, a rescheduled job's new instance when it
is rescheduled.

`truth()` is the ground truth a trace read over the REST API is held against: one record per job
instance, ignored ones included, from the world itself, never from its HTTP answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# GoCD's JobState names, in the order a run goes through them (domain JobState).
SCHEDULED, ASSIGNED, PREPARING, BUILDING, COMPLETING, COMPLETED = (
    "Scheduled",
    "Assigned",
    "Preparing",
    "Building",
    "Completing",
    "Completed",
)
RESCHEDULED = "Rescheduled"
UNKNOWN = "Unknown"  # JobResult and StageResult before the end

# What a job instance is (TruthRecord.kind).
RAN, COPIED, RESCHEDULED_KIND, NEVER_ASSIGNED, UNFINISHED, STATIC = (
    "ran",
    "copied",
    "rescheduled",
    "never-assigned",
    "unfinished",
    "static",
)


@dataclass(frozen=True)
class User:
    name: str
    token: str  # 40 characters, as GoCD's AccessTokenService requires
    admin: bool = False  # a system administrator


@dataclass(frozen=True)
class JobConfig:
    name: str
    elastic_profile_id: str | None  # None: the job runs on static agents; may hold `#{PARAM}`
    run_instance_count: int | None = None  # GoCD runs that many instances, `name-runInstance-N`
    resources: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageConfig:
    name: str
    jobs: tuple[JobConfig, ...]


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    group: str
    stages: tuple[StageConfig, ...] = ()  # empty when the pipeline uses a template
    template: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()  # (name, value), in config order
    timer: str | None = None  # a cron spec


@dataclass(frozen=True)
class TemplateConfig:
    name: str
    stages: tuple[StageConfig, ...]
    viewers: tuple[str, ...] = ()  # template view users; group admins may view it too (allowGroupAdmins)


@dataclass(frozen=True)
class PipelineGroup:
    name: str
    pipelines: tuple[str, ...]
    viewers: tuple[str, ...] = ()
    admins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Environment:
    name: str
    pipelines: tuple[str, ...]
    viewers: tuple[str, ...] = ()  # users whose role rules allow viewing it; admins see every one


@dataclass(frozen=True)
class Transition:
    state: str
    at_ms: int


@dataclass(eq=False)
class JobRun:
    """One job instance (a `builds` row) with its transitions (`buildstatetransitions`, in insertion
    order). `profile` and `environment` are what the run really had: the ground truth."""

    name: str  # as GoCD names the instance
    config_name: str
    scheduled_ms: int
    transitions: list[Transition]
    result: str = UNKNOWN
    agent_uuid: str | None = None
    rerun: bool = False
    original: JobRun | None = field(default=None, repr=False)
    ignored: bool = False
    profile: str | None = None
    environment: str | None = None
    created_ms: int = 0  # when its row was inserted: orders the ids
    id: int = 0
    stage: StageRun = field(default=None, repr=False)  # type: ignore[assignment]  # set by StageRun

    @property
    def state(self) -> str:
        return self.transitions[-1].state

    @property
    def original_job_id(self) -> int | None:
        return None if self.original is None else self.original.id

    def time_of(self, state: str) -> int | None:
        return next((t.at_ms for t in self.transitions if t.state == state), None)


@dataclass(eq=False)
class StageRun:
    pipeline: str
    pipeline_counter: int
    name: str
    counter: int
    created_ms: int
    approved_by: str = "changes"
    approval_type: str = "success"
    cancelled_by: str | None = None
    rerun_of_counter: int | None = None
    jobs: list[JobRun] = field(default_factory=list)
    id: int = 0

    def add(self, job: JobRun) -> JobRun:
        job.stage = self
        if not job.created_ms:
            job.created_ms = self.created_ms
        self.jobs.append(job)
        return job

    @property
    def active_jobs(self) -> list[JobRun]:
        """The jobs GoCD shows for the stage: not the ignored ones (`builds.ignored != true`)."""
        return [job for job in self.jobs if not job.ignored]

    @property
    def result(self) -> str:
        """StageState.findByBuilds over its jobs, as StageResult."""
        jobs = self.active_jobs
        if not jobs:
            return UNKNOWN
        building = any(job.state != COMPLETED for job in jobs)
        failed = any(job.result == "Failed" for job in jobs)
        if building:
            return "Failed" if failed else UNKNOWN
        if any(job.result == "Cancelled" for job in jobs):
            return "Cancelled"
        if failed:
            return "Failed"
        return UNKNOWN if any(job.result == UNKNOWN for job in jobs) else "Passed"

    @property
    def last_transitioned_ms(self) -> int:
        """stages.lastTransitionedTime, which a trigger sets on every transition inserted."""
        return max((t.at_ms for job in self.jobs for t in job.transitions), default=self.created_ms)


@dataclass(frozen=True)
class TruthRecord:
    pipeline: str
    pipeline_counter: int
    stage: str
    stage_counter: int
    job: str  # the instance's name
    config_job: str
    profile: str | None
    environment: str | None
    scheduled_ms: int
    assigned_ms: int | None
    completed_ms: int | None
    result: str
    kind: str  # RAN, COPIED, RESCHEDULED_KIND, NEVER_ASSIGNED, UNFINISHED or STATIC
    job_id: int


@dataclass
class World:
    now_ms: int
    users: dict[str, User]
    groups: list[PipelineGroup]
    pipelines: dict[str, PipelineConfig]
    stages: list[StageRun]
    templates: dict[str, TemplateConfig] = field(default_factory=dict)
    environments: list[Environment] = field(default_factory=list)
    security: bool = True
    site_url: str = ""
    secure_site_url: str = ""

    @property
    def tokens(self) -> dict[str, str]:
        return {name: user.token for name, user in self.users.items()}

    def assign_ids(self) -> None:
        """Database ids in creation order: stage runs by when they were scheduled, job instances by when
        their rows were inserted (ties keep the order they were added in)."""
        for number, stage in enumerate(sorted(self.stages, key=lambda s: s.created_ms), start=1):
            stage.id = number
        jobs = [job for stage in sorted(self.stages, key=lambda s: s.id) for job in stage.jobs]
        for number, job in enumerate(sorted(jobs, key=lambda j: j.created_ms), start=1):
            job.id = number

    def truth(self) -> list[TruthRecord]:
        return [
            TruthRecord(
                stage.pipeline,
                stage.pipeline_counter,
                stage.name,
                stage.counter,
                job.name,
                job.config_name,
                job.profile,
                job.environment,
                job.scheduled_ms,
                job.time_of(ASSIGNED),
                job.time_of(COMPLETED),
                job.result,
                _kind(job),
                job.id,
            )
            for stage in sorted(self.stages, key=lambda s: s.id)
            for job in sorted(stage.jobs, key=lambda j: j.id)
        ]


def _kind(job: JobRun) -> str:
    if job.ignored:
        return RESCHEDULED_KIND
    if job.original is not None:
        return COPIED
    if job.state != COMPLETED:
        return UNFINISHED
    if job.time_of(ASSIGNED) is None:
        return NEVER_ASSIGNED
    return STATIC if job.profile is None else RAN
