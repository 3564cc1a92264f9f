"""Broken pods told through the whole served stack: the backend over HTTP (its console lines sent from
the narrator's thread, its health messages through GoCD's callback endpoint), in scaled time, on the
fake API server and on the real kube-apiserver with the node stand-in
(tests/support/doubles/apiserver_node.py) writing the kubelet's statuses. tests/scenarios/test_broken_pods.py
holds the behaviour in detail, in virtual time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.kubelet import PodFault
from elastic_agent.simulation.stack import Stack, StackOptions
from tests.support import real_kube_fixtures
from tests.support.live_stack import SPEED, wait_until
from tests.support.real_cluster import make_real_stack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule

real_kube = real_kube_fixtures.real_kube  # fixtures
real_kube_binaries = real_kube_fixtures.real_kube_binaries
__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name

MISSING = "registry.example.test/gocd-agent:does-not-exist"


def missing_image(pod: Obj) -> PodFault | None:
    return PodFault("image_pull") if pod["spec"]["containers"][0].get("image") == MISSING else None


@pytest.fixture
def fake_stack() -> Iterator[Callable[[], Stack]]:
    stacks: list[Stack] = []

    def make() -> Stack:
        stack = Stack(ScaledClock(SPEED), StackOptions(boot_delay=5.0, gocd=GoCDConfig(seed=1),
                                                       faults=missing_image))  # fmt: skip
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture(params=["fake", "real"])
def stack(request: pytest.FixtureRequest) -> Stack:
    if request.param == "fake":
        made: Stack = request.getfixturevalue("fake_stack")()
        return made
    real: Stack = request.getfixturevalue("make_real_stack")(boot_delay=5.0, faults=missing_image)
    return real


def test_a_pod_whose_image_is_missing_is_told_in_the_console_and_health_and_deleted(stack: Stack) -> None:
    job = schedule(stack, reuse_profile(stack, Image=MISSING))
    wait_until(lambda: "cannot start" in stack.gocd.job(job.job_id).console_text, 30, "the console line")
    console = stack.gocd.job(job.job_id).console_text
    assert "ImagePullBackOff" in console or "ErrImagePull" in console, console
    assert f'image "{MISSING}"' in console or MISSING in console
    wait_until(lambda: any("cannot start" in m.message for m in stack.gocd.health_messages), 30,
               "the health message")  # fmt: skip
    broken = [line.split("pod ", 1)[1].split(" ", 1)[0] for line in stack.gocd.job(job.job_id).console
              if "cannot start" in line]  # fmt: skip
    wait_until(lambda: not set(broken) & pod_names(stack), 30, "the broken pod deleted")
