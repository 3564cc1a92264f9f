"""A pool whose warm pod GoCD refused: its key banked longer than GoCD keeps keys (shared by the scenario
tests of refused keys)."""

from __future__ import annotations

from elastic_agent.simulation.gocd_registration import EXPIRED_KEY
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed, virtual_stack

MINUTE = 60.0


def two_idle_pods_and_a_banked_key(stack: VirtualStack, profile: dict[str, str]) -> str:
    """Two idle pods of a MinIdlePods 1 profile, and the key of a job one of them served: the warm pool
    is full, so the key stays banked. Returns the key (as the simulated GoCD issued it)."""
    first, second = schedule(stack, profile), schedule(stack, profile)
    completed(stack, first), completed(stack, second)
    third = completed(stack, schedule(stack, profile, duration=10))
    stack.run_for(30)
    [key] = stack.gocd.keys_issued_for(third.job_id)
    assert len(stack.backend.keys) == 1, "the third job's key, banked: an idle pod served it"
    return key


def refused_scenario(**cluster: str) -> tuple[VirtualStack, dict[str, str], str, str]:
    """GoCD keeps keys 15 minutes, the cluster profile says 30 (the default): a key banked 16 minutes
    earlier (and issued up to 110 s before it came: GoCD's queue) waits while two idle pods keep the
    warm pool (MinIdlePods 1) full; both pods are evicted, and the warm pool takes the key. Returns the
    stack, the elastic profile, the refused key and the refused pod, once GoCD has refused it."""
    stack = virtual_stack(boot_delay=5, key_ttl_s=15 * MINUTE)
    profile = reuse_profile(stack, MinIdlePods="1", IdleTimeout="60m")
    if cluster:
        stack.gocd.config.cluster_profiles = [stack.cluster_profile(**cluster)]
    key = two_idle_pods_and_a_banked_key(stack, profile)
    stack.run_for(16 * MINUTE)  # with GoCD's queue allowed for, it was issued up to 110 s before it came
    before = set(stack.pods_created)
    for name in pod_names(stack):
        stack.kubelet.evict(name)
    stack.run_until(lambda: stack.gocd.refusals, 3 * MINUTE, "GoCD refusing the warm pod's key")
    [refused] = stack.gocd.refusals
    assert refused.key == key and refused.reason == EXPIRED_KEY
    assert refused.pod_name not in before
    return stack, profile, key, refused.pod_name
