"""The state of one pod as the plugin sees it, read from the pod's labels and annotations.

A record is immutable: a change is a new record. The rules that read a record (is it usable, does it
count against `pending_pods_count`, may it take another job) live here, once, so that the decisions,
the index and the status pages cannot disagree about them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from elastic_agent.kube.port import PodView
from elastic_agent.pool import labels
from profiles.schedule import Knobs, Schedule, change_after, parse_schedule


class PodState(StrEnum):
    BOOTING = "booting"  # created; its agent has not registered yet
    IDLE = "idle"  # registered, waiting for a job
    BUSY = "busy"  # running a job
    RETIRING = "retiring"  # on its way out: never offered work again


# PodState(text), else BOOTING for an unknown state: a lookup, cheaper than the enum's constructor.
_STATES: dict[str, PodState] = {state.value: state for state in PodState}


@dataclass(frozen=True)
class RecordInputs:
    """Everything of a pod that its record is derived from: the annotations as the pool sees them (the
    pod's, with the changes made here and not written yet laid over them), the status fields the record
    copies, and the time its age counts from when no annotation says.

    A pod changes resourceVersion for much that a record does not read (a container's status, the
    write-back of a change the pool had already laid over it), so the pool keeps the inputs beside each
    record and derives a new record only when they differ (state.py): equal inputs make an equal record.
    """

    name: str
    annotations: Mapping[str, str]
    phase: str
    reason: str | None
    deleting: bool
    first_seen: float

    @classmethod
    def of(
        cls, pod: PodView, overlay: Mapping[str, str | None] | None = None, first_seen: float | None = None
    ) -> RecordInputs:
        annotations: Mapping[str, str] = pod.annotations
        if overlay:
            annotations = dict(annotations)
            for key, value in overlay.items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
        seen = pod.created_at if first_seen is None else first_seen
        return cls(pod.name, annotations, pod.phase, pod.reason, pod.deleting, seen)


@dataclass(frozen=True)
class PodRecord:
    name: str
    state: PodState
    state_since: float
    # When the pod was created, on this backend's clock (see `from_pod`), never the API server's.
    created_at: float
    created_for_job_id: int | None
    current_job_id: int | None
    jobs_run: int
    registered: bool
    environment: str | None
    reuse: bool
    fingerprint: str | None
    idle_timeout: float | None
    max_jobs: int | None
    min_idle: int
    phase: str
    reason: str | None
    deleting: bool
    retire_reason: str | None
    schedule: Schedule | None = None  # ReuseSchedule: the knobs above are its plain values
    oom_told: str | None = None  # the OOM kill last told to a job's console (broken.oom_killed)
    recent_jobs: str | None = None  # the annotation, as written (pool/job_history.py reads it)

    @classmethod
    def from_pod(
        cls, pod: PodView, overlay: Mapping[str, str | None] | None = None, first_seen: float | None = None
    ) -> PodRecord:
        """`overlay` holds annotation changes made here that the watch has not shown back yet.

        Ages are measured on this backend's clock: the pod's `created-at` annotation (written by the
        backend that created it), else `first_seen`, when this backend first saw the pod. The API
        server's creationTimestamp comes from another machine's clock; compared with ours, a skew of
        minutes would retire pods early or keep them past their lifetime."""
        return cls.from_inputs(RecordInputs.of(pod, overlay, first_seen))

    @classmethod
    def from_inputs(cls, inputs: RecordInputs) -> PodRecord:
        """The record of a pod whose record-relevant parts are `inputs` (see `from_pod`)."""
        annotations, pod = inputs.annotations, inputs
        state = _STATES.get(annotations.get(labels.ANN_STATE, "booting"), PodState.BOOTING)
        created_at = _number(annotations.get(labels.ANN_CREATED_AT), inputs.first_seen)
        max_jobs = annotations.get(labels.ANN_MAX_JOBS)
        idle_timeout = annotations.get(labels.ANN_IDLE_TIMEOUT)
        return cls(
            name=pod.name,
            state=state,
            state_since=_number(annotations.get(labels.ANN_STATE_SINCE), created_at),
            created_at=created_at,
            created_for_job_id=job_id_of(annotations.get(labels.ANN_CREATED_FOR)),
            current_job_id=job_id_of(annotations.get(labels.ANN_CURRENT_JOB)),
            jobs_run=int(_number(annotations.get(labels.ANN_JOBS_RUN), 0)),
            registered=annotations.get(labels.ANN_REGISTERED) == "true",
            environment=annotations.get(labels.ANN_ENVIRONMENT) or None,
            reuse=annotations.get(labels.ANN_REUSE) == "true",
            fingerprint=annotations.get(labels.ANN_FINGERPRINT),
            idle_timeout=_number(idle_timeout, 0) if idle_timeout else None,
            max_jobs=int(_number(max_jobs, 0)) or None if max_jobs else None,
            min_idle=int(_number(annotations.get(labels.ANN_MIN_IDLE), 0)),
            schedule=_schedule(annotations.get(labels.ANN_SCHEDULE)),
            phase=pod.phase,
            reason=pod.reason,
            deleting=pod.deleting,
            retire_reason=annotations.get(labels.ANN_RETIRE_REASON),
            oom_told=annotations.get(labels.ANN_OOM_TOLD),
            recent_jobs=annotations.get(labels.ANN_RECENT_JOBS),
        )

    @property
    def failed(self) -> bool:
        return self.phase in ("Failed", "Succeeded") or self.reason == "Evicted"

    @property
    def usable(self) -> bool:
        """Could be given work or counted as supply: not being deleted, not retiring, not failed. (The
        pool also excludes the pods it deleted itself that the watch still shows.)"""
        return not (self.deleting or self.failed or self.state == PodState.RETIRING)

    @property
    def pending_registration(self) -> bool:
        """Counts against pending_pods_count: created, alive, agent not registered yet."""
        return (
            not self.registered and self.state == PodState.BOOTING and not self.deleting and not self.failed
        )

    def knobs(self, now: float, default_idle_timeout: float) -> Knobs:
        """The pod's reuse values in force at `now` (its schedule's period, else its plain ones)."""
        idle_timeout = self.idle_timeout if self.idle_timeout is not None else default_idle_timeout
        plain = Knobs(self.min_idle, idle_timeout, self.max_jobs)
        return plain if self.schedule is None else self.schedule.knobs(now, plain)

    def knobs_change(self, now: float) -> float:
        """When the values `knobs` gives at `now` may next change (its schedule's next period change);
        infinity without a schedule."""
        return change_after(self.schedule, now)

    def can_take_more_jobs(self, now: float) -> bool:
        limit = self.max_jobs if self.schedule is None else self.knobs(now, 0.0).max_jobs_per_pod
        return limit is None or self.jobs_run < limit

    def could_take_more_jobs(self) -> bool:
        """At some time: under the loosest MaxJobsPerPod of its schedule. The index has no clock; the
        decision to give a pod a job asks `can_take_more_jobs` at that moment."""
        limit = self.max_jobs if self.schedule is None else self.schedule.loosest_max_jobs(self.max_jobs)
        return limit is None or self.jobs_run < limit


def job_id_of(annotation: str | None) -> int | None:
    """The job id in a job annotation (a JSON job identifier); None when absent or malformed. A JSON
    boolean is not a job id, although Python counts booleans as integers."""
    if not annotation:
        return None
    return _job_id_in(annotation)


@functools.lru_cache(maxsize=4096)
def _job_id_in(annotation: str) -> int | None:
    # A pod's record is read again at each change of the pod, its job annotations mostly unchanged.
    try:
        value = json.loads(annotation)
    except ValueError:
        return None
    job_id = value.get("job_id") if isinstance(value, dict) else None
    return job_id if isinstance(job_id, int) and not isinstance(job_id, bool) else None


def _schedule(text: str | None) -> Schedule | None:
    """A pod's schedule annotation; one that no longer reads (edited by hand) is ignored, so that the
    pod's plain values hold rather than a pod the backend cannot read."""
    if not text:
        return None
    try:
        return parse_schedule(text)
    except ValueError:
        return None


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default
