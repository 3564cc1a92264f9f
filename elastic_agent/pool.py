"""The pod pool of one cluster: which pod to create, which pod may take which job, when a pod goes.

Pure decision logic over a clock, a ClusterPort and a GoCDServer; the same code runs against real
Kubernetes, the fake API server and the simulator. State lives on the pods (annotations, records.py);
this object keeps only what a restart may lose without harm: annotation changes not yet written back,
pod creations in flight, the jobs waiting per fingerprint (GoCD re-sends them), and assignment times.

Every decision is taken under one lock and takes effect in memory at once; API calls happen outside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elastic_agent import labels
from elastic_agent.annotation_writer import AnnotationWriter, Overlay, unconfirmed
from elastic_agent.clock import Clock
from elastic_agent.gocd import GoCDError, GoCDServer
from elastic_agent.job_spec import JobSpec
from elastic_agent.kube.port import ClusterError, ClusterPort
from elastic_agent.messages import JobIdentifier
from elastic_agent.narrator import Narrator
from elastic_agent.pods import PodIdentity, build_pod, job_annotation, job_labels, reuse_annotations
from elastic_agent.records import PodRecord, PodState
from elastic_agent.registration_keys import RegistrationKeys
from profiles.cluster import ClusterProfile

log = logging.getLogger(__name__)

# After a `true` from should-assign-work GoCD may still list the agent as Idle for a moment.
ASSIGNMENT_GRACE_S = 30.0
# GoCD re-sends create-agent to a waiting job every 2 minutes; a job not heard of for longer than this
# was assigned elsewhere or cancelled.
WAITING_TTL_S = 300.0
NO_JOB_LABELS: dict[str, str | None] = {labels.LABEL_JOB_ID: None, labels.LABEL_JOB_NAME: None}


@dataclass
class WaitingJob:
    job: JobIdentifier
    first_seen: float
    last_seen: float


@dataclass(frozen=True)
class CreateOutcome:
    created: str | None  # the new pod's name
    message: str  # why, in words fit for the job's console


def ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


class ClusterPool:
    def __init__(
        self,
        port: ClusterPort,
        identity: PodIdentity,
        settings: ClusterProfile,
        clock: Clock,
        narrator: Narrator | None = None,
        keys: RegistrationKeys | None = None,
    ):
        self.port = port
        self.identity = identity
        self.settings = settings
        self.clock = clock
        self.narrator = narrator or Narrator()
        self.keys = keys or RegistrationKeys(clock)
        self.lock = threading.RLock()
        self._annotations: dict[str, Overlay] = {}
        self._labels: dict[str, Overlay] = {}
        self._overlay_generation: dict[str, int] = {}
        self._record_cache: dict[str, tuple[str, int, PodRecord]] = {}
        self._creating: dict[object, str] = {}  # reservation (job id or warm token) -> fingerprint
        self._creating_names: dict[object, str] = {}  # reservation -> name of the pod being created
        self._waiting: dict[str, dict[int, WaitingJob]] = {}  # fingerprint -> job id -> entry
        self._recipes: dict[str, JobSpec] = {}  # fingerprint -> latest spec (for the warm pool)
        self.superseded: set[str] = set()  # fingerprints whose profile was edited since
        self._deleted: set[str] = set()  # pods we deleted that the watch still shows
        self._retiring_now: set[str] = set()
        self._assigned_at: dict[str, float] = {}
        # job id -> the pod a `true` gave it to, until its job-completion (a lost one leaves a stale entry,
        # which the check in should_assign_work ignores).
        self._pod_of_job: dict[int, str] = {}
        self._warm_tokens = 0
        self.writer = AnnotationWriter(port, clock, self._take_unwritten)

    def start(self) -> None:
        self.port.start()
        self.writer.start()

    def stop(self) -> None:
        self.writer.stop()
        self.port.stop()

    # ----- reading state -------------------------------------------------------------------------

    def record(self, name: str) -> PodRecord | None:
        pod = self.port.get(name)
        if pod is None or not self.identity.owns(pod.labels):
            return None
        with self.lock:
            generation = self._overlay_generation.get(name, 0)
            cached = self._record_cache.get(name)
            if cached and cached[0] == pod.resource_version and cached[1] == generation:
                return cached[2]
            record = PodRecord.from_pod(pod, self._annotations.get(name))
            self._record_cache[name] = (pod.resource_version, generation, record)
            return record

    def records(self) -> list[PodRecord]:
        with self.lock:
            return [r for r in (self.record(pod.name) for pod in self.port.pods()) if r is not None]

    def alive(self, record: PodRecord) -> bool:
        return (
            not record.deleting
            and record.name not in self._deleted
            and record.state != PodState.RETIRING
            and not record.failed
        )

    def known_pod_names(self) -> set[str]:
        return {pod.name for pod in self.port.pods() if self.identity.owns(pod.labels)}

    def waiting_jobs(self) -> dict[str, int]:
        with self.lock:
            return {fp: len(jobs) for fp, jobs in self._waiting.items() if jobs}

    # ----- state changes, written to memory now and to the pod soon --------------------------------

    def change(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        pod_labels: Mapping[str, str | None] | None = None,
    ) -> None:
        with self.lock:
            self._annotations.setdefault(name, {}).update(annotations)
            if pod_labels:
                self._labels.setdefault(name, {}).update(pod_labels)
            self._overlay_generation[name] = self._overlay_generation.get(name, 0) + 1
        self.writer.enqueue(name)

    def _take_unwritten(self, name: str) -> tuple[Overlay, Overlay] | None:
        pod = self.port.get(name)
        with self.lock:
            if pod is None:
                self._annotations.pop(name, None)
                self._labels.pop(name, None)
                return None
            annotations = unconfirmed(self._annotations.get(name, {}), pod.annotations)
            pod_labels = unconfirmed(self._labels.get(name, {}), pod.labels)
            if not annotations:
                self._annotations.pop(name, None)
            if not pod_labels:
                self._labels.pop(name, None)
            if not annotations and not pod_labels:
                return None
            return annotations, pod_labels

    def requeue_unwritten(self) -> None:
        with self.lock:
            names = set(self._annotations) | set(self._labels)
        for name in names:
            self.writer.enqueue(name)

    def mark_registered(self, record: PodRecord) -> None:
        """The agent polled or was listed by GoCD: it registered. A pod nobody is waiting for is idle."""
        if record.registered:
            return
        changes: dict[str, str | None] = {labels.ANN_REGISTERED: "true"}
        if record.state == PodState.BOOTING:
            changes |= self.idle_changes(self.clock.now())
        self.change(record.name, changes)

    @staticmethod
    def idle_changes(now: float) -> dict[str, str | None]:
        return {
            labels.ANN_STATE: PodState.IDLE.value,
            labels.ANN_STATE_SINCE: f"{now:.3f}",
            labels.ANN_CURRENT_JOB: None,
            labels.ANN_SAFE_TO_EVICT: "true",
            labels.ANN_DO_NOT_DISRUPT: None,
        }

    # ----- create-agent ---------------------------------------------------------------------------

    def create_agent(self, job: JobIdentifier, spec: JobSpec, key: str, gocd: GoCDServer) -> CreateOutcome:
        now = self.clock.now()
        with self.lock:
            self._expire_waiting(now)
            records = [r for r in self.records() if self.alive(r)]
            running = next((r for r in records if r.current_job_id == job.job_id), None)
            if running is not None:
                return CreateOutcome(None, f"the job already runs on pod {running.name}")
            if spec.reuse:
                outcome = self._reserve_for_reuse(job, spec, key, records, now)
            else:
                outcome = self._reserve_one_pod_per_job(job, records)
            if outcome is not None:
                return outcome
            pending = self._pending_limit_reached(records)
            victims: list[tuple[str, str]] = []
            if pending is None and self._at_max_pods(records):
                victims = self._make_room(spec, records)
                if not victims:
                    cap = self.settings.max_pods
                    pending = f"waiting: all {cap} pods allowed by max_pods are in use; GoCD will ask again"
            if pending is not None:
                self._waiting_unserved(spec, key)
                return CreateOutcome(None, pending)
            self._creating[job.job_id] = spec.fingerprint
            waiting, booting = self._demand(spec.fingerprint, records)
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
        if spec.reuse:
            reason = f"{_count(waiting, 'job')} waiting, {_count(booting, 'pod')} booting"
            return CreateOutcome(pod, f"created pod {pod}: {reason}")
        return CreateOutcome(pod, f"created pod {pod} in namespace {self.settings.namespace} for this job")

    def _reserve_one_pod_per_job(self, job: JobIdentifier, records: list[PodRecord]) -> CreateOutcome | None:
        mine = next((r for r in records if r.created_for_job_id == job.job_id and not r.reuse), None)
        if mine is not None:
            return CreateOutcome(None, f"pod {mine.name} was already created for this job")
        if job.job_id in self._creating:
            return CreateOutcome(None, "a pod for this job is being created")
        return None

    def _reserve_for_reuse(
        self, job: JobIdentifier, spec: JobSpec, key: str, records: list[PodRecord], now: float
    ) -> CreateOutcome | None:
        """Join the waiting jobs of the fingerprint; a pod is needed only while they outnumber the
        fingerprint's booting and idle pods (GoCD sends create-agent for every waiting job)."""
        self._recipes[spec.fingerprint] = spec
        waiting = self._waiting.setdefault(spec.fingerprint, {})
        entry = waiting.get(job.job_id)
        if entry is None:
            waiting[job.job_id] = WaitingJob(job, now, now)
        else:
            entry.last_seen = now
        demand, supply = self._demand(spec.fingerprint, records)
        idle = demand and sum(
            1 for r in self._matching(spec.fingerprint, records) if r.state == PodState.IDLE
        )
        if demand <= supply:
            self._waiting_unserved(spec, key)
            return CreateOutcome(
                None,
                f"no new pod needed: {demand} job{'s' if demand != 1 else ''} waiting, {idle} idle and "
                f"{supply - idle} booting pod{'s' if supply - idle != 1 else ''} of this profile",
            )
        return None

    def _matching(self, fingerprint: str, records: Iterable[PodRecord]) -> list[PodRecord]:
        return [
            r
            for r in records
            if r.reuse
            and r.fingerprint == fingerprint
            and r.can_take_more_jobs()
            and fingerprint not in self.superseded
        ]

    def _demand(self, fingerprint: str, records: list[PodRecord]) -> tuple[int, int]:
        """(waiting jobs, pods that will be able to take one: booting, idle, being created)."""
        waiting = len(self._waiting.get(fingerprint, {}))
        ready = sum(
            1 for r in self._matching(fingerprint, records) if r.state in (PodState.BOOTING, PodState.IDLE)
        )
        creating = sum(1 for fp in self._in_flight(records) if fp == fingerprint)
        return waiting, ready + creating

    def _in_flight(self, records: list[PodRecord]) -> list[str]:
        """Fingerprints of the pods being created that `records` do not show yet: the cluster view gets
        a new pod before its reservation is dropped, and it must not count twice meanwhile."""
        shown = {r.name for r in records}
        return [fp for token, fp in self._creating.items() if self._creating_names.get(token) not in shown]

    def _pending_limit_reached(self, records: list[PodRecord]) -> str | None:
        pending = sum(1 for r in records if r.pending_registration) + len(self._in_flight(records))
        if pending >= self.settings.pending_pods_count:
            return (
                f"waiting: {pending} pods have not registered yet, the limit (pending_pods_count) is "
                f"{self.settings.pending_pods_count}; GoCD will ask again"
            )
        return None

    def _at_max_pods(self, records: list[PodRecord]) -> bool:
        cap = self.settings.max_pods
        return bool(cap) and len(records) + len(self._in_flight(records)) >= (cap or 0)

    def _blocked_by_caps(self, records: list[PodRecord]) -> bool:
        return self._pending_limit_reached(records) is not None or self._at_max_pods(records)

    def _make_room(self, spec: JobSpec, records: list[PodRecord]) -> list[tuple[str, str]]:
        """At max_pods, an idle pod of another fingerprint gives way, so a cap never starves a profile."""
        others = [r for r in records if r.state == PodState.IDLE and r.fingerprint != spec.fingerprint]
        if not others:
            return []
        victim = min(others, key=lambda r: r.state_since)
        self._mark_retiring(victim.name, "making room under max_pods for another profile's waiting job")
        return [(victim.name, "making room under max_pods for another profile's waiting job")]

    def _waiting_unserved(self, spec: JobSpec, key: str) -> None:
        """The job's key created nothing: keep it for the warm pool (a key is not bound to a pod)."""
        if spec.reuse and spec.min_idle_pods:
            self.keys.offer(key)

    def _create(self, job: JobIdentifier | None, spec: JobSpec, key: str, now: float, token: object) -> str:
        manifest = build_pod(
            spec.template,
            identity=self.identity,
            namespace=self.settings.namespace,
            job=job,
            spec=spec,
            auto_register_key=key,
            go_server_url=self.settings.go_server_url,
            now=now,
        )
        with self.lock:
            self._creating_names[token] = manifest["metadata"]["name"]
        return self.port.create_pod(manifest).name

    def _expire_waiting(self, now: float) -> None:
        for fingerprint in list(self._waiting):
            jobs = self._waiting[fingerprint]
            for job_id in [j for j, entry in jobs.items() if now - entry.last_seen > WAITING_TTL_S]:
                del jobs[job_id]
            if not jobs:
                del self._waiting[fingerprint]

    # ----- should-assign-work ---------------------------------------------------------------------

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

    # ----- job-completion -------------------------------------------------------------------------

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

    # ----- retiring, in order ---------------------------------------------------------------------

    def _mark_retiring(self, name: str, reason: str) -> None:
        self.change(name, {labels.ANN_STATE: PodState.RETIRING.value, labels.ANN_RETIRE_REASON: reason[:200]})

    def claim_for_retirement(self, name: str, reason: str, even_if_busy: bool = False) -> bool:
        """Mark a pod retiring unless it is busy: taken under the lock that should-assign-work takes, so a
        pod is either given a job or retired, never both. `even_if_busy` is for pods that failed: their
        job died with them."""
        with self.lock:
            record = self.record(name)
            if record is None or name in self._deleted:
                return False
            if record.state == PodState.BUSY and not even_if_busy:
                return False
            if record.state != PodState.RETIRING:
                self._mark_retiring(name, reason)
            return True

    def retire(
        self, pods: list[tuple[str, str]], why: str, gocd: GoCDServer, agents_idle: bool = False
    ) -> list[str]:
        """Disable the agents, delete the pods whose agent is not building, then delete those agents.
        Pods must already be marked retiring. `agents_idle`: the caller knows the agents are not building
        (job-completion); otherwise GoCD is asked after disabling. Returns the pods deleted."""
        with self.lock:
            names = [name for name, _ in pods if name not in self._retiring_now and name not in self._deleted]
            self._retiring_now.update(names)
        deleted: list[str] = []
        try:
            if not names:
                return []
            for name in names:
                self.writer.flush(name)
            gocd.disable_agents(names)
            building: set[str] = set()
            if not agents_idle:
                building = {a.agent_id for a in gocd.list_agents() if a.agent_id in names and a.building}
            reasons = dict(pods)
            for name in names:
                record = self.record(name)
                if name in building and record is not None and not record.failed:
                    continue  # never delete a pod whose agent builds; its job-completion or a ping goes on
                self.port.delete_pod(name)
                with self.lock:
                    self._deleted.add(name)
                deleted.append(name)
                self.narrator.decision(f"retired pod {name}: {reasons.get(name, why)}")
            # GoCD deletes only agents that are not building; the agent of a failed pod goes at a later ping.
            gocd.delete_agents([name for name in deleted if name not in building])
        except (GoCDError, ClusterError) as error:
            log.warning("retiring %s must wait for the next ping: %s", ", ".join(names), error)
        finally:
            with self.lock:
                self._retiring_now.difference_update(names)
        return deleted

    def forget_deleted(self) -> None:
        with self.lock:
            self._deleted &= self.known_pod_names()

    # ----- warm pool ------------------------------------------------------------------------------

    def top_up_warm_pool(self) -> list[str]:
        """Create pods ahead of demand with kept registration keys until each fingerprint with
        MinIdlePods has that many idle or booting pods."""
        created: list[str] = []
        for fingerprint, spec in list(self._recipes.items()):
            while spec.min_idle_pods:
                with self.lock:
                    records = [r for r in self.records() if self.alive(r)]
                    _, ready = self._demand(fingerprint, records)
                    waiting = len(self._waiting.get(fingerprint, {}))
                    if ready - waiting >= spec.min_idle_pods or self._blocked_by_caps(records):
                        break
                    key = self.keys.take()
                    if key is None:
                        break
                    self._warm_tokens += 1
                    token: Any = ("warm", self._warm_tokens)
                    self._creating[token] = fingerprint
                try:
                    created.append(self._create(None, spec, key, self.clock.now(), token))
                except ClusterError as error:
                    log.warning("could not create a warm pod: %s", error)
                    break
                finally:
                    with self.lock:
                        self._creating.pop(token, None)
                        self._creating_names.pop(token, None)
        for name in created:
            self.narrator.decision(f"created pod {name} ahead of demand: MinIdlePods of its profile")
        return created

    def recipes(self) -> dict[str, JobSpec]:
        with self.lock:
            return dict(self._recipes)

    def assigned_at(self, name: str, default: float) -> float:
        with self.lock:
            return self._assigned_at.get(name, default)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
