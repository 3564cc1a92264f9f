"""End to end on real pods (tests/node_stack.py): the backend, the simulated GoCD server and the stand-in
agent in its pod, on the real node (kubelet, containerd, runc) and on the fake cluster with the agent as a
process, the same scenario on both so that the fake stays honest: jobs reused in one running container,
an idle pod retired with its grace period, the backend restarted under a running job."""

from __future__ import annotations

from typing import Any

from tests import real_node_fixtures
from tests.node_stack import World, WorldMaker, agent_image_on_node, make_world
from tests.reuse_helpers import completed
from tests.stack_helpers import pod, schedule

real_node = real_node_fixtures.real_node  # fixtures, used by name
real_node_binaries = real_node_fixtures.real_node_binaries
real_kube_binaries = real_node_fixtures.real_kube_binaries
__all__ = ["agent_image_on_node", "make_world", "real_kube_binaries", "real_node", "real_node_binaries"]

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
