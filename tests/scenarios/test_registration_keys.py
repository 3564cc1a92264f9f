"""Registration keys: GoCD's are single-use, so each goes into one pod, never two; the ones kept for the
warm pool are used oldest usable first and dropped before they expire."""

from __future__ import annotations

from typing import Any

from elastic_agent.clock import ManualClock
from elastic_agent.gocd.messages import JobIdentifier, cluster_profile
from elastic_agent.pool.fingerprints import HeldKey
from elastic_agent.pool.keys import KEY_LIFETIME_S, RegistrationKeys
from elastic_agent.simulation.gocd_model import ENV_KEY
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import reuse_profile, schedule
from tests.support.virtual_helpers import run_to_idle, virtual_stack


def key_of(banked: HeldKey | None) -> str | None:
    return banked.key if banked is not None else None


def test_the_oldest_usable_key_is_used_first_and_only_once_whatever_order_keys_come_in() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    keys.offer("new", clock.now() + 1)
    keys.offer("old", clock.now())
    assert key_of(keys.take()) == "old"
    assert key_of(keys.take()) == "new"
    assert keys.take() is None


def test_oldest_first_serves_both_pods_where_newest_first_serves_one() -> None:
    """Keys at 0 and 10 minutes, used for 20 minutes each; pods wanted at 11 and 25 minutes: the first
    pod takes the key of minute 0, which leaves the one of minute 10 for minute 25."""
    clock = ManualClock()
    keys = RegistrationKeys(clock, max_age_s=20 * 60)
    keys.offer("minute-0", clock.now())
    clock.advance(10 * 60)
    keys.offer("minute-10", clock.now())
    clock.advance(60)
    assert key_of(keys.take(20 * 60)) == "minute-0"
    clock.advance(14 * 60)
    assert key_of(keys.take(20 * 60)) == "minute-10"


def test_keys_past_their_age_are_never_used() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock, max_age_s=25 * 60)
    keys.offer("a", clock.now())
    clock.advance(20 * 60)
    keys.offer("b", clock.now())
    clock.advance(6 * 60)
    assert len(keys) == 1
    assert key_of(keys.take()) == "b"
    assert keys.take() is None


def test_a_key_goes_only_to_a_pod_that_can_register_before_the_key_expires() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    keys.offer("a", clock.now())
    clock.advance(21 * 60)
    assert keys.usable(KEY_LIFETIME_S - 10 * 60) == 0, "21 + 10 minutes: past GoCD's 30"
    assert keys.take(KEY_LIFETIME_S - 10 * 60) is None
    assert keys.usable(KEY_LIFETIME_S - 2 * 60) == 1
    assert key_of(keys.take(KEY_LIFETIME_S - 2 * 60)) == "a"


def pod_keys(stack: VirtualStack) -> list[str]:
    return [
        env["value"]
        for pod in stack.pods()
        for container in pod["spec"]["containers"]
        for env in container.get("env") or []
        if env["name"] == ENV_KEY
    ]


def test_a_key_kept_by_a_waiting_job_is_not_also_banked_for_the_warm_pool() -> None:
    """How a key could be spent twice, in process: an idle pod, MinIdlePods 1, a create-agent that needs no
    new pod, the idle pod evicted; the next ping creates a pod for the waiting job and one for the warm
    pool. The simulated server refuses a spent key as gocd/gocd's `AgentRegistrationController.agentRequest`
    does (`EphemeralAutoRegisterKeyService.validateAndRevoke`)."""
    stack = virtual_stack(boot_delay=5, get_work_delay_s=120.0, get_work_interval_s=120.0)
    profile: dict[str, Any] = reuse_profile(stack, MinIdlePods="1")
    idle_pod = run_to_idle(stack, schedule(stack, profile))
    backend = stack.backend
    gocd = backend.gocd_servers.for_callback(None)
    cluster = cluster_profile(stack.cluster_profile())
    pool = backend.pool(cluster, gocd)
    job = JobIdentifier("build", "7", 7, "stage", "1", "waits", 9001)
    key = stack.gocd.issue_key(job.job_id)
    spec = backend.spec(profile, cluster, None, job.pipeline_name)
    outcome = pool.create_agent(job, spec, key, gocd)
    assert outcome.created is None and outcome.message.startswith("no new pod needed")
    stack.kubelet.evict(idle_pod)
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: stack.gocd.stats.pings_sent > pings, 120, "a server-ping")
    stack.run_for(60)
    keys = pod_keys(stack)
    assert keys.count(key) == 1, "the key went into exactly one pod"
    assert stack.gocd.refusals == []


