"""The pod pool of one cluster: which pod to create, which pod may take which job, when a pod goes.

Pure decision logic over a clock, a ClusterPort and a GoCDServer; the same code runs against real
Kubernetes, the fake API server and the simulator. Every decision is taken under one lock and takes
effect in memory at once; API calls happen outside it. The state it works on is in pool_state.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from elastic_agent import labels
from elastic_agent.gocd import GoCDServer
from elastic_agent.job_spec import JobSpec
from elastic_agent.messages import JobIdentifier
from elastic_agent.pods import job_annotation, job_labels, reuse_annotations
from elastic_agent.pool_state import (  # re-exported for the reaper and tests
    ASSIGNMENT_GRACE_S,
    NO_JOB_LABELS,
    WAITING_TTL_S,
    WaitingJob,
    _count,
    _duration,
)
from elastic_agent.record_index import RecordIndex
from elastic_agent.records import PodRecord, PodState
from elastic_agent.retirement import Retirement
from elastic_agent.warm_pool import WarmPool

log = logging.getLogger(__name__)

__all__ = [
    "ASSIGNMENT_GRACE_S",
    "NO_JOB_LABELS",
    "WAITING_TTL_S",
    "ClusterPool",
    "CreateOutcome",
    "_duration",
]


@dataclass(frozen=True)
class CreateOutcome:
    created: str | None  # the new pod's name
    message: str  # why, in words fit for the job's console


def ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


class ClusterPool(Retirement, WarmPool):
    def create_agent(self, job: JobIdentifier, spec: JobSpec, key: str, gocd: GoCDServer) -> CreateOutcome:
        now = self.clock.now()
        with self.lock:
            self._expire_waiting(now)
            view = self._indexed()
            running = next((r for r in view.running(job.job_id) if self.alive(r)), None)
            if running is not None:
                return CreateOutcome(None, f"the job already runs on pod {running.name}")
            if spec.reuse:
                outcome = self._reserve_for_reuse(job, spec, key, view, now)
            else:
                outcome = self._reserve_one_pod_per_job(job, view)
            if outcome is not None:
                return outcome
            pending = self._pending_limit_reached(view)
            victims: list[tuple[str, str]] = []
            if pending is None and self._at_max_pods(view):
                victims = self._make_room(spec, view)
                if not victims:
                    cap = self.settings.max_pods
                    pending = f"waiting: all {cap} pods allowed by max_pods are in use; GoCD will ask again"
            if pending is not None:
                self._waiting_unserved(spec, key)
                return CreateOutcome(None, pending)
            self._creating[job.job_id] = spec.fingerprint
            waiting, booting = self._demand(spec.fingerprint, view)
        if victims:
            self.retire(
                victims, f"making room under max_pods ({self.settings.max_pods}) for waiting jobs", gocd
            )
        try:
            pod = self._create(job, spec, key, now, job.job_id)
        finally:
            with self.lock:
                self._creating.pop(job.job_id, None)
                self._creating_names.pop(job.job_id, None)
        with self.lock:
            entry = self._waiting.get(spec.fingerprint, {}).get(job.job_id)
            if entry is not None and entry.key == key:
                entry.key = None  # used: keys register one agent
        if spec.reuse:
            reason = f"{_count(waiting, 'job')} waiting, {_count(booting, 'pod')} booting"
            return CreateOutcome(pod, f"created pod {pod}: {reason}")
        return CreateOutcome(pod, f"created pod {pod} in namespace {self.settings.namespace} for this job")

    def _reserve_one_pod_per_job(self, job: JobIdentifier, view: RecordIndex) -> CreateOutcome | None:
        mine = next((r for r in view.created_for(job.job_id) if self.alive(r)), None)
        if mine is not None:
            return CreateOutcome(None, f"pod {mine.name} was already created for this job")
        if job.job_id in self._creating:
            return CreateOutcome(None, "a pod for this job is being created")
        return None

    def _reserve_for_reuse(
        self, job: JobIdentifier, spec: JobSpec, key: str, view: RecordIndex, now: float
    ) -> CreateOutcome | None:
        """Join the waiting jobs of the fingerprint; a pod is needed only while they outnumber the
        fingerprint's booting and idle pods (GoCD sends create-agent for every waiting job)."""
        self._recipes[spec.fingerprint] = spec
        waiting = self._waiting.setdefault(spec.fingerprint, {})
        entry = waiting.get(job.job_id)
        if entry is None:
            waiting[job.job_id] = WaitingJob(job, now, now, key)
        else:
            entry.last_seen, entry.key = now, key
        demand, supply = self._demand(spec.fingerprint, view)
        idle = demand and sum(1 for r in self._ready(spec.fingerprint, view) if r.state == PodState.IDLE)
        if demand <= supply:
            self._waiting_unserved(spec, key)
            return CreateOutcome(
                None,
                f"no new pod needed: {demand} job{'s' if demand != 1 else ''} waiting, {idle} idle and "
                f"{supply - idle} booting pod{'s' if supply - idle != 1 else ''} of this profile",
            )
        return None

    def _make_room(self, spec: JobSpec, view: RecordIndex) -> list[tuple[str, str]]:
        """At max_pods, an idle pod of another fingerprint gives way, so a cap never starves a profile."""
        others = [
            r
            for r in self._alive_records(view)
            if r.state == PodState.IDLE and r.fingerprint != spec.fingerprint
        ]
        if not others:
            return []
        victim = min(others, key=lambda r: r.state_since)
        self._mark_retiring(victim.name, "making room under max_pods for another profile's waiting job")
        return [(victim.name, "making room under max_pods for another profile's waiting job")]

    def _waiting_unserved(self, spec: JobSpec, key: str) -> None:
        """The job's key created nothing: keep it for the warm pool (a key is not bound to a pod)."""
        if spec.reuse and spec.min_idle_pods:
            self.keys.offer(key)

    def _expire_waiting(self, now: float) -> None:
        for fingerprint in list(self._waiting):
            jobs = self._waiting[fingerprint]
            for job_id in [j for j, entry in jobs.items() if now - entry.last_seen > WAITING_TTL_S]:
                del jobs[job_id]
            if not jobs:
                del self._waiting[fingerprint]

    def should_assign_work(self, agent_id: str, job: JobIdentifier, spec: JobSpec, gocd: GoCDServer) -> bool:
        """Answered from memory; a `true` makes the pod busy at once, a `false` changes nothing."""
        with self.lock:
            record = self.record(agent_id)
            if record is None or not self.alive(record):
                return False
            self.mark_registered(record)
            if record.state not in (PodState.BOOTING, PodState.IDLE):
                return False
            if record.reuse and spec.reuse:
                fits = (
                    record.fingerprint == spec.fingerprint
                    and record.can_take_more_jobs()
                    and record.fingerprint not in self.superseded
                )
            else:  # one pod per job: the pod takes only the job it was created for, once
                fits = not record.reuse and record.created_for_job_id == job.job_id and record.jobs_run == 0
            if not fits or self._given_to_another_pod(job.job_id, agent_id):
                return False
            now = self.clock.now()
            self._assigned_at[agent_id] = now
            self._pod_of_job[job.job_id] = agent_id
            self._waiting.get(spec.fingerprint, {}).pop(job.job_id, None)
            self.change(
                agent_id,
                {
                    labels.ANN_STATE: PodState.BUSY.value,
                    labels.ANN_STATE_SINCE: f"{now:.3f}",
                    labels.ANN_CURRENT_JOB: job_annotation(job),
                    labels.ANN_SAFE_TO_EVICT: "false",
                    labels.ANN_DO_NOT_DISRUPT: "true",
                },
                job_labels(job),
            )
        if record.jobs_run:
            text = f"reused pod {agent_id}, its {ordinal(record.jobs_run + 1)} job"
        else:
            text = f"assigned to pod {agent_id}, its first job"
        self.narrator.decision(text, gocd, job.to_json())
        return True

    def _given_to_another_pod(self, job_id: int, agent_id: str) -> bool:
        """Another pod said `true` to this job and is busy with it: the job is never given twice."""
        holder = self._pod_of_job.get(job_id)
        if holder is None or holder == agent_id:
            return False
        other = self.record(holder)
        return (
            other is not None
            and self.alive(other)
            and other.state == PodState.BUSY
            and other.current_job_id == job_id
        )

    def job_completed(self, agent_id: str, job: JobIdentifier, spec: JobSpec, gocd: GoCDServer) -> str:
        record = self.record(agent_id)
        if record is None:
            return f"agent {agent_id} is not a pod of this plugin in this cluster; nothing to do"
        now = self.clock.now()
        jobs_run = record.jobs_run + 1
        reason = self._retire_after_job(record, spec, jobs_run, now)
        with self.lock:
            self._assigned_at.pop(agent_id, None)
            self._pod_of_job.pop(job.job_id, None)
            done: dict[str, str | None] = {
                labels.ANN_JOBS_RUN: str(jobs_run),
                labels.ANN_LAST_JOB: job_annotation(job),
                labels.ANN_CURRENT_JOB: None,
            }
            if reason is None:
                self.change(agent_id, done | self.idle_changes(now) | reuse_annotations(spec), NO_JOB_LABELS)
            else:
                self.change(agent_id, done)
                self._mark_retiring(agent_id, reason)
        if reason is None:
            return f"pod {agent_id} is idle after {jobs_run} job{'s' if jobs_run != 1 else ''}"
        self.retire([(agent_id, reason)], reason, gocd, agents_idle=True)
        return f"retired pod {agent_id}: {reason}"

    def _retire_after_job(self, record: PodRecord, spec: JobSpec, jobs_run: int, now: float) -> str | None:
        if not record.reuse or not spec.reuse:
            return "its job finished and the profile runs one job per pod"
        if record.fingerprint != spec.fingerprint:
            if record.fingerprint:
                with self.lock:
                    self.superseded.add(record.fingerprint)
            return "its profile changed since it was created"
        if spec.max_jobs_per_pod and jobs_run >= spec.max_jobs_per_pod:
            return f"it ran {jobs_run} jobs (MaxJobsPerPod)"
        lifetime = self.settings.max_pod_lifetime
        if lifetime and now - record.created_at >= lifetime:
            return f"it is older than max_pod_lifetime ({_duration(lifetime)})"
        return None
