"""A pool changed one step at a time, as the pool itself and others change it, for the property tests
of the pool's incremental structures (tests/unit/pool/test_incremental_structures.py,
test_settled_pings.py): `changes` is Hypothesis's strategy of steps, `World.apply` makes one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from elastic_agent.clock import ManualClock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpec
from profiles.schedule import parse_schedule
from tests.support.pool_world import NAMESPACE, pod_manifest, pool_on_a_cluster

GO = "https://ci.example.test/go"
FINGERPRINTS = ("v1:a", "v1:b", "v1:c")
PODS = tuple(f"agent-{n}" for n in range(3))
EVENINGS_TEXT = json.dumps([{"periods": ["* 18-23 * * *"], "MinIdlePods": 3, "IdleTimeout": "20m"}])
EVENINGS = parse_schedule(EVENINGS_TEXT)


def spec(fingerprint: str, min_idle: int, scheduled: bool) -> JobSpec:
    schedule = EVENINGS if scheduled else None
    return JobSpec(fingerprint, {}, True, None, 600.0, min_idle, None, GO, schedule=schedule)


def job(job_id: int) -> JobIdentifier:
    return JobIdentifier("app", "1", 1, "build", "1", f"compile-{job_id}", job_id)


pods = st.sampled_from(PODS)
fingerprints = st.sampled_from(FINGERPRINTS)
states = st.sampled_from(["booting", "idle", "busy", "retiring"])
changes = st.one_of(
    st.tuples(st.just("make"), pods, fingerprints, states, st.booleans()),
    st.tuples(st.just("mark"), pods, states),  # the pool's own change, not written yet
    st.tuples(st.just("write back"), pods),  # the writer writes the pool's changes to the pod
    st.tuples(st.just("behind"), pods, states),  # another writer changes the pod
    st.tuples(st.just("relabel"), pods),  # the same annotations, a new resourceVersion
    st.tuples(st.just("fail"), pods),
    st.tuples(st.just("delete"), pods),
    st.tuples(st.just("deleted by us"), pods),
    st.just(("forget deleted",)),
    st.tuples(st.just("wait"), fingerprints, st.integers(1, 8), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("served"), fingerprints, st.integers(1, 8)),
    st.tuples(st.just("reserve"), fingerprints, st.integers(0, 3)),
    st.tuples(st.just("name reservation"), st.integers(0, 3), pods),
    st.tuples(st.just("drop reservation"), st.integers(0, 3)),
    st.tuples(st.just("supersede"), fingerprints),
    st.tuples(st.just("hold"), fingerprints, pods),
    st.tuples(st.just("release hold"), fingerprints),
    st.tuples(st.just("bank"), st.integers(0, 20)),
    st.tuples(
        st.just("take"),
    ),
    st.tuples(st.just("time"), st.sampled_from([1.0, 29.0, 61.0, 400.0, 600.0, 3 * 3600.0])),
)


class World:
    """A pool over an in-process cluster, changed one step at a time as the pool and others would."""

    def __init__(self) -> None:
        self.store, _, self.state = pool_on_a_cluster(max_pods="5")
        self.clock = self.state.clock
        assert isinstance(self.clock, ManualClock)
        self.tokens: dict[int, object] = {}
        self.keys = 0

    def apply(self, change: tuple[Any, ...]) -> None:
        state, store, kind = self.state, self.store, change[0]
        port = state.port
        with state.lock:
            if kind == "make" and port.get(change[1]) is None:
                _, name, fingerprint, state_name, registered = change
                manifest = pod_manifest(name, state.identity, state_name)
                manifest["metadata"]["annotations"].update(  # type: ignore[index]
                    {
                        labels.ANN_FINGERPRINT: fingerprint,
                        labels.ANN_REUSE: "true",
                        labels.ANN_REGISTERED: "true" if registered else "false",
                        labels.ANN_JOBS_RUN: "1",
                    }
                )
                store.create_pod(NAMESPACE, manifest)
            elif kind == "mark" and port.get(change[1]) is not None:
                since = f"{self.clock.now():.3f}"
                state.commit_mark(change[1], {labels.ANN_STATE: change[2], labels.ANN_STATE_SINCE: since}, {})
            elif kind == "write back" and port.get(change[1]) is not None:
                unwritten = state.take_unwritten(change[1])
                if unwritten is not None:
                    port.patch_pod_metadata(change[1], annotations=unwritten[0])
            elif kind == "behind" and port.get(change[1]) is not None:
                port.patch_pod_metadata(change[1], annotations={labels.ANN_STATE: change[2]})
            elif kind == "relabel" and port.get(change[1]) is not None:
                port.patch_pod_metadata(change[1], labels={"team": f"t{self.clock.now():.0f}"})
            elif kind == "fail" and port.get(change[1]) is not None:
                store.update_status(NAMESPACE, change[1], None, {"phase": "Failed"})
            elif kind == "delete" and port.get(change[1]) is not None:
                port.delete_pod(change[1])
            elif kind == "deleted by us":
                state.note_deleted(change[1])
            elif kind == "forget deleted":
                state.forget_deleted()
            elif kind == "wait":
                _, fingerprint, job_id, min_idle, scheduled = change
                state.book.wait(
                    job(job_id), spec(fingerprint, min_idle, scheduled), f"k{job_id}", self.clock.now()
                )
            elif kind == "served":
                state.book.served(change[1], change[2])
            elif kind == "reserve":
                token = self.tokens[change[2]] = object()
                state.commit_reservation(token, change[1])
            elif kind == "name reservation" and change[1] in self.tokens:
                state.note_pod_name(self.tokens[change[1]], change[2])
            elif kind == "drop reservation" and change[1] in self.tokens:
                state.drop_reservation(self.tokens.pop(change[1]))
            elif kind == "supersede":
                state.book.supersede(change[1])
            elif kind == "hold":
                state.book.holds.failed(change[1], change[2], "ErrImagePull", self.clock.now())
            elif kind == "release hold":
                state.book.holds.succeeded(change[1])
            elif kind == "bank":
                self.keys += 1
                state.keys.offer(f"key-{self.keys}", self.clock.now() - change[1] * 60.0)
            elif kind == "take":
                state.keys.take()
            elif kind == "time":
                self.clock.advance(change[1])
