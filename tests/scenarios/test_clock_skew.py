"""The API server's clock is another machine's: the pods' ages are measured on the backend's own clock,
so a skew of an hour either way neither kills pods that are still booting, nor keeps pods that never
register, nor retires reusable pods for their lifetime early. In virtual time, with a skewed server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.kubelet import PodFault
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed

HOUR = 3600.0


@pytest.mark.parametrize("skew", [-HOUR, HOUR])
def test_a_pod_that_boots_for_two_minutes_is_not_taken_for_one_that_never_registered(skew: float) -> None:
    stack = VirtualStack(boot_delay=120, server_clock_skew_s=skew)
    cluster = stack.cluster_profile(auto_register_timeout="5m")
    job = completed(stack, schedule(stack, stack.elastic_profile(), cluster=cluster), within_s=600)
    assert stack.pods_created == [job.agent_id], "its one pod was left to register and ran the job"


@pytest.mark.parametrize("skew", [-HOUR, HOUR])
def test_a_pod_whose_agent_never_registers_goes_after_auto_register_timeout(skew: float) -> None:
    never: Callable[[Obj], PodFault | None] = lambda pod: PodFault("no_register")  # noqa: E731
    stack = VirtualStack(boot_delay=10, server_clock_skew_s=skew, faults=never)
    cluster = stack.cluster_profile(auto_register_timeout="5m")
    schedule(stack, stack.elastic_profile(), cluster=cluster)
    stack.run_until(lambda: pod_names(stack), 60, "the pod being created")
    [pod] = pod_names(stack)
    stack.run_for(4 * 60)
    assert pod in pod_names(stack), "not before auto_register_timeout"
    stack.run_until(lambda: pod not in pod_names(stack), 3 * 60, "the pod going after auto_register_timeout")


@pytest.mark.parametrize("skew", [-HOUR, HOUR])
def test_max_pod_lifetime_is_counted_from_the_pods_creation_on_the_backends_clock(skew: float) -> None:
    stack = VirtualStack(boot_delay=10, server_clock_skew_s=skew)
    cluster = stack.cluster_profile(max_pod_lifetime="30m", idle_timeout="1h")
    profile = reuse_profile(stack)
    created = stack.clock.now()
    first = completed(stack, schedule(stack, profile, cluster=cluster, duration=60))
    second = completed(stack, schedule(stack, profile, cluster=cluster, duration=60))
    assert second.agent_id == first.agent_id, "a young pod is reused"
    stack.run_for(20 * 60)
    assert first.agent_id in pod_names(stack), "not retired before its lifetime"
    stack.run_until(
        lambda: first.agent_id not in pod_names(stack), 15 * 60, "the pod retiring for its lifetime"
    )
    assert stack.clock.now() - created >= 30 * 60
