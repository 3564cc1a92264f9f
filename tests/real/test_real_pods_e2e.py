"""End to end on real pods (tests/support/node_stack.py): the backend, the simulated GoCD server and the
stand-in agent in its pod, on the real node (kubelet, containerd, runc) and on the fake cluster with the agent
as a process, the same scenario on both so that the fake stays honest: jobs reused in one running container,
an idle pod retired with its grace period, the backend restarted under a running job, an agent killed
under its job, an eviction through the Eviction API granted for an idle pod and refused (429) for a busy
one by the shipped PodDisruptionBudget (docker/kubernetes/pdb.yaml) until its job ends. Then broken
pods: a node too small for the profile's pod (Pending, Unschedulable), an image that does not exist
(ErrImagePull, ImagePullBackOff), an agent that exits 1 at start; each is told in the waiting job's
console and in a health message with Kubernetes' own reason, the broken pod is deleted, and no more pods
of the profile pile up while it is held (pool/broken_pods.py, pool/holds.py).

The node's fixtures come from tests/conftest.py: one node for the session, whichever modules use it."""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from elastic_agent.pool.labels import ANN_STATE, LABEL_BUSY
from elastic_agent.simulation.gocd_model import Job
from tests.support.doubles.standin_agent import SIGTERM_EXIT
from tests.support.live_stack import wait_until
from tests.support.node_stack import (
    GRACE_PERIOD_S,
    World,
    WorldMaker,
    agent_image_on_node,
    evict,
    kill_agent,
    make_world,
)
from tests.support.reuse_helpers import completed
from tests.support.stack_helpers import pod, pod_names, schedule

__all__ = ["agent_image_on_node", "make_world"]  # fixtures, used by name

JOB_S = 1.0  # a job's sleep in the agent, real seconds
WAIT_S = 60.0  # a bound on any one step, not an expectation: steps take seconds


def container_of(world: World, name: str) -> dict[str, Any]:
    found = pod(world.stack, name)
    assert found is not None, f"pod {name} is gone"
    statuses = found.get("status", {}).get("containerStatuses") or [{}]
    status: dict[str, Any] = statuses[0]
    return status


def same_container(status: dict[str, Any]) -> tuple[Any, ...]:
    """What names one run of a container: its runtime id (the real kubelet's) and when it started."""
    return status.get("containerID"), status.get("state", {}).get("running", {}).get("startedAt")



def building_on(world: World, job: Job) -> str:
    """The agent `job` runs on, once the agent has reported it Building."""
    wait_until(
        lambda: "Building" in world.stack.gocd.job(job.job_id).agent_reports, WAIT_S, "the job building"
    )
    name = world.stack.gocd.job(job.job_id).agent_id
    assert name is not None
    return name

def test_jobs_run_one_after_another_in_the_same_running_container(make_world: WorldMaker) -> None:
    world = make_world()
    profile = world.profile()
    first = completed(world.stack, schedule(world.stack, profile, duration=JOB_S), WAIT_S)
    assert first.agent_id is not None
    before = container_of(world, first.agent_id)
    second = completed(world.stack, schedule(world.stack, profile, duration=JOB_S, name="test"), WAIT_S)
    assert second.agent_id == first.agent_id
    after = container_of(world, first.agent_id)
    assert same_container(after) == same_container(before)
    assert after["state"].get("running") is not None and after["restartCount"] == 0
    assert (first.result, second.result) == ("Passed", "Passed")
    [registration] = world.stack.gocd.registrations  # one agent, registered once, ran both
    assert registration.agent_id == first.agent_id
    assert world.stack.gocd.invariant_violations() == []


class Termination:
    """What a pod showed until it was gone, seen by polling it: the grace period its deletion gave, and
    its container's terminated state once the agent stopped (the kubelet writes it before it removes
    the pod). `exit_code` is that state's, or else the agent process's (the fake's kubelet writes no
    state for a pod it deletes)."""

    def __init__(self, world: World, name: str) -> None:
        self.grace_s: int | None = None
        self.terminated: dict[str, Any] | None = None
        self.exit_code: int | None = None
        wait_until(lambda: self._seen(world, name), WAIT_S, f"pod {name} gone")
        if self.terminated is not None:
            self.exit_code = self.terminated.get("exitCode")
        elif world.stack.agent_processes is not None:
            process = world.stack.agent_processes.process(name)
            assert process is not None
            self.exit_code = process.wait(WAIT_S)

    def _seen(self, world: World, name: str) -> bool:
        found = pod(world.stack, name)
        if found is None:
            return True
        meta = found["metadata"]
        # The first deletion's grace: once the containers stopped, the kubelet deletes again with grace 0.
        if meta.get("deletionTimestamp") is not None and self.grace_s is None:
            self.grace_s = meta.get("deletionGracePeriodSeconds")
        statuses = found.get("status", {}).get("containerStatuses") or [{}]
        self.terminated = statuses[0].get("state", {}).get("terminated") or self.terminated
        return False


