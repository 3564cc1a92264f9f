"""The busy label (labels.LABEL_BUSY) that the shipped PodDisruptionBudget selects on: set in the same
mark as the autoscalers' annotations when a pod becomes busy, however it became busy, removed with them
when it is idle again, and never taken from a template copied from a busy pod."""

from __future__ import annotations

import yaml

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels, marks
from elastic_agent.pool.records import PodRecord, PodState
from tests.support.official_pods import our_pod

JOB = JobIdentifier(pipeline_name="build", pipeline_label="1", pipeline_counter=1, stage_name="stage",
                    stage_counter="1", job_name="compile", job_id=41)  # fmt: skip


def record(state: PodState) -> PodRecord:
    return PodRecord(name="agent-1", state=state, state_since=0.0, created_at=0.0, created_for_job_id=41,
                     current_job_id=41, jobs_run=0, registered=True, environment=None, reuse=True,
                     fingerprint="fp", idle_timeout=None, max_jobs=None, min_idle=0, phase="Running",
                     reason=None, deleting=False, retire_reason=None)  # fmt: skip


def test_a_pod_given_a_job_is_labelled_busy_in_the_mark_that_protects_it_from_autoscalers() -> None:
    mark = marks.busy("agent-1", JOB, 5.0)
    assert mark.labels[labels.LABEL_BUSY] == "true"
    assert mark.annotations[labels.ANN_SAFE_TO_EVICT] == "false"
    assert mark.labels[labels.LABEL_JOB_ID] == "41"


def test_a_pod_gocd_lists_as_building_an_unknown_job_is_labelled_busy_too() -> None:
    mark = marks.busy_with_unknown_job("agent-1", 5.0)
    assert mark.labels == {labels.LABEL_BUSY: "true"}
    assert mark.annotations[labels.ANN_DO_NOT_DISRUPT] == "true"


def test_a_pod_idle_after_its_job_loses_the_busy_label_with_the_protection() -> None:
    mark = marks.idle_after_job(record(PodState.BUSY), JOB, 1, None, 9.0)
    assert labels.LABEL_BUSY in mark.labels and mark.labels[labels.LABEL_BUSY] is None
    assert mark.annotations[labels.ANN_SAFE_TO_EVICT] == "true"


def test_a_pod_idle_after_a_lost_job_completion_loses_the_busy_label() -> None:
    mark = marks.idle_after_lost_completion(record(PodState.BUSY), 9.0)
    assert labels.LABEL_BUSY in mark.labels and mark.labels[labels.LABEL_BUSY] is None


def test_a_new_pod_from_a_template_copied_off_a_busy_pod_is_not_labelled_busy() -> None:
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "copied-{{ POD_POSTFIX }}", "labels": {labels.LABEL_BUSY: "true", "team": "a"}},
        "spec": {"containers": [{"name": "agent", "image": "gocd/gocd-agent-ubuntu-22.04:v24.1.0"}]},
    }
    pod_labels = our_pod({"PodSpecType": "yaml", "PodConfiguration": yaml.safe_dump(template)})["metadata"][
        "labels"
    ]
    assert labels.LABEL_BUSY not in pod_labels
    assert pod_labels["team"] == "a"
