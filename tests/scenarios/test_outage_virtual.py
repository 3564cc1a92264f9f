"""An outage of the Kubernetes API under a busy pool, in virtual time: a few log lines and one
GoCD health message whatever the number of pods, writes retried per pod with exponential backoff, jobs
assigned from memory meanwhile, and every state change on its pod once the API answers again.

The in-process port is made unreachable (`InProcessCluster.unreachable`: every call raises
`Unreachable`, the cache freezes as a watch without its server would); the backend's pool, writer and
outage tracker are the production ones. Virtual time, so that minutes of outage cost the suite no
waiting."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from elastic_agent.pool.backoff import Backoff
from elastic_agent.simulation.inprocess_cluster import InProcessCluster
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule, state
from tests.support.virtual_helpers import completed, virtual_stack

OUTAGE_S = 480.0  # eight simulated minutes: past the first reminder (outage.REMINDER_S), below two


@dataclass
class Outcome:
    warnings: list[str]
    patches_per_pod: Counter[str]  # patch attempts during the outage
    health_during: set[str]  # every health message GoCD was sent during the outage
    health_after: list[str]  # GoCD's messages once the outage is over
    assigned_during: int
    pods: int


def _port(stack: VirtualStack) -> InProcessCluster:
    (pool,) = stack.backend.pools()
    port = pool.port
    assert isinstance(port, InProcessCluster)
    return port


def outage_under_a_busy_pool(pods: int, caplog: pytest.LogCaptureFixture) -> Outcome:
    stack = virtual_stack()
    cluster = stack.cluster_profile(pending_pods_count=str(pods + 10), idle_timeout="1h")
    profile, one_job = reuse_profile(stack), stack.elastic_profile()
    warm = [schedule(stack, profile, cluster=cluster, name=f"warm-{n}", duration=30) for n in range(pods)]
    # Two pods of one job each, whose jobs end during the outage: their retirement cannot delete them.
    long = [schedule(stack, one_job, cluster=cluster, name=f"long-{n}", duration=200) for n in range(2)]
    for job in warm:
        completed(stack, job)
    reuse_pods = {stack.gocd.job(job.job_id).agent_id for job in warm}
    stack.run_until(lambda: all(state(stack, name) == "idle" for name in reuse_pods), 120, "idle pods")
    assert len(reuse_pods) == pods and len(pod_names(stack)) == pods + 2
    port = _port(stack)
    patches: Counter[str] = Counter()
    patch = port.patch_pod_metadata

    def counted_patch(name: str, **changes: Any) -> Any:
        patches[name] += 1
        return patch(name, **changes)

    port.patch_pod_metadata = counted_patch  # type: ignore[method-assign]
    sent: list[list[str]] = []
    replace = stack.gocd.replace_health_messages

    def recorded(messages: Any) -> None:
        sent.append([message.message for message in messages])
        replace(messages)

    stack.gocd.replace_health_messages = recorded  # type: ignore[method-assign]
    assigned_before = len(stack.gocd.assignments)
    caplog.clear()
    port.unreachable = True
    started = stack.clock.now()
    busy = [schedule(stack, profile, cluster=cluster, name=f"busy-{n}", duration=20) for n in range(pods)]
    while stack.clock.now() - started < OUTAGE_S:
        stack.run_for(30)
        busy += [schedule(stack, profile, cluster=cluster, name="more", duration=20) for _ in range(pods)]
        busy.append(schedule(stack, one_job, cluster=cluster, name="new-pod"))  # a creation that fails
    assert all(stack.gocd.job(job.job_id).completed_at for job in long), "ended during the outage"
    assigned_during = len(stack.gocd.assignments) - assigned_before
    attempts, during = Counter(patches), {text for texts in sent for text in texts}
    port.unreachable = False

    (pool,) = stack.backend.pools()
    stack.run_until(lambda: not list(pool.state.unwritten()), 120, "every state change written")
    for job in busy:
        completed(stack, job)
    stack.run_for(150)  # two pings: the health message goes, the retired pods too
    assert not pod_names(stack) & {stack.gocd.job(job.job_id).agent_id for job in long}
    for name in pod_names(stack):
        record = pool.record(name)
        assert record is not None and state(stack, name) == record.state.value, name
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return Outcome(
        warnings, attempts, during, [m.message for m in stack.gocd.health_messages], assigned_during, pods
    )


def test_an_outage_writes_as_many_warnings_with_forty_pods_as_with_ten_and_one_health_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    small, large = (outage_under_a_busy_pool(pods, caplog) for pods in (10, 40))
    assert len(large.warnings) == len(small.warnings) <= 3, large.warnings  # down, still down, back
    assert "is unreachable" in large.warnings[0] and "assigned from memory" in large.warnings[0]
    assert any("still unreachable after" in line for line in large.warnings)
    assert "reachable again after" in large.warnings[-1]
    for outcome in (small, large):
        assert len(outcome.health_during) == 1, outcome.health_during
        assert "has not answered since" in next(iter(outcome.health_during))
        assert outcome.health_after == []
        assert outcome.assigned_during >= 2 * outcome.pods, "jobs go on being assigned from memory"


def test_patch_attempts_per_pod_during_an_outage_follow_the_backoff_schedule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcome = outage_under_a_busy_pool(10, caplog)
    bound = Backoff().attempts_within(OUTAGE_S)  # 1, 2, 4 ... 60 s apart: 13 in eight minutes
    assert set(outcome.patches_per_pod) and max(outcome.patches_per_pod.values()) <= bound
    # The writer retries by itself: a pod is tried again although nothing new happened to it.
    assert max(outcome.patches_per_pod.values()) >= Backoff().attempts_within(OUTAGE_S / 4)
