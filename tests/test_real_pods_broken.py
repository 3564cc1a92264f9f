"""Broken pods end to end on real pods (tests/node_stack.py), and the same on the fake cluster: a node too
small for the profile's pod (Pending, Unschedulable), an image that does not exist (ErrImagePull,
ImagePullBackOff), an agent that exits 1 at start. Each is told in the waiting job's console and in a
health message with Kubernetes' own reason, the broken pod is deleted, and no more pods of the profile
pile up while it is held (pool/broken_pods.py, pool/holds.py)."""

from __future__ import annotations

import uuid

from elastic_agent.simulation.gocd_model import Job
from tests import real_node_fixtures
from tests.conftest import wait_until
from tests.node_stack import World, WorldMaker, agent_image_on_node, make_world
from tests.stack_helpers import pod_names, schedule

real_node = real_node_fixtures.real_node  # fixtures, used by name
real_node_binaries = real_node_fixtures.real_node_binaries
real_kube_binaries = real_node_fixtures.real_kube_binaries
__all__ = ["agent_image_on_node", "make_world", "real_kube_binaries", "real_node", "real_node_binaries"]

WAIT_S = 90.0  # a bound on any one step, not an expectation (Unschedulable is told once 30 s old)
MORE_CPU_THAN_ANY_NODE = "1000"


def told(world: World, job: Job) -> str:
    """The console line naming the broken pod, once it is there."""
    wait_until(
        lambda: "cannot start" in world.stack.gocd.job(job.job_id).console_text, WAIT_S, "the console line"
    )
    return next(line for line in world.stack.gocd.job(job.job_id).console if "cannot start" in line)


def broken_pod(line: str) -> str:
    return line.split("pod ", 1)[1].split(" ", 1)[0]


def assert_told_deleted_and_held(world: World, job: Job, reasons: tuple[str, ...]) -> str:
    line = told(world, job)
    assert any(reason in line for reason in reasons), line
    wait_until(lambda: any("cannot start" in m.message for m in world.stack.gocd.health_messages), WAIT_S,
               "the health message")  # fmt: skip
    health = next(m.message for m in world.stack.gocd.health_messages if "cannot start" in m.message)
    assert any(reason in health for reason in reasons), health
    name = broken_pod(line)
    wait_until(lambda: name not in pod_names(world.stack), WAIT_S, f"the broken pod {name} deleted")
    # Held: over the next server-pings, while the job still waits, no pods of the profile pile up.
    pings = world.stack.gocd.stats.pings_sent
    seen: set[str] = set()

    def two_more_pings() -> bool:
        seen.update(pod_names(world.stack))
        return world.stack.gocd.stats.pings_sent >= pings + 2

    wait_until(two_more_pings, WAIT_S, "two more server-pings")
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
