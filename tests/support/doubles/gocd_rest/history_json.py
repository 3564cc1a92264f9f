"""The job-history answers, written as gocd/gocd's representers write them (api/api-stage-instance-v3 and
api/api-job-instance-v1, .../representers), field for field and in their order.

- Stage history (StageInstancesRepresenter, StageInstanceRepresenter, JobHistoryItemRepresenter):
  `_links` (`previous`, `next`) only when the page does not reach the latest or the oldest run, then
  `stages`; an empty history is `{"stages": []}` with no links. `counter` is a string there
  (StageInstanceModel.counter), `pipeline_counter` a number, and a job is only name, state, result,
  scheduled_date.
- Stage instance (StageRepresenter, JobInstanceRepresenter, JobStateTransitionRepresenter): `counter` a
  number, `scheduled_at`, `last_transitioned_time`, and each job with rerun, original_job_id, agent_uuid,
  the four identifier fields always null, and its transitions. Jobs in name order, transitions in the
  order they were recorded (findStageWithJobsByIdentifier: ORDER BY builds.name, buildstatetransitions.id).
- Job history and job instance (api-job-instance-v1 JobInstanceRepresenter): the identifier fields filled
  from the job's stage, `stage_counter` a string (JobIdentifier.stageCounter); in the history
  `job_state_transitions` is always `[]` (its result map, select-build-with-identifier, loads none).

Links are absolute, built from the request's scheme, host and port and the `/go` context
(JsonOutputLinkWriter.addLinkIfPresent -> RequestContext.urlFor), and carry only the cursor: no
`page_size` (Routes.Stage.next/previous, Routes.Job.next/previous). Names are put in as they are, not
encoded. Each item is rendered once and kept: a page is the items spliced into their list.
"""

from __future__ import annotations

from typing import Any

from tests.support.doubles.gocd_rest.access import Index
from tests.support.doubles.gocd_rest.jsonwriters import Raw, pretty
from tests.support.doubles.gocd_rest.world import JobRun, StageRun


