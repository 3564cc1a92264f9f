"""The state one cluster's pool keeps, and how it reads pods.

State lives on the pods (annotations, `records.py`); what is kept here only in memory may be lost by a
restart without harm (docs/architecture.md, "What a restart loses"):
- annotation and label changes not yet written back: they count at once, in every record read here,
  and reach the pod through the writer;
- pods being created (reservations), so that concurrent create-agent calls do not all create one;
- the per-fingerprint book (`fingerprints.py`): waiting jobs, recipes, superseded fingerprints;
- assignments: which pod said `true` to which job, and when;
- pods this backend deleted that the watch still shows;
- what GoCD's refusal of a key taught, and the pods wanted without a key (key_lifetime.py).

Locking: `lock` (re-entrant) guards every attribute below, and `settings` and `port` too, which change
when an admin edits the cluster profile. Decisions run with it held, and so does the Applier's commit of
their in-memory intents, so a decision never sees half of another. The one exception is `_changed` and
`_gone`: the port's listener appends pod names to them from the watch thread without the lock (a deque's
append and popleft are atomic), so that the watch never waits for a request.

What is kept for a pod (its unwritten changes above all) goes only when the cache has seen the pod
deleted: a pod the cache does not show is not gone (a new connection may not have listed it yet).

This module changes nothing by itself: the Applier calls its `commit_*` and `note_*` methods.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.kube.port import ClusterError, ClusterPort, PodView
from elastic_agent.pool.fingerprints import FingerprintBook, HeldKey
from elastic_agent.pool.gone import RecentlyGone
from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.intents import Wait
from elastic_agent.pool.key_lifetime import KeyLifetime, KeyShortages
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.records import PodRecord, PodState, RecordInputs
from elastic_agent.pool.settled import SettledPods
from elastic_agent.pool.shortfall import ShortfallCache
from profiles.cluster import ClusterProfile

Overlay = dict[str, str | None]


@dataclass(frozen=True)
class CachedRecord:
    """A pod's record as last derived: for the pod at resourceVersion `version` with the pool's changes
    up to `generation`, from `inputs`. A new version or generation with equal inputs keeps the record
    (the index then sees no change), so a record is derived once per change of what it reads."""

    version: str
    generation: int
    inputs: RecordInputs
    record: PodRecord


# What each kind of failing call means for the admin reading GoCD's health messages.
PROBLEMS = {
    "write": "Writing the state of agent pods fails (it is kept in memory and written again at every ping)",
    "delete": "Deleting agent pods fails (they stay retiring, and every ping tries again)",
}


class PoolState:
    def __init__(
        self,
        port: ClusterPort,
        identity: PodIdentity,
        settings: ClusterProfile,
        clock: Clock,
        keys: RegistrationKeys,
    ) -> None:
        self.identity = identity
        self.clock = clock
        self.keys = keys  # shared by every pool of the backend; has its own lock
        self.key_lifetime = KeyLifetime()  # how old a key its pods may get (key_lifetime.py)
        self.shortages = KeyShortages()  # pods wanted ahead without a key; has its own lock
        # Registered pods whose agent container restarted: pod -> (restarts, log reads) (key_refusals.py).
        self.restart_reads: dict[str, tuple[int, int]] = {}
        self.lock = threading.RLock()
        self.book = FingerprintBook()
        self._settings = settings
        self._port = port
        self._annotations: dict[str, Overlay] = {}
        self._labels: dict[str, Overlay] = {}
        self._generation: dict[str, int] = {}  # per pod, bumped by each change made here
        self._record_cache: dict[str, CachedRecord] = {}
        self._first_seen: dict[str, float] = {}  # per pod, on our clock (records.PodRecord.from_pod)
        # Every record, indexed for the decisions (index.py); only the pods named in `_changed` since the
        # last look are read again.
        self._index: RecordIndex | None = None
        self._changed: deque[str] = deque()
        self._gone: deque[str] = deque()  # pods the port told deleted, for `_forget`
        self._gone_recently = RecentlyGone(clock)  # what `_forget` forgot, for the ping's agent removal
        # A sequence number per change made here, and each pod's latest: a repair from GoCD's agent list
        # must not undo a change made after that list was asked for.
        self._sequence = 0
        self._changed_at: dict[str, int] = {}
        # Bumped by each change of what decisions read besides the records and the book (reservations,
        # pods deleted by us, the port): with the index's and the book's revisions, it says when what was
        # derived from the state still holds (`revision`, `demand`, warm.py).
        self._revision = 0
        self._demands = DemandCache()
        self.shortfalls = ShortfallCache()  # the warm pool's (shortfall.py)
        self.settled = SettledPods()  # what the last server-ping found nothing to do about (settled.py)
        self._creating: dict[object, str] = {}  # reservation token -> fingerprint
        self._creating_names: dict[object, str] = {}  # reservation token -> name of the pod being created
        self._deleted: set[str] = set()  # pods we deleted that the watch may still show
        self._retiring_now: set[str] = set()  # pods a retirement is working on right now
        # pod -> (job id, when) of its latest `true`, and job id -> that pod, until the job-completion. A lost
        # completion leaves a stale pair, which `given_to_another_pod` ignores and which goes with the
        # pod's next assignment or with the pod: neither map outgrows the pods.
        self._assigned: dict[str, tuple[int, float]] = {}
        self._pod_of_job: dict[int, str] = {}
        # Kinds of cluster calls that fail now ("write", "delete") -> the sentence for GoCD's health.
        self._problems: dict[str, str] = {}
        port.add_listener(self._heard)

    # -- what changes with the cluster profile -------------------------------------------------------

    @property
    def settings(self) -> ClusterProfile:
        with self.lock:
            return self._settings

    @property
    def port(self) -> ClusterPort:
        with self.lock:
            return self._port

    @property
    def settings_unlocked(self) -> ClusterProfile:
        # Reading one reference is atomic; callers only compare it with what a request brought.
        return self._settings

    def commit_settings(self, settings: ClusterProfile) -> None:
        with self.lock:
            self._settings = settings

    def commit_port(self, port: ClusterPort) -> None:
        """Read pods from `port` from now on (new credentials), once its first list has arrived; changes
        not yet written are kept. A pod neither port shows is gone (the new list is complete)."""
        port.add_listener(self._heard)
        with self.lock:
            old, self._port = self._port, port
            self._index = None
            self._revision += 1
            self._record_cache.clear()
            for name in self._kept_for():
                if port.get(name) is None and old.get(name) is None:
                    self._forget(name)

    def _kept_for(self) -> set[str]:
        """The pods something is kept for."""
        return set(self._annotations) | set(self._labels) | set(self._generation) | set(self._first_seen)

    # -- reading records -----------------------------------------------------------------------------

    def record(self, name: str) -> PodRecord | None:
        with self.lock:
            pod = self._port.get(name)
            if pod is None:
                return None
            generation = self._generation.get(name, 0)
            cached = self._record_cache.get(name)
            if cached and cached.version == pod.resource_version and cached.generation == generation:
                return cached.record  # only owned pods are cached; a relabelled pod has a new resourceVersion
            if not self.identity.owns(pod.labels):
                return None
            first_seen = self._first_seen.setdefault(name, self.clock.now())
            inputs = RecordInputs.of(pod, self._annotations.get(name), first_seen)
            # The same inputs make the same record: a write-back of our own change, a container's status.
            same = cached is not None and cached.inputs == inputs
            record = cached.record if same and cached is not None else PodRecord.from_inputs(inputs)
            self._record_cache[name] = CachedRecord(pod.resource_version, generation, inputs, record)
            return record

    def records(self) -> list[PodRecord]:
        with self.lock:
            return list(self.indexed().by_name.values())

    def indexed(self) -> RecordIndex:
        """The index of every record, brought up to date with the changes heard since. Decisions read
        one such view, taken once under the lock, as they would read one list."""
        with self.lock:
            index = self._index
            if index is None:
                self._changed.clear()  # the full read below sees every change heard so far
                index = self._index = RecordIndex()
                for pod in self._port.pods():
                    record = self.record(pod.name)
                    if record is not None:
                        index.put(record)
            changed, gone = self._changed, self._gone
            while gone:
                name = gone.popleft()
                if self._port.get(name) is None:
                    self._forget(name)
            while changed:
                name = changed.popleft()
                record = self.record(name)
                if record is None:
                    index.remove(name)
                else:
                    index.put(record)  # a new pod goes last, as in the port's cache
            return index

    def _forget(self, name: str) -> None:
        """A pod the cache saw deleted (or no longer ours): drop what was kept for it, its unwritten
        changes too, or a backend that runs for months would keep something of every pod it ever saw."""
        self._annotations.pop(name, None)
        self._labels.pop(name, None)
        self._record_cache.pop(name, None)
        self._generation.pop(name, None)
        self._first_seen.pop(name, None)
        self._changed_at.pop(name, None)
        self._revision += 1
        self.commit_release(name)
        self._gone_recently.saw(name)

    def _heard(self, kind: str, pod: PodView) -> None:
        # Called after each change of the port's cache, from its watch thread or our own writes.
        if kind == "DELETED":
            self._gone.append(pod.name)
        self._changed.append(pod.name)

    def gone_recently(self) -> set[str]:
        """Pods the cache saw deleted within the last hour (gone.py)."""
        with self.lock:
            self.indexed()  # takes in the deletions the watch has told since the last decision
            return self._gone_recently.names()

    def known_pod_names(self) -> set[str]:
        port = self.port
        return {pod.name for pod in port.pods() if self.identity.owns(pod.labels)}

    # -- the rules decisions share ---------------------------------------------------------------------

    def alive(self, record: PodRecord) -> bool:
        """Usable (records.PodRecord.usable) and not deleted by us."""
        return record.usable and record.name not in self._deleted

    def alive_records(self, view: RecordIndex) -> list[PodRecord]:
        """Every record that `alive` accepts, in the cluster view's order."""
        deleted = self._deleted
        return [r for r in view.usable() if r.name not in deleted]

    def ready(self, fingerprint: str, view: RecordIndex) -> list[PodRecord]:
        """Alive reuse pods of the fingerprint, booting or idle, that can take another job."""
        if self.book.is_superseded(fingerprint):
            return []
        return [r for r in view.ready(fingerprint) if self.alive(r)]

    def revision(self) -> tuple[int, int, int]:
        """Changes with every change of what decisions read but the clock and the key bank: the records
        (the index's revision: call `indexed` first), the book, the reservations and the pods deleted by
        us. What is derived from the state at one revision holds until the next."""
        index = self._index
        return (-1 if index is None else index.revision), self._revision, self.book.revision

    def demand(self, fingerprint: str, view: RecordIndex) -> tuple[int, int]:
        """(waiting jobs, pods that will be able to take one: booting, idle, being created); derived once
        per revision of the state (the warm pool asks for every profile at every ping and decision)."""
        if view is not self._index:
            return self._demand_of(fingerprint, view, None)
        demands = self._demands.at(self.revision())
        found = demands.get(fingerprint)
        if found is None:
            in_flight = self._demands.in_flight(self, view)
            found = demands[fingerprint] = self._demand_of(fingerprint, view, in_flight)
        return found

    def _demand_of(
        self, fingerprint: str, view: RecordIndex, in_flight: Mapping[str, int] | None
    ) -> tuple[int, int]:
        if in_flight is None:
            creating = sum(1 for fp in self.in_flight(view) if fp == fingerprint)
        else:
            creating = in_flight.get(fingerprint, 0)
        # len(self.ready(...)), counted from the index: the warm pool asks at every ping and decision.
        superseded = self.book.is_superseded(fingerprint)
        ready = 0 if superseded else view.ready_usable_count(fingerprint, self._deleted)
        return self.book.waiting_count(fingerprint), ready + creating

    def in_flight(self, view: RecordIndex) -> list[str]:
        """Fingerprints of the pods being created that the view does not show alive yet: the cluster view
        gets a new pod before its reservation is dropped, and it must not count twice meanwhile."""
        deleted, names = self._deleted, self._creating_names
        return [
            fp
            for token, fp in self._creating.items()
            if (name := names.get(token)) is None or not view.is_usable(name) or name in deleted
        ]

    def is_creating(self, token: object) -> bool:
        return token in self._creating

    def pending(self, view: RecordIndex) -> int:
        """Pods that count against pending_pods_count: not registered yet, or being created."""
        deleted = self._deleted
        registering = sum(1 for r in view.pending_registration() if r.name not in deleted)
        return registering + len(self.in_flight(view))

    def room(self, view: RecordIndex) -> int:
        """How many more pods the caps (pending_pods_count, max_pods) allow now."""
        settings = self._settings
        room = settings.pending_pods_count - self.pending(view)
        if settings.max_pods:
            alive = view.usable_count() - sum(1 for name in self._deleted if view.is_usable(name))
            room = min(room, settings.max_pods - alive - len(self.in_flight(view)))
        return max(0, room)

    def given_to_another_pod(self, job_id: int, agent_id: str) -> bool:
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

    def assigned_at(self, name: str, default: float) -> float:
        with self.lock:
            assigned = self._assigned.get(name)
            return assigned[1] if assigned is not None else default

    def deleted_by_us(self, name: str) -> bool:
        return name in self._deleted

    def at_rest(self) -> bool:
        """Nothing under way that a later ping would carry on: no pod being created or retired, none
        deleted that the watch still shows, no change unwritten or unheard, no failing call, no hold."""
        with self.lock:
            busy = self._creating or self._retiring_now or self._deleted or self._annotations or self._labels
            return not (busy or self._problems or self._changed or self._gone or len(self.book.holds))

    def next_forgetting(self) -> float:
        """The earliest time something kept is forgotten: a waiting job, a recipe, a pod gone recently."""
        with self.lock:
            return min(self.book.next_forgetting(), self._gone_recently.next_expiry())

    def change_mark(self) -> int:
        """The sequence number of the latest change made here (see `changed_since`)."""
        with self.lock:
            return self._sequence

    def changed_since(self, name: str, mark: int) -> bool:
        return self._changed_at.get(name, 0) > mark

    def sizes(self) -> dict[str, int]:
        """What is kept per pod and per fingerprint (it must stay bounded; tests read it)."""
        with self.lock:
            return {
                "records_cached": len(self._record_cache),
                "generations": len(self._generation),
                "first_seen": len(self._first_seen),
                "changed_at": len(self._changed_at),
                "unwritten": len(set(self._annotations) | set(self._labels)),
                "assigned": len(self._assigned),
                "pod_of_job": len(self._pod_of_job),
                "deleted": len(self._deleted),
                "gone_recently": len(self._gone_recently),
                "creating": len(self._creating),
                **self.book.sizes(),
            }

    # -- commits (the Applier's, lock held) ------------------------------------------------------------

    def commit_mark(
        self, name: str, annotations: Mapping[str, str | None], pod_labels: Mapping[str, str | None]
    ) -> None:
        with self.lock:
            self._annotations.setdefault(name, {}).update(annotations)
            if pod_labels:
                self._labels.setdefault(name, {}).update(pod_labels)
            self._generation[name] = self._generation.get(name, 0) + 1
            self._sequence += 1
            self._changed_at[name] = self._sequence
            self._changed.append(name)

    def commit_reservation(self, token: object, fingerprint: str) -> None:
        self._creating[token] = fingerprint
        self._revision += 1

    def note_pod_name(self, token: object, name: str) -> None:
        with self.lock:
            self._creating_names[token] = name
            self._revision += 1

    def drop_reservation(self, token: object) -> None:
        with self.lock:
            self._creating.pop(token, None)
            self._creating_names.pop(token, None)
            self._revision += 1

    def commit_assignment(self, pod: str, job_id: int, fingerprint: str, now: float) -> None:
        self.commit_release(pod)
        self._assigned[pod] = (job_id, now)
        self._pod_of_job[job_id] = pod
        self.bank(fingerprint, self.book.served(fingerprint, job_id))

    def commit_wait(self, wait: Wait, now: float) -> None:
        issued = now - self.key_lifetime.queue_allowance_s()  # GoCD's request says not when: the earliest
        displaced = self.book.wait(wait.job, wait.spec, wait.key, now, issued)
        if displaced is not None:  # a re-send: its gap is GoCD's starvation threshold, about
            self.key_lifetime.resent(issued - displaced.since)
        self.bank(wait.spec.fingerprint, displaced)

    def bank(self, fingerprint: str, key: HeldKey | None) -> None:
        """A key a waiting job let go of without a pod using it: the warm pool's, if its profile has one
        (it stays valid until it expires and is bound to no job); else it is dropped."""
        spec = self.book.recipe(fingerprint)
        if key is not None and spec is not None and spec.reuse and spec.wants_warm_pods:
            self.keys.offer(key.key, key.since)

    def forget_waiting(self, now: float, with_pods: Collection[str] | None = None) -> None:
        """Jobs not re-sent for long (fingerprints.WAITING_TTL_S) are forgotten; with `with_pods`, also
        the recipes no pod and no job needs (FingerprintBook.forget_unused). Their keys go to the bank."""
        if with_pods is None:
            unused = self.book.expire_waiting(now)
        else:
            unused = self.book.forget_unused(now, with_pods)
        for fingerprint, key in unused:
            self.bank(fingerprint, key)

    def commit_release(self, pod: str) -> None:
        assigned = self._assigned.pop(pod, None)
        if assigned is not None and self._pod_of_job.get(assigned[0]) == pod:
            del self._pod_of_job[assigned[0]]

    def claim_for_retiring_now(self, names: list[str]) -> list[str]:
        """The pods of `names` no other retirement is working on, now claimed for this one."""
        with self.lock:
            claimed = [n for n in names if n not in self._retiring_now and n not in self._deleted]
            self._retiring_now.update(claimed)
            return claimed

    def done_retiring(self, names: list[str]) -> None:
        with self.lock:
            self._retiring_now.difference_update(names)

    def note_deleted(self, name: str) -> None:
        with self.lock:
            self._deleted.add(name)
            self._revision += 1

    def forget_deleted(self) -> None:
        """Deleted pods the watch no longer shows need no remembering."""
        with self.lock:
            if self._deleted:  # at every ping: most have none, and the names cost a pass over the pods
                self._deleted &= self.known_pod_names()
                self._revision += 1

    # -- problems with the cluster, for GoCD's health messages ------------------------------------------

    def note_problem(self, what: str, error: ClusterError | None) -> None:
        with self.lock:
            if error is None:
                self._problems.pop(what, None)
            else:
                self._problems[what] = (
                    PROBLEMS.get(what, "Calls to the Kubernetes cluster fail") + f": {error}"
                )

    def problems(self) -> dict[str, str]:
        with self.lock:
            return dict(self._problems)

    # -- what the writer persists ----------------------------------------------------------------------

    def take_unwritten(self, name: str) -> tuple[Overlay, Overlay] | None:
        """(annotations, labels) still to be written for a pod, or None; what the pod already shows is
        dropped from the overlay."""
        with self.lock:
            pod = self._port.get(name)
            if pod is None:
                return None  # not shown (yet): kept until the cache has seen the pod deleted
            annotations = unconfirmed(self._annotations.get(name, {}), pod.annotations)
            pod_labels = unconfirmed(self._labels.get(name, {}), pod.labels)
            if not annotations:
                self._annotations.pop(name, None)
            if not pod_labels:
                self._labels.pop(name, None)
            if not annotations and not pod_labels:
                return None
            return annotations, pod_labels

    def unwritten(self) -> Iterator[str]:
        with self.lock:
            return iter(sorted(set(self._annotations) | set(self._labels)))


