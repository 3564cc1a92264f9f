"""The calls `trace` makes to GoCD's REST API, each answer checked and turned into plain values, and each
refusal into a sentence that names the call. What the answers hold, from gocd/gocd's source:

- Who the token is: `GET /go/api/admin/config/server/site_urls` (API v1,
  api/api-server-site-urls-config-v1 ServerSiteUrlsConfigControllerV1: `checkAdminUserAnd403`). A 200
  means a system administrator, who sees every pipeline group and environment; a 403 means not one.
- Pipeline groups: `GET /go/api/admin/pipeline_groups` (v1, PipelineGroupsControllerV1.index): only the
  groups the user may view (PipelineConfigsService.getGroupsForUser), and a 403 for a user who
  administers no group. `_embedded.groups[]`, each with `name` and `pipelines[]` of `{"name": N}`.
- Pipeline config: `GET /go/api/admin/pipelines/:name` (v11, PipelineConfigControllerV11): a 403 unless
  the user administers the pipeline's group. `stages[]`, each with `name` and `jobs[]` of `name` and, for a
  job on an elastic agent, `elastic_profile_id`; a pipeline built from a template has `template` set and
  `stages` null (the template's: `GET /go/api/admin/templates/:name`, v7); values may hold `#{name}`,
  filled from `parameters[]`.
- Environments: `GET /go/api/admin/environments` (v3, EnvironmentsControllerV3.index): only those the
  user may view. `_embedded.environments[]` with `name` and `pipelines[]`; a pipeline is in one at most.
- Stage history: `GET /go/api/stages/:pipeline/:stage/history` (v3, StageInstanceControllerV3.history;
  Stage.xml `getStageHistoryViaCursor`): `stages[]`, newest first, each with `counter` (a string),
  `pipeline_counter` and `jobs[]` of `name`, `state`, `result`, `scheduled_date`: no transitions, so no
  job times. `page_size` is 10 to 100; the next (older) page is `_links.next.href` ending in
  `?after=<stage id>`, absent on the last page; an empty history is `{"stages": []}`.
- Stage instance: `GET /go/api/stages/:pipeline/:counter/:stage/:stage_counter` (v3, `instanceByCounter`):
  every job of that stage run with its transitions (`history_runs.py` reads them).

Reading all runs of a stage through its history and one stage instance per stage run is the fewest calls
GoCD allows: job history (api-job-instance-v1) has no transitions either (JobInstance.xml
`getJobHistoryViaCursor`), the job instance API asks one job at a time, and an agent's job history is
gone with the elastic agent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from elastic_agent.gocd.history_runs import JobConfig, counter, millis
from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient, _embedded

SITE_URLS_PATH = "/api/admin/config/server/site_urls"
PIPELINE_GROUPS_PATH = "/api/admin/pipeline_groups"
PIPELINE_PATH = "/api/admin/pipelines/{name}"
TEMPLATE_PATH = "/api/admin/templates/{name}"
ENVIRONMENTS_PATH = "/api/admin/environments"
STAGE_HISTORY_PATH = "/api/stages/{pipeline}/{stage}/history"
STAGE_INSTANCE_PATH = "/api/stages/{pipeline}/{counter}/{stage}/{stage_counter}"
SITE_URLS_ACCEPT = "application/vnd.go.cd.v1+json"
PIPELINE_GROUPS_ACCEPT = "application/vnd.go.cd.v1+json"
PIPELINE_ACCEPT = "application/vnd.go.cd.v11+json"
TEMPLATE_ACCEPT = "application/vnd.go.cd.v7+json"
ENVIRONMENTS_ACCEPT = "application/vnd.go.cd.v3+json"
STAGE_ACCEPT = "application/vnd.go.cd.v3+json"
PAGE_SIZE = 100  # GoCD's largest: the fewest calls

_PARAMETER = re.compile(r"#\{([^}]*)\}")
_CURSOR = re.compile(r"\d+")


class Forbidden(GoCDApiError):
    """GoCD refused a call (403). Where others may still pass (a pipeline whose group the user cannot
    administer) it is counted and reported; elsewhere it ends the read like any refusal."""


class Missing(GoCDApiError):
    """GoCD answered 404: an API this GoCD lacks, or a thing gone since it was listed (a deleted
    pipeline); fatal unless the caller knows which."""


@dataclass(frozen=True)
class HistoryJob:
    """A job of a stage run as stage history lists it: no times but when it was scheduled."""

    name: str
    state: str
    scheduled_ms: int | None


@dataclass(frozen=True)
class StageRun:
    pipeline: str
    pipeline_counter: int
    stage: str
    stage_counter: int
    jobs: tuple[HistoryJob, ...]

    @property
    def newest_ms(self) -> int | None:
        times = [job.scheduled_ms for job in self.jobs if job.scheduled_ms is not None]
        return max(times) if times else None


class Calls:
    """One kind of call each; every answer checked, every refusal a sentence naming the call."""

    def __init__(self, client: GoCDRestClient) -> None:
        self._client = client
        self._templates: dict[str, list[Any]] = {}
        self.admin_unknown = ""  # why is_admin could not tell, when it could not

    def is_admin(self) -> bool | None:
        """True for a system administrator, False for anyone else, None when GoCD did not say: a 404 (a
        GoCD without this API, or a proxy that hides it) or a 403 that is not GoCD's (a proxy that blocks
        the path answers its own page, not GoCD's JSON); `admin_unknown` then says which."""
        try:
            self._get(SITE_URLS_PATH, SITE_URLS_ACCEPT, "the server's site URLs", "site URLs")
        except Forbidden as error:
            if error.said is not None:
                return False
            self.admin_unknown = f"GET {SITE_URLS_PATH} was refused (403) by something other than GoCD"
            return None
        except Missing:
            self.admin_unknown = f"GET {SITE_URLS_PATH} answered 404 (an older GoCD, or a proxy hiding it)"
            return None
        return True

    def pipeline_names(self) -> list[str]:
        try:
            answer = self._get(
                PIPELINE_GROUPS_PATH, PIPELINE_GROUPS_ACCEPT, "the pipeline groups", "pipeline groups"
            )
        except Forbidden:
            raise GoCDApiError(
                "GoCD says the token's user may not list the pipeline groups (403): building a trace reads "
                "each pipeline's config, which needs a system administrator's personal access token (or a "
                "pipeline group administrator's, for that group's pipelines).",
                403,
            ) from None
        names: dict[str, None] = {}
        for group in _embedded(answer, "groups", "pipeline groups"):
            for pipeline in _list(group.get("pipelines"), "a pipeline group's pipelines"):
                names[_name(pipeline, "a pipeline group's pipeline")] = None
        return list(names)

    def environments(self) -> dict[str, str]:
        """Pipeline name (lower case: GoCD's names are case-insensitive) -> its environment."""
        answer = self._get(ENVIRONMENTS_PATH, ENVIRONMENTS_ACCEPT, "the environments", "environments")
        found: dict[str, str] = {}
        for environment in _embedded(answer, "environments", "environments"):
            name = _name(environment, "an environment")
            for pipeline in _list(environment.get("pipelines"), f"environment {name}'s pipelines"):
                found[_name(pipeline, f"environment {name}'s pipeline").lower()] = name
        return found

    def jobs(self, pipeline: str, environment: str | None) -> list[JobConfig]:
        """Every job of the pipeline's config; Forbidden when the user may not read it."""
        what = f"the config of pipeline {pipeline}"
        config = self._get(
            PIPELINE_PATH.format(name=quote(pipeline, safe="")), PIPELINE_ACCEPT, what, "pipeline config"
        )
        if not isinstance(config, Mapping):
            raise GoCDApiError(f"GoCD's answer for {what} is not a pipeline config")
        parameters = {
            _name(p, f"a parameter of pipeline {pipeline}"): str(p.get("value") or "")
            for p in _list(config.get("parameters"), f"the parameters of pipeline {pipeline}")
        }
        stages = config.get("stages")
        template = config.get("template")
        if stages is None and isinstance(template, str) and template:
            stages = self._template_stages(template)
        found = []
        for stage in _list(stages, f"the stages of pipeline {pipeline}"):
            stage_name = _name(stage, f"a stage of pipeline {pipeline}")
            for job in _list(stage.get("jobs"), f"the jobs of stage {pipeline}/{stage_name}"):
                profile = job.get("elastic_profile_id")
                if isinstance(profile, str):
                    profile = _PARAMETER.sub(lambda m: parameters.get(m[1], m[0]), profile).strip()
                found.append(
                    JobConfig(
                        pipeline,
                        stage_name,
                        _name(job, f"a job of stage {pipeline}/{stage_name}"),
                        profile if isinstance(profile, str) and profile else None,
                        environment,
                    )
                )
        return found

    def _template_stages(self, template: str) -> list[Any]:
        if template not in self._templates:
            what = f"template {template}"
            answer = self._get(
                TEMPLATE_PATH.format(name=quote(template, safe="")), TEMPLATE_ACCEPT, what, "template"
            )
            stages = answer.get("stages") if isinstance(answer, Mapping) else None
            self._templates[template] = _list(stages, f"the stages of template {template}")
        return self._templates[template]

    def stage_history(
        self, pipeline: str, stage: str, until: Callable[[StageRun], bool]
    ) -> tuple[list[StageRun], int]:
        """The stage's runs, newest first, page after page until `until(run)` holds for a run (it and
        older ones are not returned) or GoCD has no older page; and the number of pages read."""
        path = STAGE_HISTORY_PATH.format(pipeline=quote(pipeline, safe=""), stage=quote(stage, safe=""))
        what = f"the history of stage {pipeline}/{stage}"
        params = {"page_size": str(PAGE_SIZE)}
        runs: list[StageRun] = []
        cursors: set[str] = set()
        pages = 0
        while True:
            answer = self._get(path, STAGE_ACCEPT, what, "stage history", params)
            pages += 1
            items = answer.get("stages") if isinstance(answer, Mapping) else None
            for item in _list(items, f"`stages` in {what}", required=True):
                run = _stage_run(item, pipeline, stage, what)
                if until(run):
                    return runs, pages
                runs.append(run)
            cursor = _next_cursor(answer, what)
            if cursor is None or cursor in cursors:  # a repeated cursor would loop forever
                return runs, pages
            cursors.add(cursor)
            params = {"page_size": str(PAGE_SIZE), "after": cursor}

    def stage_instance(self, run: StageRun) -> list[Mapping[str, Any]]:
        """The jobs of one stage run, with their transitions."""
        path = STAGE_INSTANCE_PATH.format(
            pipeline=quote(run.pipeline, safe=""),
            counter=run.pipeline_counter,
            stage=quote(run.stage, safe=""),
            stage_counter=run.stage_counter,
        )
        what = f"stage run {run.pipeline}/{run.pipeline_counter}/{run.stage}/{run.stage_counter}"
        answer = self._get(path, STAGE_ACCEPT, what, "stage instance")
        jobs = answer.get("jobs") if isinstance(answer, Mapping) else None
        return _list(jobs, f"`jobs` in {what}", required=True)

    def _get(
        self, path: str, accept: str, what: str, kind: str, params: Mapping[str, str] | None = None
    ) -> Any:
        """The JSON answer. 403 and 404 raise Forbidden and Missing, which the caller turns into what they
        mean there; every other refusal is a GoCDApiError naming the call."""
        try:
            return self._client.get_json(path, accept, what, params, kind=kind)
        except GoCDApiError as error:
            said = f" GoCD said: {error.said.rstrip('.')}." if error.said else ""
            version = accept.removeprefix("application/vnd.go.cd.").removesuffix("+json")
            if error.status == 403:
                raise Forbidden(
                    f"GoCD says the token's user may not read {what} (403; the call: GET {path}).{said}",
                    403,
                    error.said,
                ) from None
            if error.status == 404:
                raise Missing(
                    f"GoCD answered 404 to GET {self._client.shown_url}{path}, {what} (API {version}).{said} "
                    "Is --server the server's URL, ending in /go (e.g. https://gocd.example.com/go), and is "
                    f"this GoCD new enough to have API {version} of it?",
                    404,
                    error.said,
                ) from None
            raise GoCDApiError(f"{error} (the call: {what}, GET {path})", error.status, error.said) from None


