"""No decision before the pod cache has synced, on a real kube-apiserver: a backend that has just started
decides nothing for a pool until its first pod list has arrived, as client-go's informers gate work on
`HasSynced` (k8s.io/client-go/tools/cache `WaitForCacheSync`). GoCD sends create-agent from five
threads at once (gocd/gocd `CreateAgentQueueHandler`, `go.elasticplugin.createagent.threads`), which
the simulated server does too."""

from __future__ import annotations

from collections.abc import Callable

from elastic_agent.simulation.stack import Stack
from tests.support.live_stack import wait_until
from tests.support.real_cluster import make_real_stack
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.reuse_helpers import assigned, completed
from tests.support.stack_helpers import pod_names, reuse_profile, schedule, state

__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name

PODS = 20


def test_a_burst_of_create_agent_just_after_a_restart_reuses_every_idle_pod_and_creates_none(
    make_real_stack: Callable[..., Stack],
) -> None:
    # The burst comes before a poll: idle agents ask for work every 60 s.
    stack = make_real_stack(boot_delay=10.0, get_work_delay_s=60.0, get_work_interval_s=60.0)
    cluster = stack.cluster_profile(pending_pods_count=str(PODS), idle_timeout="1h")
    profile = reuse_profile(stack)
    warm_up = [schedule(stack, profile, cluster=cluster, name=f"warm-{n}", duration=60) for n in range(PODS)]
    for job in warm_up:
        completed(stack, job, timeout_s=60)
    idle = pod_names(stack)
    assert len(idle) == PODS
    wait_until(lambda: all(state(stack, name) == "idle" for name in idle), 20, "every pod to be idle")

    stack.gocd.stop()  # GoCD pauses, so that the burst is the first the new backend hears
    stack.restart_backend()
    burst = [schedule(stack, profile, cluster=cluster, name=f"burst-{n}", duration=600) for n in range(PODS)]
    stack.gocd.start()  # its first step sends the 20 create-agent, five at a time, then the agents poll
    taken = {assigned(stack, job, timeout_s=60).agent_id for job in burst}

    assert taken == idle, "the burst ran on the idle pods"
    assert pod_names(stack) == idle, "and no pod was created for it"
    assert not stack.gocd.invariant_violations()
