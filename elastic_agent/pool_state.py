"""The state a cluster's pod pool keeps, and how it reads and changes pods.

State lives on the pods (annotations, records.py); this keeps only what a restart may lose without harm:
annotation changes not yet written back (they take effect in memory at once and reach the pod through
the AnnotationWriter), pod creations in flight, the jobs waiting per fingerprint (GoCD re-sends them),
and assignment times. The decisions are in pool.py, retirement in retirement.py, the warm pool in
warm_pool.py.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from elastic_agent import labels
from elastic_agent.annotation_writer import AnnotationWriter, Overlay, unconfirmed
from elastic_agent.clock import Clock
from elastic_agent.job_spec import JobSpec
from elastic_agent.kube.port import ClusterPort, PodView
from elastic_agent.messages import JobIdentifier
from elastic_agent.narrator import Narrator
from elastic_agent.pods import PodIdentity, build_pod
from elastic_agent.record_index import RecordIndex
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
    key: str | None = None  # the registration key of its latest create-agent, while no pod used it


class PoolState:
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
        # Every record of the cluster, indexed (record_index.py) for the decisions of create-agent and the
        # warm pool; only the pods that changed since the last look are read again. Their names come
        # through a deque: the port's listeners run on its watch thread, and a deque's append and popleft
        # are atomic, so no name is lost between a read and a write.
        self._index: RecordIndex | None = None
        self._changed: deque[str] = deque()
        port.add_listener(self._heard_pod_change)
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

    def record(self, name: str) -> PodRecord | None:
        pod = self.port.get(name)
        if pod is None:
            return None
        with self.lock:
            generation = self._overlay_generation.get(name, 0)
            cached = self._record_cache.get(name)
            if cached and cached[0] == pod.resource_version and cached[1] == generation:
                return cached[2]  # only owned pods are cached; a relabelled pod has a new resourceVersion
            if not self.identity.owns(pod.labels):
                return None
            record = PodRecord.from_pod(pod, self._annotations.get(name))
            self._record_cache[name] = (pod.resource_version, generation, record)
            return record

    def records(self) -> list[PodRecord]:
        with self.lock:
            return list(self._indexed().by_name.values())

    def _indexed(self) -> RecordIndex:
        """The index of every record, brought up to date with the changes heard since."""
        with self.lock:
            index = self._index
            if index is None:
                self._changed.clear()  # the full read below sees every change heard so far
                index = self._index = RecordIndex()
                for pod in self.port.pods():
                    record = self.record(pod.name)
                    if record is not None:
                        index.put(record)
            changed = self._changed
            while changed:
                name = changed.popleft()
                record = self.record(name)
                if record is None:
                    index.remove(name)
                    self._forget(name)
                else:
                    index.put(record)  # a new pod goes last, as in the port's cache
            return index

    def _forget(self, name: str) -> None:
        """A pod gone from the cluster (or no longer ours): drop what was kept for it, or a backend that
        runs for months would keep a record of every pod it ever saw."""
        if self.port.get(name) is None:
            self._record_cache.pop(name, None)
            self._overlay_generation.pop(name, None)

    def _heard_pod_change(self, kind: str, pod: PodView) -> None:
        # Called after each change of the port's cache, from its watch thread or our own writes; no lock
        # (see the deque above).
        self._changed.append(pod.name)

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
            self._changed.append(name)
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

    # Decisions read one view of the records, taken once under the lock (`_indexed()`), as they would read
    # one list: changes heard meanwhile wait for the next view.

    def _alive_records(self, view: RecordIndex) -> list[PodRecord]:
        """Every record that `alive` accepts, in the cluster view's order."""
        deleted = self._deleted
        return [r for r in view.usable() if r.name not in deleted]

    def _ready(self, fingerprint: str, view: RecordIndex) -> list[PodRecord]:
        """Alive reuse pods of the fingerprint, booting or idle, that can take another job."""
        if fingerprint in self.superseded:
            return []
        return [r for r in view.ready(fingerprint) if self.alive(r)]

    def _demand(self, fingerprint: str, view: RecordIndex) -> tuple[int, int]:
        """(waiting jobs, pods that will be able to take one: booting, idle, being created)."""
        waiting = len(self._waiting.get(fingerprint, {}))
        creating = sum(1 for fp in self._in_flight(view) if fp == fingerprint)
        return waiting, len(self._ready(fingerprint, view)) + creating

    def _in_flight(self, view: RecordIndex) -> list[str]:
        """Fingerprints of the pods being created that the view does not show alive yet: the cluster view
        gets a new pod before its reservation is dropped, and it must not count twice meanwhile."""
        deleted, names = self._deleted, self._creating_names
        return [
            fp
            for token, fp in self._creating.items()
            if (name := names.get(token)) is None or not view.is_usable(name) or name in deleted
        ]

    def _pending_limit_reached(self, view: RecordIndex) -> str | None:
        deleted = self._deleted
        registering = sum(1 for r in view.pending_registration() if r.name not in deleted)
        pending = registering + len(self._in_flight(view))
        if pending >= self.settings.pending_pods_count:
            return (
                f"waiting: {pending} pods have not registered yet, the limit (pending_pods_count) is "
                f"{self.settings.pending_pods_count}; GoCD will ask again"
            )
        return None

    def _at_max_pods(self, view: RecordIndex) -> bool:
        cap = self.settings.max_pods
        if not cap:
            return False
        alive = view.usable_count() - sum(1 for name in self._deleted if view.is_usable(name))
        return alive + len(self._in_flight(view)) >= cap

    def _blocked_by_caps(self, view: RecordIndex) -> bool:
        return self._pending_limit_reached(view) is not None or self._at_max_pods(view)

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

    def _mark_retiring(self, name: str, reason: str) -> None:
        self.change(name, {labels.ANN_STATE: PodState.RETIRING.value, labels.ANN_RETIRE_REASON: reason[:200]})

    def forget_deleted(self) -> None:
        with self.lock:
            self._deleted &= self.known_pod_names()

    def forget_assignment(self, name: str, job_id: int | None) -> None:
        """The pod's job is over without a job-completion (GoCD says the agent is idle)."""
        with self.lock:
            self._assigned_at.pop(name, None)
            if job_id is not None and self._pod_of_job.get(job_id) == name:
                del self._pod_of_job[job_id]

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
