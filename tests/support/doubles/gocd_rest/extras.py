"""The cases a real GoCD history holds that a trace does not, each recorded as gocd/gocd records it, in
pipelines of their own (`extra-*`) so that the trace's jobs stay as they were:

- `extra-multi`: a job with `run_instance_count` 3, run as `shard-runInstance-1` to `-3`
  (RunMultipleInstance.CounterBasedJobNameGenerator: `name-runInstance-N`, the marker of
  RunMultipleInstanceJobTypeConfig); its history is asked for by instance name, not `shard`.
- `extra-rerun`: a stage whose failed job was rerun (ScheduleService.rerunFailedJobs ->
  InstanceFactory.createStageForRerunOfJobs): counter 2, `rerun_of_counter` 1, approved by the user who
  asked; the job that passed is a copy (JobInstance.resetForCopy: `original_job_id` the first run's id,
  `rerun` false, its transitions, state, result and agent those of the original), the failed one ran
  again (`rerun` true, scheduled when the stage was).
- `extra-reschedule`: a job whose agent went away while building (ScheduleService.rescheduleJob): the old
  instance gets a Rescheduled transition and `ignored` (state Rescheduled, result Unknown, its agent kept);
  a new instance, a clone rescheduled (JobInstance.reschedule), is scheduled then and runs to the end.
- `extra-cancel`: two runs cancelled by a user (StageService.cancelStage -> JobInstance.cancel: straight
  to Completed, result Cancelled, no Completing): one while it waited for an agent (never Assigned), one
  while it built; the stage's `cancelled_by` is the user.
- `extra-running`: a run still in progress at `now`: one job Building, one still Scheduled.
- `extra-static`: a job with no elastic profile (a static agent, `resources` instead).
- `extra-templated`: a pipeline built from template `extra-template`, whose job's elastic profile is
  `#{PROFILE}`, the pipeline's parameter `PROFILE` = node.
- `extra-secret`, alone in group `admins-only`, which has no authorization: only a system admin sees it.
`extras-env` holds extra-rerun, extra-static and extra-templated; the other extras are in no environment.
They are placed in the eight hours before `now`, the running one a few minutes before it.
"""

from __future__ import annotations

import random

from tests.support.doubles.gocd_rest.timeline import agent_uuid, agent_wait_ms, cut, transitions
from tests.support.doubles.gocd_rest.world import (
    ASSIGNED,
    BUILDING,
    COMPLETED,
    PREPARING,
    RESCHEDULED,
    SCHEDULED,
    Environment,
    JobConfig,
    JobRun,
    PipelineConfig,
    PipelineGroup,
    StageConfig,
    StageRun,
    TemplateConfig,
    Transition,
    World,
)

GROUP = "extras"
ADMINS_ONLY = "admins-only"
ENVIRONMENT = "extras-env"
TEMPLATE = "extra-template"
PIPELINES = (
    "extra-multi",
    "extra-rerun",
    "extra-reschedule",
    "extra-cancel",
    "extra-running",
    "extra-static",
    "extra-templated",
    "extra-secret",
)
IN_ENVIRONMENT = ("extra-rerun", "extra-static", "extra-templated")
CANCELLED_BY = "admin"  # the user who cancels and reruns
STATIC_AGENT = "5e1d8a0c-9b7f-4c1e-8f3a-2d6b7c9e0a11"  # a static agent, registered for good
_MINUTE_MS = 60_000


def add(
    world: World, rng: random.Random, *, taken: set[str], viewers: tuple[str, ...], admins: tuple[str, ...]
) -> None:
    """The extras added to `world`, their group viewed and administered by those users; ValueError if
    the trace already has one of their pipelines."""
    clash = [name for name in PIPELINES if name in taken]
    if clash:
        raise ValueError(f"the trace already has pipeline(s) {', '.join(clash)}, which the extras add")
    group_names = {group.name.lower() for group in world.groups}
    group = GROUP if GROUP not in group_names else f"{GROUP}-double"
    hidden = ADMINS_ONLY if ADMINS_ONLY not in group_names else f"{ADMINS_ONLY}-double"
    stages = _Stages(world, rng)
    start = world.now_ms - 8 * 60 * _MINUTE_MS
    for number, case in enumerate((_multi, _rerun, _reschedule, _cancel, _static, _templated, _secret)):
        case(stages, start + number * 45 * _MINUTE_MS)
    _running(stages, world.now_ms - 3 * _MINUTE_MS)
    jobs = {
        "extra-multi": ("test", (JobConfig("shard", "java", run_instance_count=3),)),
        "extra-rerun": ("test", (JobConfig("lint", "java"), JobConfig("unit", "java"))),
        "extra-reschedule": ("build", (JobConfig("compile", "java"),)),
        "extra-cancel": ("deploy", (JobConfig("deploy", "go"),)),
        "extra-running": ("build", (JobConfig("compile", "java"), JobConfig("lint", "node"))),
        "extra-static": ("package", (JobConfig("package", None, resources=("linux",)),)),
        "extra-secret": ("deploy", (JobConfig("deploy", "go"),)),
    }
    for name, (stage, configs) in jobs.items():
        world.pipelines[name] = PipelineConfig(
            name, hidden if name == "extra-secret" else group, (StageConfig(stage, configs),)
        )
    world.pipelines["extra-templated"] = PipelineConfig(
        "extra-templated", group, template=TEMPLATE, parameters=(("PROFILE", "node"),)
    )
    world.templates[TEMPLATE] = TemplateConfig(
        TEMPLATE, (StageConfig("build", (JobConfig("compile", "#{PROFILE}"),)),)
    )
    visible = tuple(name for name in PIPELINES if name != "extra-secret")
    world.groups += [
        PipelineGroup(group, visible, viewers, admins),
        PipelineGroup(hidden, ("extra-secret",)),
    ]
    world.environments.append(Environment(ENVIRONMENT, IN_ENVIRONMENT))