class HistoryWriter:
    """Renders the history answers of one indexed world; items are cached by database id."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._stage_items: dict[int, Raw] = {}
        self._job_items: dict[int, Raw] = {}
        self._stage_instances: dict[int, str] = {}

    def stage_history(self, base: str, pipeline: str, stage: str, after: int, before: int, size: int) -> str:
        history = self._index.stage_history.get((pipeline.lower(), stage.lower()))
        # The page is of stage ids; a stage whose jobs are all ignored then drops out of the INNER JOIN
        # on builds. The oldest and latest ids (getOldestAndLatestStageInstanceRun) are of _stages alone.
        page = [run for run in history.page(after, before, size) if run.active_jobs] if history else []
        if history is None or not page:
            return pretty({"stages": []})
        latest, oldest = page[0], page[-1]
        path = f"{base}/api/stages/{latest.pipeline}/{latest.name}/history"
        links = _links(path, latest.id, oldest.id, history.ids[-1], history.ids[0])
        return pretty(links | {"stages": [self._stage_item(run) for run in page]})

    def job_history(
        self, base: str, pipeline: str, stage: str, job: str, after: int, before: int, size: int
    ) -> str:
        history = self._index.job_history.get((pipeline.lower(), stage.lower(), job.lower()))
        if history is None or not (page := history.page(after, before, size)):
            return pretty({"jobs": []})
        latest, oldest = page[0], page[-1]
        path = f"{base}/api/jobs/{latest.stage.pipeline}/{latest.stage.name}/{latest.name}/history"
        links = _links(path, latest.id, oldest.id, history.ids[-1], history.ids[0])
        return pretty(links | {"jobs": [self._job_item(run) for run in page]})

    def stage_instance(self, run: StageRun) -> str:
        if run.id not in self._stage_instances:
            self._stage_instances[run.id] = pretty(stage_instance(run))
        return self._stage_instances[run.id]

    def _stage_item(self, run: StageRun) -> Raw:
        if run.id not in self._stage_items:
            item: dict[str, Any] = {
                "name": run.name,
                "counter": str(run.counter),
                "approval_type": run.approval_type,
                "approved_by": run.approved_by,
                **_result(run),
                "rerun_of_counter": run.rerun_of_counter,
                "pipeline_name": run.pipeline,
                "pipeline_counter": run.pipeline_counter,
                "jobs": [
                    {
                        "name": job.name,
                        "state": job.state,
                        "result": job.result,
                        "scheduled_date": job.scheduled_ms,
                    }
                    for job in sorted(run.active_jobs, key=lambda j: j.id)
                ],
            }
            self._stage_items[run.id] = Raw(pretty(item, 1))
        return self._stage_items[run.id]

    def _job_item(self, job: JobRun) -> Raw:
        if job.id not in self._job_items:
            self._job_items[job.id] = Raw(pretty(job_instance(job, transitions=False), 1))
        return self._job_items[job.id]


def stage_instance(run: StageRun) -> dict[str, Any]:
    """StageRepresenter of api-stage-instance-v3."""
    return {
        "name": run.name,
        "counter": run.counter,
        "approval_type": run.approval_type,
        "approved_by": run.approved_by,
        "scheduled_at": run.created_ms,
        "last_transitioned_time": run.last_transitioned_ms,
        **_result(run),
        "rerun_of_counter": run.rerun_of_counter,
        "fetch_materials": True,
        "clean_working_directory": False,
        "artifacts_deleted": False,
        "pipeline_name": run.pipeline,
        "pipeline_counter": run.pipeline_counter,
        "jobs": [_stage_job(job) for job in sorted(run.active_jobs, key=lambda j: j.name.lower())],
    }


def null_stage(name: str, now_ms: int) -> dict[str, Any]:
    """What StageRepresenter writes for the NullStage StageSqlMapDao.findStageWithIdentifier returns when
    the pipeline run exists but the stage run does not: a 200, counter 0, created "now", no identifier."""
    return {
        "name": name,
        "counter": 0,
        "approval_type": None,
        "approved_by": None,
        "scheduled_at": now_ms,
        "result": "Unknown",
        "rerun_of_counter": None,
        "fetch_materials": True,
        "clean_working_directory": False,
        "artifacts_deleted": False,
        "jobs": [],
    }


def job_instance(job: JobRun, *, transitions: bool) -> dict[str, Any]:
    """JobInstanceRepresenter of api-job-instance-v1."""
    stage = job.stage
    return {
        "name": job.name,
        "state": job.state,
        "result": job.result,
        "original_job_id": job.original_job_id,
        "scheduled_date": job.scheduled_ms,
        "rerun": job.rerun,
        "agent_uuid": job.agent_uuid,
        "pipeline_name": stage.pipeline,
        "pipeline_counter": stage.pipeline_counter,
        "stage_name": stage.name,
        "stage_counter": str(stage.counter),
        "job_state_transitions": _transitions(job) if transitions else [],
    }


def _stage_job(job: JobRun) -> dict[str, Any]:
    """JobInstanceRepresenter of api-stage-instance-v3."""
    return {
        "name": job.name,
        "state": job.state,
        "result": job.result,
        "scheduled_date": job.scheduled_ms,
        "rerun": job.rerun,
        "original_job_id": job.original_job_id,
        "agent_uuid": job.agent_uuid or None,
        "pipeline_name": None,
        "pipeline_counter": None,
        "stage_name": None,
        "stage_counter": None,
        "job_state_transitions": _transitions(job),
    }


def _transitions(job: JobRun) -> list[dict[str, Any]]:
    return [{"state": t.state, "state_change_time": t.at_ms} for t in job.transitions]


def _result(run: StageRun) -> dict[str, Any]:
    result = run.result
    cancelled = {"cancelled_by": run.cancelled_by or "GoCD"} if result == "Cancelled" else {}
    return {"result": result} | cancelled


def _links(path: str, first: int, last: int, latest_id: int, oldest_id: int) -> dict[str, Any]:
    links: dict[str, Any] = {}
    if first != latest_id:
        links["previous"] = {"href": f"{path}?before={first}"}
    if last != oldest_id:
        links["next"] = {"href": f"{path}?after={last}"}
    return {"_links": links} if links else {}