def test_an_idle_pod_is_retired_and_its_agent_stops_on_sigterm_within_the_grace_period(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    job = completed(
        world.stack, schedule(world.stack, world.profile(IdleTimeout="2s"), duration=JOB_S), WAIT_S
    )
    assert job.agent_id is not None
    ended = Termination(world, job.agent_id)
    assert ended.grace_s == GRACE_PERIOD_S
    assert ended.exit_code in (0, SIGTERM_EXIT), ended.exit_code
    assert world.stack.gocd.invariant_violations() == []


def test_the_backend_restarted_under_a_running_job_keeps_the_pod_which_runs_the_next_job(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    profile = world.profile()
    running = schedule(world.stack, profile, duration=4.0)
    building_on(world, running)
    world.stack.restart_backend()
    first = completed(world.stack, running, WAIT_S)
    assert first.result == "Passed" and first.agent_id is not None
    before = container_of(world, first.agent_id)
    second = completed(world.stack, schedule(world.stack, profile, duration=JOB_S, name="test"), WAIT_S)
    assert second.agent_id == first.agent_id
    assert same_container(container_of(world, first.agent_id)) == same_container(before)
    assert len(world.stack.gocd.registrations) == 1
    assert world.stack.gocd.invariant_violations() == []


def test_an_agent_killed_under_its_job_is_lost_the_job_rescheduled_and_the_pod_replaced(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    job = schedule(world.stack, world.profile(), duration=30.0)
    name = building_on(world, job)
    wait_until(
        lambda: container_of(world, name).get("containerID") or world.node is None, WAIT_S, "the container id"
    )
    found = pod(world.stack, name)
    assert found is not None
    kill_agent(world, found)
    ended = Termination(world, name)
    assert ended.terminated is not None, "the container's end was never shown"
    assert (ended.terminated["exitCode"], ended.terminated["reason"]) == (128 + signal.SIGKILL, "Error")
    wait_until(lambda: world.stack.gocd.job(job.job_id).rescheduled_as, WAIT_S, "the job rescheduled")
    again = world.stack.gocd.job(job.job_id).rescheduled_as
    assert again is not None
    world.stack.gocd.job(again).duration_s = JOB_S
    rerun = completed(world.stack, world.stack.gocd.job(again), WAIT_S)
    assert rerun.result == "Passed" and rerun.agent_id not in (None, name)
    assert world.stack.gocd.invariant_violations() == []


def marked(world: World, name: str, state: str) -> dict[str, Any]:
    """The pod once the backend's patch of `state` is on it."""
    def state_of() -> str | None:
        annotations = (pod(world.stack, name) or {}).get("metadata", {}).get("annotations") or {}
        return annotations.get(ANN_STATE)

    wait_until(lambda: state_of() == state, WAIT_S, f"pod {name} marked {state}")
    found = pod(world.stack, name)
    assert found is not None
    return found


def test_an_idle_pods_eviction_is_granted_its_agent_removed_and_a_later_job_gets_a_new_pod(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    profile = world.profile()
    first = completed(world.stack, schedule(world.stack, profile, duration=JOB_S), WAIT_S)
    assert first.result == "Passed" and first.agent_id is not None
    name = first.agent_id
    assert LABEL_BUSY not in marked(world, name, "idle")["metadata"].get("labels", {})
    evict(world, name)
    wait_until(lambda: name not in pod_names(world.stack), WAIT_S, f"the evicted pod {name} gone")
    wait_until(lambda: world.stack.gocd.agent(name) is None, WAIT_S, f"agent {name} removed from GoCD")
    second = completed(world.stack, schedule(world.stack, profile, duration=JOB_S, name="test"), WAIT_S)
    assert second.result == "Passed" and second.agent_id not in (None, name)
    assert world.stack.gocd.invariant_violations() == []


def test_a_busy_pods_eviction_is_refused_with_429_until_its_job_ends_then_granted(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    job = schedule(world.stack, world.profile(), duration=6.0)
    name = building_on(world, job)
    assert marked(world, name, "busy")["metadata"]["labels"][LABEL_BUSY] == "true"
    with pytest.raises(ApiException) as refused:
        evict(world, name)
    assert refused.value.status == 429, refused.value.body
    assert "disruption budget" in str(refused.value.body), refused.value.body
    kept = pod(world.stack, name)
    assert kept is not None and kept["metadata"].get("deletionTimestamp") is None
    done = completed(world.stack, job, WAIT_S)
    assert (done.result, done.agent_id) == ("Passed", name)
    assert LABEL_BUSY not in marked(world, name, "idle")["metadata"].get("labels", {})
    evict(world, name)
    wait_until(lambda: name not in pod_names(world.stack), WAIT_S, f"the evicted pod {name} gone")
    assert world.stack.gocd.invariant_violations() == []


BROKEN_WAIT_S = 90.0  # Unschedulable is told once the pod is 30 s old
MORE_CPU_THAN_ANY_NODE = "1000"


def told(world: World, job: Job) -> str:
    """The console line naming the broken pod, once it is there."""
    wait_until(
        lambda: "cannot start" in world.stack.gocd.job(job.job_id).console_text,
        BROKEN_WAIT_S,
        "the console line",
    )
    return next(line for line in world.stack.gocd.job(job.job_id).console if "cannot start" in line)


def broken_pod(line: str) -> str:
    return line.split("pod ", 1)[1].split(" ", 1)[0]


def assert_told_deleted_and_held(world: World, job: Job, reasons: tuple[str, ...]) -> str:
    line = told(world, job)
    assert any(reason in line for reason in reasons), line
    health_told = lambda: any("cannot start" in m.message for m in world.stack.gocd.health_messages)  # noqa: E731
    wait_until(health_told, BROKEN_WAIT_S, "the health message")
    health = next(m.message for m in world.stack.gocd.health_messages if "cannot start" in m.message)
    assert any(reason in health for reason in reasons), health
    name = broken_pod(line)
    wait_until(lambda: name not in pod_names(world.stack), BROKEN_WAIT_S, f"the broken pod {name} deleted")
    # Held: over the next server-pings, while the job still waits, no pods of the profile pile up.
    pings = world.stack.gocd.stats.pings_sent
    seen: set[str] = set()

    def two_more_pings() -> bool:
        seen.update(pod_names(world.stack))
        return world.stack.gocd.stats.pings_sent >= pings + 2

    wait_until(two_more_pings, BROKEN_WAIT_S, "two more server-pings")
    assert len(seen - {name}) <= 1, seen
    assert world.stack.gocd.job(job.job_id).completed_at is None
    return line


def test_a_profile_asking_more_cpu_than_the_node_has_is_told_unschedulable_and_held(
    make_world: WorldMaker,
) -> None:
    world = make_world()
    profile = world.profile({"resources": {"requests": {"cpu": MORE_CPU_THAN_ANY_NODE}}})
    job = schedule(world.stack, profile)
    line = assert_told_deleted_and_held(world, job, ("Unschedulable",))
    assert "Insufficient cpu" in line, line


def test_an_image_that_does_not_exist_is_told_as_a_failed_pull_and_held(make_world: WorldMaker) -> None:
    world = make_world()
    missing = f"localhost/gocd-reuse-no-such-image:{uuid.uuid4().hex[:8]}"
    job = schedule(world.stack, world.profile({"image": missing}))
    line = assert_told_deleted_and_held(world, job, ("ErrImagePull", "ImagePullBackOff"))
    assert missing in line, line


def test_an_agent_that_exits_1_at_start_is_told_with_its_exit_code_and_held(make_world: WorldMaker) -> None:
    world = make_world()
    job = schedule(world.stack, world.profile({"env": [{"name": "STANDIN_EXIT_AT_START", "value": "1"}]}))
    line = assert_told_deleted_and_held(world, job, ("Error",))
    assert "exited with code 1" in line, line
