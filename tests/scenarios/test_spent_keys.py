"""A registration key GoCD spent is not an expired one: GoCD revokes an elastic agent's key before it
checks the agent (gocd/gocd `AgentRegistrationController.agentRequest`), so a registration refused for
another cause, or the second registration of an agent container restarted after it registered, is
answered "not provided or expired" however young the key. Such a refusal leaves the keys' lifetime as
it was, its pod is replaced once with a banked key within the ping that finds it, and what GoCD said at
the first refusal is named. Key ages allow for the time a create-agent may wait in GoCD's queue."""

from __future__ import annotations

import pytest

from elastic_agent.gocd.messages import cluster_profile
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.key_lifetime import figures
from elastic_agent.simulation.gocd_registration import DUPLICATE_REASON, SPENT_KEY
from elastic_agent.status.pages import render_cluster_status
from tests.support.broken_world import broken_stack, restarting_pod
from tests.support.doubles.harness import VirtualStack
from tests.support.key_refusal_world import refused_scenario
from tests.support.stack_helpers import annotation, pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed, virtual_stack

MINUTE = 60.0
QUEUE_ALLOWANCE_S = 110.0  # GoCD's default starvation threshold, 2 minutes, less 10 s
RESTARTING_POD = restarting_pod("gocd/gocd-agent-alpine-3.19:v24.1.0")


def the_pool(stack: VirtualStack) -> ClusterPool:
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None
    return pool


def warnings(stack: VirtualStack) -> list[str]:
    return [m.message for m in stack.gocd.health_messages if m.type == "warning"]


def bank_a_key(stack: VirtualStack, minutes_old: float = 1.0) -> str:
    """A key GoCD issued for a create-agent whose job another pod served, banked as the plugin banks it."""
    key = stack.gocd.issue_key(9001)
    stack.backend.keys.offer(key, stack.clock.now() - minutes_old * MINUTE)
    return key