class _Stages:
    """Adds stage runs and their jobs to the world."""

    def __init__(self, world: World, rng: random.Random) -> None:
        self.world, self.rng = world, rng

    def stage(
        self,
        pipeline: str,
        counter: int,
        name: str,
        at_ms: int,
        *,
        stage_counter: int = 1,
        rerun_of_counter: int | None = None,
        approved_by: str = "changes",
        cancelled_by: str | None = None,
    ) -> StageRun:
        run = StageRun(
            pipeline,
            counter,
            name,
            stage_counter,
            at_ms,
            approved_by=approved_by,
            cancelled_by=cancelled_by,
            rerun_of_counter=rerun_of_counter,
        )
        self.world.stages.append(run)
        return run

    def job(
        self,
        run: StageRun,
        name: str,
        profile: str | None,
        *,
        minutes: float,
        result: str = "Passed",
        config: str = "",
    ) -> JobRun:
        """A run of `minutes` on an agent, scheduled with the stage, as the server shows it at now."""
        assigned = run.created_ms + agent_wait_ms(self.rng)
        job = JobRun(
            name,
            config or name,
            run.created_ms,
            transitions(run.created_ms, assigned, round(minutes * _MINUTE_MS)),
            result=result,
            agent_uuid=agent_uuid(self.rng) if profile is not None else STATIC_AGENT,
            profile=profile,
            environment=ENVIRONMENT if run.pipeline in IN_ENVIRONMENT else None,
        )
        return cut(run.add(job), self.world.now_ms)


def _multi(stages: _Stages, at: int) -> None:
    run = stages.stage("extra-multi", 1, "test", at)
    for number in (1, 2, 3):
        stages.job(run, f"shard-runInstance-{number}", "java", minutes=4 + number, config="shard")


def _rerun(stages: _Stages, at: int) -> None:
    first = stages.stage("extra-rerun", 1, "test", at)
    lint = stages.job(first, "lint", "java", minutes=3, result="Failed")
    unit = stages.job(first, "unit", "java", minutes=6)
    again = stages.stage(
        "extra-rerun",
        1,
        "test",
        at + 20 * _MINUTE_MS,
        stage_counter=2,
        rerun_of_counter=1,
        approved_by=CANCELLED_BY,
    )
    copy = JobRun(
        unit.name,
        unit.config_name,
        unit.scheduled_ms,
        list(unit.transitions),
        result=unit.result,
        agent_uuid=unit.agent_uuid,
        original=unit,
        profile=unit.profile,
        environment=unit.environment,
    )
    again.add(copy)
    stages.job(again, lint.name, "java", minutes=3).rerun = True


def _reschedule(stages: _Stages, at: int) -> None:
    run = stages.stage("extra-reschedule", 1, "build", at)
    old = stages.job(run, "compile", "java", minutes=30)
    lost = old.time_of(BUILDING) or at  # the agent went away five minutes into the build
    lost += 5 * _MINUTE_MS
    old.transitions = [t for t in old.transitions if t.at_ms <= lost] + [Transition(RESCHEDULED, lost)]
    old.result, old.ignored = "Unknown", True
    assigned = lost + agent_wait_ms(stages.rng)
    new = JobRun(
        "compile",
        "compile",
        lost,
        transitions(lost, assigned, 12 * _MINUTE_MS),
        result="Passed",
        agent_uuid=agent_uuid(stages.rng),
        profile="java",
        created_ms=lost,
    )
    cut(run.add(new), stages.world.now_ms)


def _cancel(stages: _Stages, at: int) -> None:
    waiting = stages.stage("extra-cancel", 1, "deploy", at, cancelled_by=CANCELLED_BY)
    job = stages.job(waiting, "deploy", "go", minutes=2)
    job.transitions = [Transition(SCHEDULED, at), Transition(COMPLETED, at + 90_000)]
    job.result, job.agent_uuid = "Cancelled", None
    building_at = at + 10 * _MINUTE_MS
    building = stages.stage("extra-cancel", 2, "deploy", building_at, cancelled_by=CANCELLED_BY)
    job = stages.job(building, "deploy", "go", minutes=10)
    started = job.time_of(BUILDING) or building_at
    job.transitions = [t for t in job.transitions if t.state in (SCHEDULED, ASSIGNED, PREPARING, BUILDING)]
    job.transitions.append(Transition(COMPLETED, started + 60_000))
    job.result = "Cancelled"


def _running(stages: _Stages, at: int) -> None:
    run = stages.stage("extra-running", 1, "build", at)
    stages.job(run, "compile", "java", minutes=60)
    waiting = stages.job(run, "lint", "node", minutes=5)
    waiting.transitions, waiting.agent_uuid = [Transition(SCHEDULED, at)], None


def _static(stages: _Stages, at: int) -> None:
    stages.job(stages.stage("extra-static", 1, "package", at), "package", None, minutes=2)


def _templated(stages: _Stages, at: int) -> None:
    stages.job(stages.stage("extra-templated", 1, "build", at), "compile", "node", minutes=3)


def _secret(stages: _Stages, at: int) -> None:
    stages.job(stages.stage("extra-secret", 1, "deploy", at), "deploy", "go", minutes=2)
