"""benchmarks/real_pods.py's measuring code on the fake cluster, whose simulated kubelet starts the stand-in
agent as a process per pod (tests/support/node_stack.py's `fake_stack`): the same code the real node's run
uses, on a tiny trace. What is checked is what the numbers are made of, never how large they are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import real_pods
from benchmarks.real_pods_live import boot_samples, replay
from elastic_agent.simulation.stack import Stack
from elastic_agent.traces.workload import TraceJob
from tests.support.node_stack import FAKE_IMAGE, agent_profile, fake_stack

TINY = [TraceJob(0.0, "standin", None, "pipeline-a", 0.5), TraceJob(0.0, "standin", None, "pipeline-b", 0.5)]


@pytest.fixture
def stack() -> Iterator[Stack]:
    made = fake_stack()
    yield made
    made.stop()


def test_each_boot_sample_is_a_pod_of_its_own_seen_before_its_agent_registered(stack: Stack) -> None:
    elastic = agent_profile(stack, FAKE_IMAGE, **real_pods.POLICIES["one pod per job"])
    samples = boot_samples(stack, elastic, stack.cluster_profile(), 2, 0.2)
    assert len({sample.pod for sample in samples}) == 2
    for sample in samples:
        assert 0.0 <= sample.pod_created_s <= sample.registered_s
        assert sample.created_to_registered_s == sample.registered_s - sample.pod_created_s


def test_a_replayed_trace_without_reuse_counts_one_pod_and_one_wait_per_job(stack: Stack) -> None:
    elastic = agent_profile(stack, FAKE_IMAGE, **real_pods.POLICIES["one pod per job"])
    result = replay(stack, TINY, elastic, stack.cluster_profile(), "one pod per job")
    assert (result.jobs, result.assigned, result.completed) == (2, 2, 2)
    assert result.pods_created == 2
    assert len(result.boots_s) == 2
    assert result.violations == []
    waits = sorted(job.wait_s or 0.0 for job in stack.gocd.jobs())
    assert result.wait_max == waits[-1]


def test_the_prediction_runs_the_same_trace_with_the_measured_boots() -> None:
    single, reuse = real_pods.predict(TINY, [1.0, 1.5], seed=1)
    assert (single.policy, reuse.policy) == ("one pod per job", "reuse")
    assert single.completed == reuse.completed == 2
    assert single.pods_created == 2
    assert single.violations == reuse.violations == []
    settings = real_pods.sim_settings([1.0, 1.5], seed=1)
    assert settings.boot_bounds_s == (1.0, 1.5)
