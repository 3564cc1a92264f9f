"""New credentials for a cluster (an admin edits the profile's token or CA, or the token is rotated)
reconnect the pool that exists: what it had not written to the pods yet is written with the new
credentials, and nothing of its state is lost. Through the whole stack over HTTP, with the fake API
server refusing writes for a while."""

from __future__ import annotations

from collections.abc import Callable

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode, server_ping_body
from elastic_agent.simulation.stack import Stack
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import wait_until
from tests.support.reuse_helpers import assigned, run_to_idle
from tests.support.stack_helpers import pod, reuse_profile, schedule


def test_state_not_yet_written_when_the_credentials_change_reaches_the_pod_afterwards(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(boot_delay=5)
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))
    refusing = faults_of(stack.kube).add("PATCH", r"/pods/", status=503, times=None, message="etcd is busy")
    second = assigned(stack, schedule(stack, profile, duration=3600))
    assert second.agent_id == first
    wait_until(lambda: refusing.hits >= 2, 10, "the writer to try and fail")

    rotated = stack.cluster_profile(security_token="a-rotated-token")
    answer = stack.transport.send(REQUEST_PREFIX + "server-ping", encode(server_ping_body([rotated])))
    assert answer[0] == 200, answer
    faults_of(stack.kube).clear()

    def written() -> bool:
        found = pod(stack, first) or {}
        annotations = found.get("metadata", {}).get("annotations", {})
        return f'"job_id":{second.job_id}' in annotations.get(labels.ANN_CURRENT_JOB, "")

    wait_until(written, 10, "the busy state with its job to reach the pod")
