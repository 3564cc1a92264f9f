"""Before a pool's first pod list has arrived nothing is decided for it (client-go's informers gate work
on `HasSynced` the same way): should-assign-work says `false` and changes nothing, a job-completion is
kept and counts once the list is there, create-agent waits for the list (docs/architecture.md, "Before
the first pod list"). In virtual time: the in-process port leaves its first list for the end of the
instant, as a real list takes a moment."""

from __future__ import annotations

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX
from tests.support.stack_helpers import reuse_profile, schedule, state
from tests.support.virtual_helpers import assigned, run_to_idle, virtual_stack, wait_state


def test_should_assign_work_before_the_first_list_says_false_and_the_pod_stays_idle() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    job = schedule(stack, profile, name="next")
    stack.restart_backend()
    agent = {"agent_id": name, "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
    body = wire.should_assign_work_body(agent, None, *job.profiles(), job.identifier())
    assert stack.plugin.send(REQUEST_PREFIX + "should-assign-work", wire.encode(body)) == (200, "false")
    stack.settle()  # the pool connects and its list arrives
    assert state(stack, name) == "idle"
    assert stack.plugin.send(REQUEST_PREFIX + "should-assign-work", wire.encode(body)) == (200, "true")


def test_a_job_completion_heard_before_the_first_list_counts_once_the_list_is_there() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    job = assigned(stack, schedule(stack, profile, name="long", duration=3600))
    wait_state(stack, name, "busy")
    stack.restart_backend()
    body = wire.job_completion_body(name, *job.profiles(), job.identifier())
    assert stack.plugin.send(REQUEST_PREFIX + "job-completion", wire.encode(body))[0] == 200
    assert state(stack, name) == "busy"  # nothing decided yet
    stack.settle()
    assert state(stack, name) == "idle"