def unconfirmed(wanted: Mapping[str, str | None], actual: Mapping[str, str]) -> Overlay:
    """The part of `wanted` that `actual` does not show yet."""
    return {key: value for key, value in wanted.items() if actual.get(key) != value}


class DemandCache:
    """`PoolState.demand` per fingerprint, and the in-flight reservations counted per fingerprint, as
    derived at one revision of the state; a new revision starts them afresh. The pool's lock guards it."""

    def __init__(self) -> None:
        self._revision: tuple[int, int, int] | None = None
        self._demands: dict[str, tuple[int, int]] = {}
        self._in_flight: dict[str, int] | None = None

    def at(self, revision: tuple[int, int, int]) -> dict[str, tuple[int, int]]:
        """The demands derived at `revision` so far (the caller adds to them)."""
        if revision != self._revision:
            self._revision, self._demands, self._in_flight = revision, {}, None
        return self._demands

    def in_flight(self, state: PoolState, view: RecordIndex) -> dict[str, int]:
        """How many pods `state.in_flight(view)` has per fingerprint, at the revision of `at`."""
        if self._in_flight is None:
            counts: dict[str, int] = {}
            for fingerprint in state.in_flight(view):
                counts[fingerprint] = counts.get(fingerprint, 0) + 1
            self._in_flight = counts
        return self._in_flight
