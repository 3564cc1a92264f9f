"""A key GoCD has expired, end to end on real pods (tests/support/node_stack.py): the simulated GoCD keeps
keys 8 s while the cluster profile says 30 minutes (the default); the stand-in agent, in its pod on the real
node (and as a process on the fake cluster), is refused with `AgentRegistrationController`'s answer and
writes it to its console as the real agent does, which the node's kubelet keeps as the pod's log. The
plugin reads it there, deletes the pod, names the setting and the server's property in an error health
message, creates no more pods with keys that old, and shows the key nowhere.

The node's fixtures come from tests/conftest.py: one node for the session, whichever modules use it."""

from __future__ import annotations

import time

from elastic_agent.gocd.messages import cluster_profile
from elastic_agent.pool.key_lifetime import figures
from elastic_agent.simulation.gocd_registration import EXPIRED_KEY
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from tests.support.live_stack import wait_until
from tests.support.node_stack import WorldMaker, agent_image_on_node, evict, make_world
from tests.support.reuse_helpers import completed
from tests.support.stack_helpers import pod_names, schedule

__all__ = ["agent_image_on_node", "make_world"]  # fixtures, used by name

KEY_TTL_S = 8.0  # the simulated server's gocd.ephemeral.auto.register.key.expiry.millis, in seconds
WAIT_S = 60.0  # a bound on any one step, not an expectation: steps take seconds


def test_a_key_gocd_expired_is_read_in_the_agents_log_its_pod_deleted_and_the_setting_named(
    make_world: WorldMaker,
) -> None:
    world = make_world(key_ttl_s=KEY_TTL_S)
    stack, profile = world.stack, world.profile(MinIdlePods="1", IdleTimeout="10m")
    first = completed(stack, schedule(stack, profile, duration=1.0), WAIT_S)
    assert first.result == "Passed" and first.agent_id is not None, "a fresh key registers"
    # A create-agent's key whose job another pod served, banked while the warm pool is full (its one
    # idle pod): it waits past GoCD's 8 s, which the cluster profile does not know of.
    key = stack.gocd.issue_key(90001)
    stack.backend.keys.offer(key, stack.clock.now())
    time.sleep(KEY_TTL_S + 1.0)
    evict(world, first.agent_id)  # the warm pool is one pod short: it takes the banked key
    wait_until(lambda: stack.gocd.refusals, WAIT_S, "GoCD refusing the warm pod's key")
    refused = stack.gocd.refusals[0]
    assert (refused.key, refused.reason) == (key, EXPIRED_KEY)
    assert "is either not provided or expired" in refused.answer and key in refused.answer
    wait_until(lambda: refused.pod_name not in pod_names(stack), WAIT_S, "the refused pod deleted")
    errors = lambda: [m.message for m in stack.gocd.health_messages if m.type == "error"]  # noqa: E731
    wait_until(errors, WAIT_S, "the error health message")
    [error] = errors()
    assert refused.pod_name in error and "auto_register_key_expiry" in error
    assert "gocd.ephemeral.auto.register.key.expiry.millis" in error
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None and pool.state.key_lifetime.refused_pods == 1
    found = figures(pool.state)
    assert found.refusal is not None and KEY_TTL_S < found.refusal.key_age_s < KEY_TTL_S + WAIT_S
    # No pile-up: over the next server-pings no pod is created with a key (none young enough is left).
    pings, seen = stack.gocd.stats.pings_sent, set()

    def three_more_pings() -> bool:
        seen.update(pod_names(stack))
        return stack.gocd.stats.pings_sent >= pings + 3

    wait_until(three_more_pings, WAIT_S, "three more server-pings")
    assert seen <= {refused.pod_name, first.agent_id}, seen
    assert {r.pod_name for r in stack.gocd.refusals} == {refused.pod_name}
    warnings = [m.message for m in stack.gocd.health_messages if m.type == "warning"]
    assert any("for want of a registration key" in w for w in warnings), warnings
    # A job brings a fresh key: its pod registers and runs it.
    second = completed(stack, schedule(stack, profile, duration=1.0, name="test"), WAIT_S)
    assert second.result == "Passed" and second.agent_id != refused.pod_name
    report = encode({"cluster_profile_properties": stack.cluster_profile()})
    page = stack.transport.send(REQUEST_PREFIX + "cluster-status-report", report)[1]
    assert "auto_register_key_expiry" in page
    shown = [page, *(m.message for m in stack.gocd.health_messages)]
    shown += [line for job in stack.gocd.jobs() for line in job.console]
    assert not any(key in text for text in shown)
