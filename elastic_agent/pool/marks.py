"""The annotation and label changes that move a pod from one state to another (records.PodState).

Each returns a `Mark`; the Applier makes it count at once and the writer puts it on the pod. Autoscaler
annotations follow the state: a busy pod must not be evicted, an idle one may be. The busy label goes with
them in the same patch, for the PodDisruptionBudget the Eviction API honours (labels.LABEL_BUSY).
"""

from __future__ import annotations

from collections.abc import Iterable

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.kube.port import PodView
from elastic_agent.pool import labels
from elastic_agent.pool.intents import Changes, Mark
from elastic_agent.pool.job_history import with_job
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.pods import job_annotation, job_labels, official_labels, reuse_annotations
from elastic_agent.pool.records import PodRecord, PodState

NO_JOB_LABELS: dict[str, str | None] = {
    labels.LABEL_JOB_ID: None,
    labels.LABEL_JOB_NAME: None,
    labels.LABEL_BUSY: None,
}
BUSY_LABELS: dict[str, str | None] = {labels.LABEL_BUSY: "true"}
# What the cluster autoscaler and Karpenter read: a busy pod, however it became busy, must not be moved.
PROTECTED: dict[str, str | None] = {labels.ANN_SAFE_TO_EVICT: "false", labels.ANN_DO_NOT_DISRUPT: "true"}
UNPROTECTED: dict[str, str | None] = {labels.ANN_SAFE_TO_EVICT: "true", labels.ANN_DO_NOT_DISRUPT: None}


def idle(now: float) -> dict[str, str | None]:
    return {
        labels.ANN_STATE: PodState.IDLE.value,
        labels.ANN_STATE_SINCE: f"{now:.3f}",
        labels.ANN_CURRENT_JOB: None,
        **UNPROTECTED,
    }


def registered(record: PodRecord, now: float) -> Mark:
    """The agent polled or was listed by GoCD: it registered. A booting pod nobody waits for is idle."""
    changes: dict[str, str | None] = {labels.ANN_REGISTERED: "true"}
    if record.state == PodState.BOOTING:
        changes |= idle(now)
    return Mark(record.name, changes)


def busy(pod: str, job: JobIdentifier, now: float) -> Mark:
    return Mark(
        pod,
        {
            labels.ANN_STATE: PodState.BUSY.value,
            labels.ANN_STATE_SINCE: f"{now:.3f}",
            labels.ANN_CURRENT_JOB: job_annotation(job),
            **PROTECTED,
        },
        {**job_labels(job), **BUSY_LABELS},
    )


def busy_with_unknown_job(pod: str, now: float) -> Mark:
    """GoCD lists the agent as building a job this backend did not give it (a restart lost the `true`):
    as protected from disruption as any busy pod."""
    return Mark(
        pod,
        {labels.ANN_STATE: PodState.BUSY.value, labels.ANN_STATE_SINCE: f"{now:.3f}", **PROTECTED},
        BUSY_LABELS,
    )


def job_done(record: PodRecord, job: JobIdentifier, jobs_run: int) -> Changes:
    return {
        labels.ANN_JOBS_RUN: str(jobs_run),
        labels.ANN_LAST_JOB: job_annotation(job),
        labels.ANN_RECENT_JOBS: with_job(record.recent_jobs, job),
        labels.ANN_CURRENT_JOB: None,
    }


def idle_after_job(
    record: PodRecord, job: JobIdentifier, jobs_run: int, spec: JobSpec | None, now: float
) -> Mark:
    """Idle again, with the reuse knobs of the profile as the job-completion brought them (if it could
    be rendered: else the pod keeps the knobs it has)."""
    knobs = reuse_annotations(spec) if spec is not None else {}
    return Mark(record.name, {**job_done(record, job, jobs_run), **idle(now), **knobs}, NO_JOB_LABELS)


def idle_after_lost_completion(record: PodRecord, now: float) -> Mark:
    # The lost job-completion's job still ran here: count it, or MaxJobsPerPod would be exceeded.
    ran = {labels.ANN_JOBS_RUN: str(record.jobs_run + 1)}
    return Mark(record.name, {**idle(now), **ran}, NO_JOB_LABELS)


def retiring(pod: str, reason: str) -> Mark:
    return Mark(pod, {labels.ANN_STATE: PodState.RETIRING.value, labels.ANN_RETIRE_REASON: reason[:200]})


def without_official_labels(pods: Iterable[PodView]) -> list[Mark]:
    """Pods created before this plugin stopped carrying the labels the official plugin selects on
    (labels.py) lose them: while one of them is in its namespace, the official plugin deletes it or
    fails to refresh its pods."""
    found = ((pod.name, official_labels(pod.labels)) for pod in pods)
    return [Mark(name, {}, dict.fromkeys(keys)) for name, keys in found if keys]
