"""The pool's records, indexed by what its decisions look up.

create-agent, the warm pool and serve-waiting-jobs decide under the pool's lock, which should-assign-work
also takes. Scanning every record there would make each create-agent hold the lock for a time that
grows with the cluster's pods (RESULTS.md section 4). The index is updated per changed pod (the pool
hears of every change) and answers in time proportional to what it returns. Records are immutable, so
an update is remove-old then add-new.

The index knows only the records. What else makes a pod unusable (deleted by us but still shown by the
watch) and which fingerprints are superseded stay with the pool, which filters what the index returns.
Insertion-ordered dicts, not sets, hold the names: a set of strings iterates in an order that changes
from run to run, and the simulator must give the same answers for the same seed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TypeVar

from elastic_agent.pool.records import PodRecord, PodState

_READY_STATES = (PodState.BOOTING, PodState.IDLE)
Names = dict[str, None]  # an insertion-ordered set of pod names
Key = TypeVar("Key", int, str)


class RecordIndex:
    def __init__(self) -> None:
        self.by_name: dict[str, PodRecord] = {}  # every record, in the cluster view's order
        # Bumped by each change of a record: what was derived from the index at one revision holds until
        # the next (state.py's decision caches).
        self.revision = 0
        self._usable: Names = {}  # PodRecord.usable
        self._pending: Names = {}  # PodRecord.pending_registration
        self._running: dict[int, Names] = {}  # current job id -> pods
        self._created_for: dict[int, Names] = {}  # job id a one-job pod was created for -> pods
        self._ready: dict[str, Names] = {}  # fingerprint -> reuse pods booting or idle with jobs left
        self._ready_usable: dict[str, Names] = {}  # the same, usable ones only (the warm pool counts them)

    def put(self, record: PodRecord) -> None:
        old = self.by_name.get(record.name)
        if old is record:
            return  # the pool kept the record: nothing it reads changed
        if old is not None:
            self._unindex(old)
        self.by_name[record.name] = record  # an existing name keeps its place
        self._index(record)
        self.revision += 1

    def remove(self, name: str) -> None:
        old = self.by_name.pop(name, None)
        if old is not None:
            self._unindex(old)
            self.revision += 1

    def usable(self) -> Iterator[PodRecord]:
        """In the cluster view's order (ties in a choice among them fall the same way as before)."""
        usable = self._usable
        return (record for name, record in self.by_name.items() if name in usable)

    def usable_count(self) -> int:
        return len(self._usable)

    def is_usable(self, name: str) -> bool:
        return name in self._usable

    def pending_registration(self) -> Iterator[PodRecord]:
        return (self.by_name[name] for name in self._pending)

    def running(self, job_id: int) -> Iterator[PodRecord]:
        return (self.by_name[name] for name in self._running.get(job_id, ()))

    def created_for(self, job_id: int) -> Iterator[PodRecord]:
        return (self.by_name[name] for name in self._created_for.get(job_id, ()))

    def ready(self, fingerprint: str) -> Iterator[PodRecord]:
        return (self.by_name[name] for name in self._ready.get(fingerprint, ()))

    def ready_usable_count(self, fingerprint: str, excluded: Collection[str]) -> int:
        """How many of `ready(fingerprint)` are usable and not in `excluded`, without a pass over them."""
        names = self._ready_usable.get(fingerprint)
        if not names:
            return 0
        return len(names) - sum(1 for name in excluded if name in names)

    def _index(self, record: PodRecord) -> None:
        name = record.name
        if record.usable:
            self._usable[name] = None
        if record.pending_registration:
            self._pending[name] = None
        if record.current_job_id is not None:
            self._running.setdefault(record.current_job_id, {})[name] = None
        if record.created_for_job_id is not None and not record.reuse:
            self._created_for.setdefault(record.created_for_job_id, {})[name] = None
        if (
            record.reuse
            and record.fingerprint
            and record.state in _READY_STATES
            and record.could_take_more_jobs()
        ):
            self._ready.setdefault(record.fingerprint, {})[name] = None
            if record.usable:
                self._ready_usable.setdefault(record.fingerprint, {})[name] = None

    def _unindex(self, record: PodRecord) -> None:
        name = record.name
        self._usable.pop(name, None)
        self._pending.pop(name, None)
        _discard(self._running, record.current_job_id, name)
        _discard(self._created_for, record.created_for_job_id, name)
        _discard(self._ready, record.fingerprint, name)
        _discard(self._ready_usable, record.fingerprint, name)


def _discard(index: dict[Key, Names], key: Key | None, name: str) -> None:
    if key is None:
        return
    names = index.get(key)
    if names is not None:
        names.pop(name, None)
        if not names:
            del index[key]