def test_a_young_key_refused_for_a_duplicate_agent_id_is_spent_and_the_window_stays() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack, MinIdlePods="1", IdleTimeout="60m")
    completed(stack, schedule(stack, profile, duration=5))  # the pool exists, its first pod idles
    bank_a_key(stack)
    job = schedule(stack, profile, duration=600)  # the idle pod takes it; the warm pool wants another
    stack.run_until(lambda: len(stack.pods_created) == 2, MINUTE, "the warm pool's second pod")
    second, pings = stack.pods_created[1], stack.gocd.stats.pings_sent
    # Another agent is registered under that pod's name as its agent comes up, and gone again before the
    # next ping (an admin's mistake, a leftover): GoCD spends the pod's key, refuses it as a duplicate,
    # and then, at every retry, as "not provided or expired".
    stack.gocd.register_agent("elsewhere", second, stack.gocd.config.plugin_id, stack.gocd.issue_key(9002),
                              frozenset(), "https://gocd.example.test/go", remote=True)  # fmt: skip
    stack.run_until(lambda: any(r.pod_name == second for r in stack.gocd.refusals), MINUTE, "the refusal")
    stack.gocd.disable_agents([second])
    stack.gocd.delete_agents([second])
    assert stack.gocd.stats.pings_sent == pings, "no ping saw the other agent"
    [refused] = [r for r in stack.gocd.refusals if r.pod_name == second]
    assert refused.reason == DUPLICATE_REASON
    stack.run_until(lambda: second not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    found = figures(the_pool(stack).state)
    assert found.refusal is None and found.window_s == 20 * MINUTE, "a spent key says nothing of lifetimes"
    assert found.spent is not None and found.spent_pods == 1
    replacement = stack.pods_created[2]
    assert annotation(stack, replacement, labels.ANN_REPLACES) == second
    assert len(stack.backend.keys) == 0, "the replacement took the banked key"
    [warning] = [w for w in warnings(stack) if second in w]
    assert "Duplicate Elastic agent Id used to register elastic agent." in warning
    assert "not about the key lifetime settings" in warning
    page = render_cluster_status(the_pool(stack), stack.clock)
    assert 'data-key-spent="true"' in page and "spent before, not expired" in page
    stack.run_for(2 * MINUTE)
    assert [r.pod_name for r in stack.gocd.refusals] == [second], "the replacement registered"
    assert job.agent_id is not None


def test_a_restarted_agent_container_is_replaced_once_with_a_banked_key() -> None:
    stack = broken_stack()
    profile = reuse_profile(stack, PodSpecType="yaml", PodConfiguration=RESTARTING_POD, MinIdlePods="1",
                            IdleTimeout="60m")  # fmt: skip
    completed(stack, schedule(stack, profile, duration=5))
    [idle] = pod_names(stack)
    bank_a_key(stack)
    stack.kubelet.oom_kill(idle)  # restartPolicy Always: the container comes up again, its key spent
    stack.run_until(lambda: stack.gocd.refusals, MINUTE, "the restarted agent refused")
    assert stack.gocd.refusals[0].reason == SPENT_KEY
    stack.run_until(lambda: idle not in pod_names(stack), 2 * MINUTE, "the restarted pod deleted")
    [replacement] = pod_names(stack)
    assert annotation(stack, replacement, labels.ANN_REPLACES) == idle
    found = figures(the_pool(stack).state)
    assert found.refusal is None and found.spent_pods == 1 and found.window_s == 20 * MINUTE
    [warning] = [w for w in warnings(stack) if idle in w]
    assert "container restarted after the agent registered" in warning
    # The replacement's container restarts too: it is deleted, and not replaced again (no chain).
    stack.run_until(lambda: stack.gocd.agent(replacement) is not None, MINUTE, "it registered")
    stack.kubelet.oom_kill(replacement)
    stack.run_until(lambda: replacement not in pod_names(stack), 3 * MINUTE, "the replacement deleted")
    assert all(annotation(stack, name, labels.ANN_REPLACES) is None for name in pod_names(stack))


def test_key_ages_allow_for_the_time_gocds_queue_may_have_held_the_create_agent() -> None:
    stack = virtual_stack()
    job = schedule(stack, stack.elastic_profile(), duration=5)
    stack.run_until(lambda: stack.pods_created, MINUTE, "the job's pod")
    [name] = stack.pods_created
    issued = float(annotation(stack, name, labels.ANN_KEY_ISSUED_AT) or "nan")
    created = float(annotation(stack, name, labels.ANN_CREATED_AT) or "nan")
    assert created - issued == pytest.approx(QUEUE_ALLOWANCE_S, abs=1.0)
    completed(stack, job)


def test_a_pod_wanted_ahead_without_a_key_is_logged_once_per_quiet_spell(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stack = virtual_stack()
    profile = reuse_profile(stack, MinIdlePods="2", IdleTimeout="60m")
    caplog.set_level("WARNING")
    completed(stack, schedule(stack, profile, duration=5))
    stack.run_for(10 * MINUTE)  # pings go on wanting the second warm pod
    lines = [r.getMessage() for r in caplog.records if "for want of a registration key" in r.getMessage()]
    assert len(lines) == 1 and "wanted ahead of demand (MinIdlePods in force)" in lines[0], lines
    bank_a_key(stack)  # the shortage ends: a key comes
    stack.run_for(2 * MINUTE)
    assert len(stack.pods_created) == 2
    stack.kubelet.evict(stack.pods_created[1])  # short again: a new spell, a new line
    stack.run_for(3 * MINUTE)
    lines = [r.getMessage() for r in caplog.records if "for want of a registration key" in r.getMessage()]
    assert len(lines) == 2


def test_gocd_loading_the_plugin_again_ends_what_a_refusal_taught() -> None:
    stack, _, _, pod = refused_scenario()  # GoCD keeps keys 15 minutes, the profile says 30
    stack.run_until(lambda: pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    assert figures(the_pool(stack).state).refusal is not None, "taken as expired: nothing showed it spent"
    # The remedy the message gives: the server restarted with the profile's lifetime, which loads the plugin.
    loaded = '{"plugin_settings": {}, "cluster_profiles": [], "elastic_agent_profiles": []}'
    status, _ = stack.send("cd.go.elastic-agent.migrate-config", loaded)
    assert status == 200
    found = figures(the_pool(stack).state)
    assert found.refusal is None and found.window_s == 20 * MINUTE, "the server may have a new lifetime"