def _stage_run(item: Mapping[str, Any], pipeline: str, stage: str, what: str) -> StageRun:
    pipeline_counter = counter(item.get("pipeline_counter"))
    stage_counter = counter(item.get("counter"))
    if pipeline_counter is None or stage_counter is None:
        raise GoCDApiError(f"GoCD listed a run in {what} without its pipeline or stage counter")
    jobs = tuple(
        HistoryJob(
            _name(job, f"a job in {what}"),
            str(job.get("state") or ""),
            millis(job.get("scheduled_date")),
        )
        for job in _list(item.get("jobs"), f"the jobs of a run in {what}")
    )
    return StageRun(pipeline, pipeline_counter, stage, stage_counter, jobs)


def _next_cursor(answer: Mapping[str, Any], what: str) -> str | None:
    """The `after` cursor of `_links.next.href`; None on the last page."""
    links = answer.get("_links")
    following = links.get("next") if isinstance(links, Mapping) else None
    href = following.get("href") if isinstance(following, Mapping) else None
    if href is None:
        return None
    after = parse_qs(urlsplit(href).query).get("after", []) if isinstance(href, str) else []
    if len(after) != 1 or not _CURSOR.fullmatch(after[0]):
        raise GoCDApiError(f"GoCD's link to the next page of {what} has no `after` cursor: {href!r}")
    return after[0]


def _list(value: Any, what: str, *, required: bool = False) -> list[Mapping[str, Any]]:
    """A list of objects in an answer; GoCD renders an empty optional one as null."""
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise GoCDApiError(f"GoCD's answer is not what was expected: {what} is not a list of objects")
    return value


def _name(item: Mapping[str, Any], what: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise GoCDApiError(f"GoCD listed {what} without a name: the answer is not what was expected")
    return name