def test_the_warm_pool_refills_right_after_an_assignment_not_at_the_next_ping() -> None:
    """MinIdlePods 1 and one idle pod: a job takes it, and its create-agent's key, banked when the idle
    pod served the job, goes into a new warm pod at once (the pool's background work after the answer),
    not when the next server-ping comes minutes later."""
    # Agents ask for work every 30 s, so the job's create-agent (GoCD's scheduler looks every 5 s) comes
    # before the idle agent asks: the key is the job's, and banked when the idle pod serves it.
    stack = virtual_stack(
        boot_delay=5, ping_interval_s=3600.0, get_work_delay_s=30.0, get_work_interval_s=30.0
    )
    profile: dict[str, Any] = reuse_profile(stack, MinIdlePods="1")
    first = schedule(stack, profile, duration=10)
    stack.run_until(lambda: stack.gocd.job(first.job_id).completed_at, 600, "the first job")
    stack.run_for(30)
    before = set(stack.pods_created)
    pings = stack.gocd.stats.pings_sent
    job = schedule(stack, profile, duration=300)
    stack.run_until(lambda: stack.gocd.job(job.job_id).agent_id, 120, "the job's assignment")
    assert stack.gocd.stats.create_agent_sent == 2
    assert stack.gocd.job(job.job_id).agent_id in before, "an existing pod took the job"
    stack.run_for(10)
    assert stack.gocd.stats.pings_sent == pings, "no ping came meanwhile"
    assert len(set(stack.pods_created) - before) == 1, "one warm pod was created for the one taken"

def test_a_banked_key_goes_only_into_a_pod_that_can_register_before_the_key_expires() -> None:
    """Found by the pool's state machine (tests/unit/pool/test_pool_state_machine.py): a key banked 22 minutes
    earlier went into a warm pod whose boot took 400 s, well within auto_register_timeout (10 minutes),
    and GoCD refused the registration for good: the key had expired at 30 minutes. A banked key goes
    into a pod only if it outlives the time the pool gives the pod to register. (The key is banked by
    hand: a served job's key is used at once when the warm pool is short, so it sits in the bank only
    while the warm pool is full.)"""
    boots = iter([5.0, 400.0])
    stack = VirtualStack(boot_delay=lambda _pod: next(boots, 5.0))
    profile: dict[str, Any] = reuse_profile(stack, MinIdlePods="1", IdleTimeout="60m")
    idle_pod = run_to_idle(stack, schedule(stack, profile))
    key = stack.gocd.issue_key(9001)  # a create-agent's key whose job another pod served
    stack.backend.keys.offer(key, stack.clock.now())
    stack.run_for(22 * 60)
    # GoCD's 30 minutes less the 10 the pod is given to register: the bank keeps keys 20 minutes.
    assert stack.backend.keys.take() is None, "kept no longer than a pod may use it"
    stack.backend.keys.offer(key, stack.clock.now() - 22 * 60)
    stack.kubelet.evict(idle_pod)  # the warm pool is one pod short
    stack.run_for(15 * 60)
    assert key not in pod_keys(stack), "22 minutes old: it would expire before a 10-minute boot ends"
    assert stack.gocd.invariant_violations() == []
