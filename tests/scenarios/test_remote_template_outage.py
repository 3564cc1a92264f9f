"""The assignment path never waits on the network: a remote pod template is served from its last good
copy and refreshed in the background, so that with the template's host down for an hour the pods that
exist keep getting work, and GoCD's health messages say the template cannot be refreshed. In virtual
time, with the template served over real HTTP on loopback."""

from __future__ import annotations

from tests.support.secret_values import TemplateServer
from tests.support.stack_helpers import schedule
from tests.support.virtual_helpers import completed, run_to_idle, virtual_stack


def test_with_the_templates_host_down_for_an_hour_existing_pods_keep_getting_work_and_gocd_is_told() -> None:
    templates = TemplateServer()
    try:
        stack = virtual_stack(boot_delay=20)
        url = f"http://127.0.0.1:{templates.port}/pod.yaml?access_token=never-shown"
        profile = stack.elastic_profile(PodSpecType="remote", RemoteFile=url, Reuse="true")
        cluster = stack.cluster_profile(idle_timeout="30m")
        pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    finally:
        templates.stop()
    ran_on = set()
    for n in range(12):  # a job every five minutes for an hour
        stack.run_for(300 - 20)
        job = completed(stack, schedule(stack, profile, cluster=cluster, name=f"later-{n}", duration=20))
        ran_on.add(job.agent_id)
        assert (job.wait_s or 0) < 15, "assigned at the next poll: no pod start-up, no wait on the network"
    assert ran_on == {pod}
    messages = [m.message for m in stack.gocd.health_messages]
    assert any(f"The pod template at http://127.0.0.1:{templates.port}/pod.yaml cannot be refreshed" in m
               for m in messages), messages  # fmt: skip
    assert not any("never-shown" in m for m in messages)
