"""Job history from GoCD's REST API, turned into job runs for a simulator trace (`trace_command.py`):
for each run of a job on an elastic agent, when it was scheduled, how long it waited for an agent and how
long it held one.

Facts it relies on (GoCD's API reference, api.gocd.org, and gocd/gocd's controllers and representers):

- Pipeline groups: `GET /go/api/admin/pipeline_groups`, `Accept: application/vnd.go.cd.v1+json` (since
  18.8): `_embedded.groups[]`, each with `name` and `pipelines[]` of `{"name": N}`.
- Pipeline config: `GET /go/api/admin/pipelines/:name`, `Accept: application/vnd.go.cd.v11+json`
  (PipelineConfigRepresenter): `stages[]`, each with `name` and `jobs[]`, each with `name` and, only for a
  job on an elastic agent, `elastic_profile_id`. A pipeline built from a template has `template` set and
  `stages` null; the stages are the template's, `GET /go/api/admin/templates/:name`, `Accept:
  application/vnd.go.cd.v7+json`, the same `stages[]`. The config is as written, so a value may hold
  `#{name}`, filled from the pipeline's `parameters[]` (`{"name": N, "value": V}`). Reading a pipeline's
  config needs admin rights over its group.
- Environments: `GET /go/api/admin/environments`, `Accept: application/vnd.go.cd.v3+json`:
  `_embedded.environments[]`, each with `name` and `pipelines[]` of `{"name": N}`; GoCD lets a pipeline be
  in one environment at most.
- Job history: `GET /go/api/jobs/:pipeline/:stage/:job/history`, `Accept: application/vnd.go.cd.v1+json`
  (cursor paging since 20.1): `jobs[]`, newest first, each with `state` (the last one), `result`,
  `scheduled_date` (epoch ms) and `job_state_transitions[]` of `{"state": S, "state_change_time": ms}`,
  S one of Scheduled, Assigned, Preparing, Building, Completing, Completed, Rescheduled. `page_size` is 10
  to 100 (default 10). The answer has no job ids: the next (older) page is `_links.next.href`, a URL
  ending in `?after=<cursor>`, absent on the last page; an empty history is `{"jobs": []}` alone.
  A job that lost its agent is marked Rescheduled and GoCD schedules it again as a new run (listed too).
  Each entry also names its place in the pipeline (JobInstanceRepresenter v1): `pipeline_name`,
  `pipeline_counter` (a number), `stage_name` and `stage_counter` (a string, "1"); `result` is one of
  Passed, Failed, Cancelled, Unknown (JobResult).
- A cancelled job ends Completed with result Cancelled, with whatever transitions it reached.

What a run becomes: `waited` is Scheduled -> Assigned (the first of Assigned, Preparing, Building or
Completing that GoCD recorded: a missing Assigned does not lose the run). `duration` is Assigned ->
Completed, the time the run held its agent, because the simulator holds the agent for `duration` from the
assignment (simulation/gocd_model.py); `built` is Building -> Completed, for reference. Runs still going,
rescheduled ones, ones that never got an agent, ones without a Completed time and ones whose transitions
are out of order are left out and counted by reason. A run cancelled after it got its agent is kept: it
held the agent until then. A run keeps its job identifier (pipeline counter, stage, stage counter, job
name), the stage and job names from the config the history was asked for; its result is Passed or Failed,
a cancelled run Failed, since like a failure it ends its pipeline's run there (no later stage follows).
The elastic profile and environment are today's config: GoCD's history does not record
which profile a past run used.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient, _embedded

PIPELINE_GROUPS_PATH = "/api/admin/pipeline_groups"
PIPELINE_PATH = "/api/admin/pipelines/{name}"
TEMPLATE_PATH = "/api/admin/templates/{name}"
ENVIRONMENTS_PATH = "/api/admin/environments"
JOB_HISTORY_PATH = "/api/jobs/{pipeline}/{stage}/{job}/history"
PIPELINE_GROUPS_ACCEPT = "application/vnd.go.cd.v1+json"
PIPELINE_ACCEPT = "application/vnd.go.cd.v11+json"
TEMPLATE_ACCEPT = "application/vnd.go.cd.v7+json"
ENVIRONMENTS_ACCEPT = "application/vnd.go.cd.v3+json"
JOB_HISTORY_ACCEPT = "application/vnd.go.cd.v1+json"
PAGE_SIZE = 100  # GoCD's largest: the fewest calls for a week of history

# Why a run is left out (the keys of History.left_out, in the order they are reported).
NOT_FINISHED = "still waiting or running when read"
RESCHEDULED = "rescheduled (GoCD ran the job again as a new run, counted on its own)"
NEVER_ASSIGNED = "never got an agent (cancelled while waiting)"
NO_END = "without a Completed time"
OUT_OF_ORDER = "with state transitions out of order (clocks?)"
NO_SCHEDULED_TIME = "without a scheduled time"
REASONS = (NOT_FINISHED, RESCHEDULED, NEVER_ASSIGNED, NO_END, OUT_OF_ORDER, NO_SCHEDULED_TIME)

_ORDER = ("Scheduled", "Assigned", "Preparing", "Building", "Completing", "Completed")
_ON_AGENT = ("Assigned", "Preparing", "Building", "Completing")  # the first of these: the agent has it
_PARAMETER = re.compile(r"#\{([^}]*)\}")
_CURSOR = re.compile(r"\d+")


@dataclass(frozen=True)
class JobConfig:
    pipeline: str
    stage: str
    job: str
    profile: str | None  # the elastic profile id; None: the job runs on static agents
    environment: str  # "" when the pipeline is in none

    @property
    def name(self) -> str:
        return f"{self.pipeline}/{self.stage}/{self.job}"


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


@dataclass
class History:
    jobs: list[JobConfig] = field(default_factory=list)  # every job of every pipeline read
    runs: list[JobRun] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)  # runs since --since left out, by reason
    pages: int = 0  # job history pages read

    @property
    def static_jobs(self) -> list[JobConfig]:
        return [job for job in self.jobs if job.profile is None]


def read_history(
    client: GoCDRestClient, since_ms: int, progress: Callable[[str], None] = lambda _: None
) -> History:
    """Every run since `since_ms` (epoch ms) of every job on an elastic profile; GoCDApiError (with a
    sentence) on the first call GoCD refuses, since every further call would fail the same way."""
    reader = _Reader(client)
    history = History()
    environments = reader.environments()
    pipelines = reader.pipeline_names()
    progress(f"GoCD at {client.shown_url}: {len(pipelines)} pipelines; reading their configs")
    for pipeline in pipelines:
        history.jobs.extend(reader.jobs(pipeline, environments.get(pipeline, "")))
    elastic = [job for job in history.jobs if job.profile is not None]
    progress(f"{len(elastic)} of {len(history.jobs)} jobs run on elastic agents; reading their history")
    for number, job in enumerate(elastic, start=1):
        before = len(history.runs) + sum(history.left_out.values())
        for item in reader.job_history(job, since_ms, history):
            outcome = job_run(item, job)
            if isinstance(outcome, JobRun):
                history.runs.append(outcome)
            else:
                history.left_out[outcome] += 1
        found = len(history.runs) + sum(history.left_out.values()) - before
        progress(f"[{number}/{len(elastic)}] {job.name}: {found} runs since --since")
    progress(f"read {history.pages} pages of job history")
    history.runs.sort(key=lambda run: run.scheduled_ms)
    return history


def job_run(item: Mapping[str, Any], job: JobConfig) -> JobRun | str:
    """One entry of a job's history as a run, or the reason (one of REASONS) it is left out."""
    times = _transitions(item.get("job_state_transitions"))
    scheduled = times.get("Scheduled", scheduled_ms(item))
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
    assert job.profile is not None  # only elastic jobs' history is read
    return JobRun(
        scheduled_ms=scheduled,
        profile=job.profile,
        environment=job.environment,
        pipeline=job.pipeline,
        waited_s=(on_agent - scheduled) / 1000,
        duration_s=(completed - on_agent) / 1000,
        built_s=(completed - times.get("Building", on_agent)) / 1000,
        cancelled=item.get("result") == "Cancelled",
        pipeline_counter=_counter(item.get("pipeline_counter")),
        stage=job.stage,
        stage_counter=_counter(item.get("stage_counter")) or 1,
        job=job.job,
        result="Failed" if item.get("result") in ("Failed", "Cancelled") else "Passed",
    )


