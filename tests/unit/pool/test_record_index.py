"""The pool's record index answers what a scan of every record answers, after any sequence of changes."""

from __future__ import annotations

import random

from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.records import PodRecord, PodState

NAMES = [f"pod-{n}" for n in range(12)]
FINGERPRINTS = ["fp-a", "fp-b", None]


def random_record(rng: random.Random, name: str) -> PodRecord:
    return PodRecord(
        name=name,
        state=rng.choice(list(PodState)),
        state_since=rng.choice([10.0, 20.0]),
        created_at=0.0,
        created_for_job_id=rng.choice([None, 1, 2, 3]),
        current_job_id=rng.choice([None, 1, 2, 3]),
        jobs_run=rng.randrange(4),
        registered=rng.random() < 0.5,
        environment=None,
        reuse=rng.random() < 0.7,
        fingerprint=rng.choice(FINGERPRINTS),
        idle_timeout=None,
        max_jobs=rng.choice([None, 2, 5]),
        min_idle=0,
        phase=rng.choice(["Pending", "Running", "Failed"]),
        reason=rng.choice([None, None, "Evicted"]),
        deleting=rng.random() < 0.1,
        retire_reason=None,
    )


def names(records: object) -> list[str]:
    return [r.name for r in records]  # type: ignore[attr-defined]


def test_the_index_answers_as_a_scan_of_all_records_after_random_puts_and_removals() -> None:
    rng = random.Random(11)
    index = RecordIndex()
    for step in range(3000):
        name = rng.choice(NAMES)
        if rng.random() < 0.2:
            index.remove(name)
        else:
            index.put(random_record(rng, name))
        everything = list(index.by_name.values())
        usable = [r for r in everything if not r.deleting and not r.failed and r.state != PodState.RETIRING]
        assert names(index.usable()) == names(usable), step  # in the cluster view's order
        assert index.usable_count() == len(usable)
        assert all(index.is_usable(r.name) == (r in usable) for r in everything)
        assert sorted(names(index.pending_registration())) == sorted(
            r.name for r in everything if r.pending_registration
        )
        for job_id in (1, 2, 3):
            assert sorted(names(index.running(job_id))) == sorted(
                r.name for r in everything if r.current_job_id == job_id
            )
            assert sorted(names(index.created_for(job_id))) == sorted(
                r.name for r in everything if r.created_for_job_id == job_id and not r.reuse
            )
        for fingerprint in ("fp-a", "fp-b"):
            assert sorted(names(index.ready(fingerprint))) == sorted(
                r.name
                for r in everything
                if r.reuse
                and r.fingerprint == fingerprint
                and r.state in (PodState.BOOTING, PodState.IDLE)
                and r.could_take_more_jobs()
            )
            excluded = set(rng.sample(NAMES, rng.randrange(4)))
            counted = [r for r in index.ready(fingerprint) if r in usable and r.name not in excluded]
            assert index.ready_usable_count(fingerprint, excluded) == len(counted), step


def test_a_changed_pod_keeps_its_place_in_the_cluster_view() -> None:
    rng = random.Random(3)
    index = RecordIndex()
    for name in NAMES[:3]:
        index.put(random_record(rng, name))
    index.put(random_record(rng, NAMES[0]))
    assert list(index.by_name) == NAMES[:3]
