"""The pod pool of one cluster: which pod to create, which pod may take which job, and when a pod goes.

Pure decision logic over a clock, a ClusterPort and a GoCDServer; the same code runs against real
Kubernetes, the fake API server and the simulator. State lives on the pods (annotations, see
records.py); this object keeps only what a restart may lose without harm: annotation changes not yet
written back, pod creations in flight, and assignment times for the short grace after an assignment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_agent import labels
from elastic_agent.annotation_writer import AnnotationWriter, Overlay, unconfirmed
from elastic_agent.clock import Clock
from elastic_agent.gocd import Agent, GoCDError, GoCDServer
from elastic_agent.kube.port import ClusterError, ClusterPort
from elastic_agent.messages import CreateAgentRequest, JobIdentifier
from elastic_agent.pods import PodIdentity, build_pod, job_annotation, job_labels
from elastic_agent.records import PodRecord, PodState
from profiles.cluster import ClusterProfile

log = logging.getLogger(__name__)

# After a `true` from should-assign-work GoCD may still list the agent as Idle for a moment: do not take
# that for a finished job.
ASSIGNMENT_GRACE_S = 30.0


@dataclass(frozen=True)
class CreateOutcome:
    created: str | None  # the new pod's name
    message: str  # why, in words fit for the job's console


class ClusterPool:
    def __init__(self, port: ClusterPort, identity: PodIdentity, settings: ClusterProfile, clock: Clock):
        self.port = port
        self.identity = identity
        self.settings = settings
        self.clock = clock
        self._lock = threading.RLock()
        self._annotations: dict[str, Overlay] = {}
        self._labels: dict[str, Overlay] = {}
        self._creating: dict[int, float] = {}  # job id -> when the create call started
        self._deleted: set[str] = set()  # pods we deleted that the watch still shows
        self._retiring_now: set[str] = set()  # retirements in progress on some thread
        self._assigned_at: dict[str, float] = {}
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
        with self._lock:
            return PodRecord.from_pod(pod, self._annotations.get(name))

    def records(self) -> list[PodRecord]:
        with self._lock:
            return [
                PodRecord.from_pod(pod, self._annotations.get(pod.name))
                for pod in self.port.pods()
                if self.identity.owns(pod.labels)
            ]

    def _alive(self, record: PodRecord) -> bool:
        return not record.deleting and record.name not in self._deleted and record.state != PodState.RETIRING

    # ----- state changes, written to memory now and to the pod soon --------------------------------

    def _change(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        pod_labels: Mapping[str, str | None] | None = None,
    ) -> None:
        with self._lock:
            self._annotations.setdefault(name, {}).update(annotations)
            if pod_labels:
                self._labels.setdefault(name, {}).update(pod_labels)
        self.writer.enqueue(name)

    def _take_unwritten(self, name: str) -> tuple[Overlay, Overlay] | None:
        pod = self.port.get(name)
        with self._lock:
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
        with self._lock:
            names = set(self._annotations) | set(self._labels)
        for name in names:
            self.writer.enqueue(name)

    # ----- create-agent ---------------------------------------------------------------------------

    def create_agent(
        self, request: CreateAgentRequest, template: Mapping[str, Any], reuse: bool
    ) -> CreateOutcome:
        job = request.job
        now = self.clock.now()
        with self._lock:
            records = [r for r in self.records() if self._alive(r)]
            mine = next((r for r in records if r.created_for_job_id == job.job_id), None)
            if mine is not None:
                return CreateOutcome(None, f"pod {mine.name} was already created for this job")
            if job.job_id in self._creating:
                return CreateOutcome(None, "a pod for this job is being created")
            pending = sum(1 for r in records if r.pending_registration) + len(self._creating)
            if pending >= self.settings.pending_pods_count:
                return CreateOutcome(
                    None,
                    f"waiting: {pending} pods have not registered yet, the limit (pending_pods_count) is "
                    f"{self.settings.pending_pods_count}; GoCD will ask again",
                )
            if self.settings.max_pods and len(records) + len(self._creating) >= self.settings.max_pods:
                return CreateOutcome(
                    None,
                    f"waiting: the cluster profile allows {self.settings.max_pods} pods (max_pods) and "
                    "all are in use; GoCD will ask again",
                )
            self._creating[job.job_id] = now
        try:
            manifest = build_pod(
                template,
                identity=self.identity,
                namespace=self.settings.namespace,
                job=job,
                environment=request.environment,
                auto_register_key=request.auto_register_key,
                go_server_url=self.settings.go_server_url,
                now=now,
                reuse=reuse,
            )
            pod = self.port.create_pod(manifest)
        finally:
            with self._lock:
                self._creating.pop(job.job_id, None)
        return CreateOutcome(
            pod.name, f"created pod {pod.name} in namespace {self.settings.namespace} for this job"
        )

    # ----- should-assign-work ---------------------------------------------------------------------

    def should_assign_work(self, agent_id: str, job: JobIdentifier) -> bool:
        """Answered from memory; a `true` makes the pod busy at once."""
        with self._lock:
            record = self.record(agent_id)
            if record is None or not self._alive(record) or record.failed:
                return False
            if not record.registered:
                self._change(agent_id, {labels.ANN_REGISTERED: "true"})
            if record.state not in (PodState.BOOTING, PodState.IDLE):
                return False
            # One pod per job: the pod takes only the job it was created for, once.
            if record.created_for_job_id != job.job_id or record.jobs_run > 0:
                return False
            now = self.clock.now()
            self._assigned_at[agent_id] = now
            self._change(
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
            return True

    # ----- job-completion -------------------------------------------------------------------------

    def job_completed(self, agent_id: str, job: JobIdentifier, gocd: GoCDServer) -> str:
        record = self.record(agent_id)
        if record is None:
            return f"agent {agent_id} is not a pod of this plugin in this cluster; nothing to do"
        with self._lock:
            self._assigned_at.pop(agent_id, None)
            self._change(
                agent_id,
                {
                    labels.ANN_JOBS_RUN: str(record.jobs_run + 1),
                    labels.ANN_LAST_JOB: job_annotation(job),
                    labels.ANN_CURRENT_JOB: None,
                },
            )
        reason = f"its job {job.label} finished and the profile runs one job per pod"
        self.retire(agent_id, reason, gocd, agent_building=False)
        return f"retired pod {agent_id}: {reason}"

    # ----- retiring, in order ---------------------------------------------------------------------

    def retire(self, name: str, reason: str, gocd: GoCDServer, agent_building: bool | None) -> bool:
        """Mark retiring, disable the agent, delete the pod once the agent is not building, delete the
        agent. Returns True when the pod is gone; False when a step must wait for the next ping.
        `agent_building` is what GoCD last said (None: unknown, treated as possibly building)."""
        with self._lock:
            if name in self._retiring_now or name in self._deleted:
                return False
            self._retiring_now.add(name)
            record = self.record(name)
            if record is not None and record.state != PodState.RETIRING:
                self._change(
                    name,
                    {labels.ANN_STATE: PodState.RETIRING.value, labels.ANN_RETIRE_REASON: reason[:200]},
                )
        try:
            if record is None:
                return True
            if record.state != PodState.RETIRING:
                log.info("retiring pod %s: %s", name, reason)
            self.writer.flush(name)
            if record.registered or agent_building is not None:
                gocd.disable_agents([name])
            pod_is_dead = record.failed
            if agent_building and not pod_is_dead:
                return False  # never delete a pod whose agent builds; the next ping tries again
            if agent_building is None and record.registered and not pod_is_dead:
                return False  # we do not know: wait for list-agents at the next ping
            self.port.delete_pod(name)
            with self._lock:
                self._deleted.add(name)
            if record.registered or agent_building is not None:
                gocd.delete_agents([name])
            return True
        except (GoCDError, ClusterError) as error:
            log.warning("retiring pod %s must wait for the next ping: %s", name, error)
            return False
        finally:
            with self._lock:
                self._retiring_now.discard(name)

    # ----- server-ping ----------------------------------------------------------------------------

    def reconcile(self, agents: Mapping[str, Agent], gocd: GoCDServer) -> list[str]:
        """Bring pods in line with GoCD's view; returns what was done, one line per action."""
        now = self.clock.now()
        done: list[str] = []
        with self._lock:
            present = {pod.name for pod in self.port.pods()}
            self._deleted &= present
        for record in self.records():
            agent = agents.get(record.name)
            building = agent.building if agent else False
            if record.deleting or record.name in self._deleted:
                continue
            if agent is not None and not record.registered:
                self._change(record.name, {labels.ANN_REGISTERED: "true"})
            reason = self._reason_to_retire(record, agent, now)
            if reason is None:
                if agent is not None and agent.building and record.state != PodState.BUSY:
                    # GoCD's Building is the truth: a lost should-assign-work write or a restart.
                    self._change(record.name, {labels.ANN_STATE: PodState.BUSY.value})
                continue
            if self.retire(record.name, reason, gocd, agent_building=building if agent else False):
                done.append(f"retired pod {record.name}: {reason}")
        self.requeue_unwritten()
        return done

    def _reason_to_retire(self, record: PodRecord, agent: Agent | None, now: float) -> str | None:
        if record.state == PodState.RETIRING:
            return record.retire_reason or "it was retiring"
        if record.failed:
            return f"the pod failed ({record.reason or record.phase})"
        if agent is None:
            if record.registered:
                return "its agent is no longer registered with GoCD"
            age = now - record.created_at
            if age > self.settings.auto_register_timeout:
                return f"its agent did not register within {_duration(self.settings.auto_register_timeout)}"
            return None
        if record.state == PodState.BUSY and not agent.building:
            assigned = self._assigned_at.get(record.name, record.state_since)
            if now - assigned > ASSIGNMENT_GRACE_S:
                return (
                    "its job finished (no job-completion was received) and the profile runs one job per pod"
                )
        return None

    def known_pod_names(self) -> set[str]:
        return {pod.name for pod in self.port.pods() if self.identity.owns(pod.labels)}


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
