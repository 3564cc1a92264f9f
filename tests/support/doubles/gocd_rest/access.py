"""Who may see what, as GoCD's SecurityService and GoConfigService decide it (server/.../service), and the
lookups the served endpoints need, indexed once so that each call is a few dictionary reads.

Permissions (security on; with security off every check passes, SecurityService.isUserAdmin and
hasViewPermissionForGroup return true at once):
- a system administrator may do everything;
- a group admin is one listed in the group's `admins` (BasicPipelineConfigs.isUserAnAdmin needs admins
  defined: a group without them has no group admin);
- viewing a group (hasViewPermissionForGroup): a system admin, an admin of the group, or a user in its
  `view` list; at HEAD a group without authorization is visible to system admins only (ViewConfig.hasUser
  over an empty list is false; PipelineConfigsTestBase "shouldReturnFalseForViewersOfAGroupIfAuthorization
  IsNotDefined");
- viewing a template (BasicCruiseConfig.isAuthorizedToViewTemplate): its view users, or any group admin
  (allowGroupAdmins defaults to true);
- viewing an environment (AbstractAuthorizationHelper.doesUserHasPermissions): system admins, or users
  whose role rules allow it (here: `Environment.viewers`).
Names of users, pipelines, stages, jobs, groups and templates compare without case, as GoCD's
CaseInsensitiveString and its case-insensitive database columns (create-schema.xml) do.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Generic, TypeVar

from tests.support.doubles.gocd_rest.world import (
    Environment,
    JobRun,
    PipelineConfig,
    PipelineGroup,
    StageRun,
    TemplateConfig,
    User,
    World,
)

ANONYMOUS = User("anonymous", "")
Row = TypeVar("Row", StageRun, JobRun)


class Access:
    """The world's permissions for one user."""

    def __init__(self, world: World, user: User) -> None:
        self._world = world
        self.user = user
        self._name = user.name.lower()

    @property
    def admin(self) -> bool:
        return not self._world.security or self.user.admin

    def admin_of(self, group: PipelineGroup) -> bool:
        return self.admin or self._name in _lower(group.admins)

    @property
    def any_group_admin(self) -> bool:
        return self.admin or any(self._name in _lower(group.admins) for group in self._world.groups)

    def views(self, group: PipelineGroup) -> bool:
        return self.admin_of(group) or self._name in _lower(group.viewers)

    def views_template(self, template: TemplateConfig) -> bool:
        return self.any_group_admin or self._name in _lower(template.viewers)

    def views_environment(self, environment: Environment) -> bool:
        return self.admin or self._name in _lower(environment.viewers)


def _lower(names: tuple[str, ...]) -> set[str]:
    return {name.lower() for name in names}


@dataclass
class History(Generic[Row]):
    """Rows of one history query, ascending by id, with the ids alone for bisecting."""

    rows: list[Row]

    def __post_init__(self) -> None:
        self.ids = [row.id for row in self.rows]

    def page(self, after: int, before: int, size: int) -> list[Row]:
        """Newest first, as getStageHistoryViaCursor / getJobHistoryViaCursor: `after` (older than it)
        wins over `before` (newer than it); neither, the latest."""
        if after > 0:
            end = bisect.bisect_left(self.ids, after)
            return self.rows[max(0, end - size) : end][::-1]
        if before > 0:
            start = bisect.bisect_right(self.ids, before)
            return self.rows[start : start + size][::-1]
        return self.rows[-size:][::-1]


class Index:
    """The world's lookups, case-insensitive, built once before serving."""

    def __init__(self, world: World) -> None:
        if any(stage.id == 0 for stage in world.stages):  # a world built by hand
            world.assign_ids()
        self.world = world
        self.users_by_token = {user.token: user for user in world.users.values()}
        self.pipelines = {name.lower(): config for name, config in world.pipelines.items()}
        self.templates = {name.lower(): config for name, config in world.templates.items()}
        self.groups = {group.name.lower(): group for group in world.groups}
        self.group_of = {name.lower(): group for group in world.groups for name in group.pipelines}
        stages: dict[tuple[str, str], list[StageRun]] = defaultdict(list)
        jobs: dict[tuple[str, str, str], list[JobRun]] = defaultdict(list)
        self.stage_runs: dict[tuple[str, int, str, int], StageRun] = {}
        self.pipeline_runs: set[tuple[str, int]] = set()
        for stage in sorted(world.stages, key=lambda s: s.id):
            pipeline, name = stage.pipeline.lower(), stage.name.lower()
            stages[(pipeline, name)].append(stage)
            self.stage_runs[(pipeline, stage.pipeline_counter, name, stage.counter)] = stage
            self.pipeline_runs.add((pipeline, stage.pipeline_counter))
            for job in stage.jobs:
                if job.original is None:  # getJobIdsForHistory: `originalJobId IS NULL`, ignored included
                    jobs[(pipeline, name, job.name.lower())].append(job)
        self.stage_history = {key: History(runs) for key, runs in stages.items()}
        self.job_history = {key: History(sorted(runs, key=lambda j: j.id)) for key, runs in jobs.items()}

    def pipeline(self, name: str) -> PipelineConfig | None:
        return self.pipelines.get(name.lower())

    def views_pipeline(self, access: Access, name: str) -> bool:
        """SecurityService.hasViewPermissionForPipeline: a pipeline in no group is visible to all."""
        group = self.group_of.get(name.lower())
        return group is None or access.views(group)

    def job_instance(
        self, pipeline: str, counter: int, stage: str, stage_counter: int, job: str
    ) -> JobRun | None:
        """JobInstanceSqlMapDao.mostRecentJobWithTransitions: the instance not ignored, and for a copy
        the job it was copied from (findJobId's UNION on originalJobId)."""
        run = self.stage_runs.get((pipeline.lower(), counter, stage.lower(), stage_counter))
        found = [j for j in run.active_jobs if j.name.lower() == job.lower()] if run else []
        if not found:
            return None
        latest = max(found, key=lambda j: j.scheduled_ms)
        return latest.original or latest
