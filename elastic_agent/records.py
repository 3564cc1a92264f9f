"""The state of one pod as the plugin sees it, read from the pod's labels and annotations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from elastic_agent import labels
from elastic_agent.kube.port import PodView


class PodState(StrEnum):
    BOOTING = "booting"  # created; its agent has not registered yet
    IDLE = "idle"  # registered, waiting for a job
    BUSY = "busy"  # running a job
    RETIRING = "retiring"  # on its way out: never offered work again


@dataclass(frozen=True)
class PodRecord:
    name: str
    state: PodState
    state_since: float
    created_at: float
    created_for_job_id: int | None
    current_job_id: int | None
    last_job_id: int | None
    jobs_run: int
    registered: bool
    environment: str | None
    reuse: bool
    fingerprint: str | None
    idle_timeout: float | None
    max_jobs: int | None
    min_idle: int
    warm: bool
    phase: str
    reason: str | None
    deleting: bool
    retire_reason: str | None

    @classmethod
    def from_pod(cls, pod: PodView, overlay: Mapping[str, str | None] | None = None) -> PodRecord:
        """`overlay` holds annotation changes made here that the watch has not shown back yet."""
        annotations: dict[str, str] = dict(pod.annotations)
        for key, value in (overlay or {}).items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        try:
            state = PodState(annotations.get(labels.ANN_STATE, "booting"))
        except ValueError:
            state = PodState.BOOTING
        max_jobs = annotations.get(labels.ANN_MAX_JOBS)
        idle_timeout = annotations.get(labels.ANN_IDLE_TIMEOUT)
        return cls(
            name=pod.name,
            state=state,
            state_since=_number(annotations.get(labels.ANN_STATE_SINCE), pod.created_at),
            created_at=pod.created_at,
            created_for_job_id=_job_id(annotations.get(labels.ANN_CREATED_FOR)),
            current_job_id=_job_id(annotations.get(labels.ANN_CURRENT_JOB)),
            last_job_id=_job_id(annotations.get(labels.ANN_LAST_JOB)),
            jobs_run=int(_number(annotations.get(labels.ANN_JOBS_RUN), 0)),
            registered=annotations.get(labels.ANN_REGISTERED) == "true",
            environment=annotations.get(labels.ANN_ENVIRONMENT) or None,
            reuse=annotations.get(labels.ANN_REUSE) == "true",
            fingerprint=annotations.get(labels.ANN_FINGERPRINT),
            idle_timeout=_number(idle_timeout, 0) if idle_timeout else None,
            max_jobs=int(_number(max_jobs, 0)) or None if max_jobs else None,
            min_idle=int(_number(annotations.get(labels.ANN_MIN_IDLE), 0)),
            warm=annotations.get(labels.ANN_WARM) == "true",
            phase=pod.phase,
            reason=pod.reason,
            deleting=pod.deleting,
            retire_reason=annotations.get(labels.ANN_RETIRE_REASON),
        )

    @property
    def failed(self) -> bool:
        return self.phase in ("Failed", "Succeeded") or self.reason == "Evicted"

    @property
    def pending_registration(self) -> bool:
        """Counts against pending_pods_count: created, alive, agent not registered yet."""
        return (
            not self.registered and self.state == PodState.BOOTING and not self.deleting and not self.failed
        )

    def can_take_more_jobs(self) -> bool:
        return self.max_jobs is None or self.jobs_run < self.max_jobs


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def _job_id(text: str | None) -> int | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    job_id = value.get("job_id") if isinstance(value, dict) else None
    return job_id if isinstance(job_id, int) else None