def _counter(value: Any) -> int | None:
    """A pipeline or stage counter, a number or (stage_counter) a string of digits; None when absent or
    not a counter of 1 or more."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value >= 1 else None


def scheduled_ms(item: Mapping[str, Any]) -> int | None:
    """When GoCD scheduled the run (epoch ms): its Scheduled transition, else `scheduled_date`."""
    times = _transitions(item.get("job_state_transitions"))
    return times.get("Scheduled", _millis(item.get("scheduled_date")))


def _transitions(raw: Any) -> dict[str, int]:
    """State -> the first time GoCD recorded it; entries without a state or a time are skipped (the run
    is then judged on the ones it has)."""
    times: dict[str, int] = {}
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, Mapping):
            continue
        state, at = entry.get("state"), _millis(entry.get("state_change_time"))
        if isinstance(state, str) and at is not None:
            times.setdefault(state, at)
    return times


def _millis(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return int(value)


# --- the calls -----------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, client: GoCDRestClient) -> None:
        self._client = client
        self._templates: dict[str, list[Any]] = {}

    def pipeline_names(self) -> list[str]:
        answer = self._get(PIPELINE_GROUPS_PATH, PIPELINE_GROUPS_ACCEPT, "the pipeline groups")
        names: dict[str, None] = {}
        for group in _embedded(answer, "groups", "pipeline groups"):
            for pipeline in _list(group.get("pipelines"), "a pipeline group's pipelines"):
                names[_name(pipeline, "a pipeline group's pipeline")] = None
        return list(names)

    def environments(self) -> dict[str, str]:
        """Pipeline name -> its environment."""
        answer = self._get(ENVIRONMENTS_PATH, ENVIRONMENTS_ACCEPT, "the environments")
        found: dict[str, str] = {}
        for environment in _embedded(answer, "environments", "environments"):
            name = _name(environment, "an environment")
            for pipeline in _list(environment.get("pipelines"), f"environment {name}'s pipelines"):
                found[_name(pipeline, f"environment {name}'s pipeline")] = name
        return found

    def jobs(self, pipeline: str, environment: str) -> Iterator[JobConfig]:
        what = f"the config of pipeline {pipeline}"
        config = self._get(PIPELINE_PATH.format(name=quote(pipeline, safe="")), PIPELINE_ACCEPT, what)
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
        for stage in _list(stages, f"the stages of pipeline {pipeline}"):
            stage_name = _name(stage, f"a stage of pipeline {pipeline}")
            for job in _list(stage.get("jobs"), f"the jobs of stage {pipeline}/{stage_name}"):
                profile = job.get("elastic_profile_id")
                if isinstance(profile, str):
                    profile = _PARAMETER.sub(lambda m: parameters.get(m[1], m[0]), profile).strip()
                yield JobConfig(
                    pipeline,
                    stage_name,
                    _name(job, f"a job of stage {pipeline}/{stage_name}"),
                    profile if isinstance(profile, str) and profile else None,
                    environment,
                )

    def _template_stages(self, template: str) -> list[Any]:
        if template not in self._templates:
            what = f"template {template}"
            answer = self._get(TEMPLATE_PATH.format(name=quote(template, safe="")), TEMPLATE_ACCEPT, what)
            stages = answer.get("stages") if isinstance(answer, Mapping) else None
            self._templates[template] = _list(stages, f"the stages of template {template}")
        return self._templates[template]

    def job_history(self, job: JobConfig, since_ms: int, history: History) -> Iterator[Mapping[str, Any]]:
        """The job's runs scheduled since `since_ms`, newest first, page after page until one reaches past
        `since_ms` or GoCD has no next page."""
        path = JOB_HISTORY_PATH.format(
            pipeline=quote(job.pipeline, safe=""),
            stage=quote(job.stage, safe=""),
            job=quote(job.job, safe=""),
        )
        what = f"the history of job {job.name}"
        params = {"page_size": str(PAGE_SIZE)}
        cursors: set[str] = set()
        while True:
            answer = self._get(path, JOB_HISTORY_ACCEPT, what, params)
            history.pages += 1
            items = answer.get("jobs") if isinstance(answer, Mapping) else None
            reached_since = False
            for item in _list(items, f"`jobs` in {what}", required=True):
                at = scheduled_ms(item)
                if at is not None and at < since_ms:
                    reached_since = True
                    continue
                yield item
            cursor = _next_cursor(answer, what)
            if reached_since or cursor is None or cursor in cursors:  # a repeated cursor would loop forever
                return
            cursors.add(cursor)
            params = {"page_size": str(PAGE_SIZE), "after": cursor}

    def _get(self, path: str, accept: str, what: str, params: Mapping[str, str] | None = None) -> Any:
        """The JSON answer; a refusal reworded where rest_api's sentence is about migrating profiles."""
        try:
            return self._client.get_json(path, accept, what, params)
        except GoCDApiError as error:
            if error.status == 403:
                raise GoCDApiError(
                    f"GoCD says the token's user may not read {what} (403): building a trace reads every "
                    "pipeline's config and the environments, which needs the personal access token of a "
                    "system administrator.",
                    403,
                ) from None
            if error.status == 404:
                raise GoCDApiError(
                    f"GoCD has no API at {self._client.shown_url}{path} (404) for {what}: is --server the "
                    "server's URL, ending in /go (e.g. https://gocd.example.com/go), and is GoCD 20.1 or "
                    "later (the job history API v1)?",
                    404,
                ) from None
            raise


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
        raise GoCDApiError(
            f"GoCD's answer is not what was expected ({what} is not a list of objects): is --server a GoCD "
            "server of version 20.1 or later?"
        )
    return value


def _name(item: Mapping[str, Any], what: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise GoCDApiError(f"GoCD listed {what} without a name: the answer is not what was expected")
    return name
