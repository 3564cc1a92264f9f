"""The cluster fails under the backend (unreachable, refusing writes, refusing the credentials): the job's
console and GoCD's health messages say so, and everything works again once the cluster does. Through the
whole stack over HTTP, with the fake API server's injected faults."""

from __future__ import annotations

from collections.abc import Callable

from elastic_agent.simulation.gocd_transport import create_agent_body, encode, server_ping_body
from elastic_agent.simulation.stack import Stack
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import CREATE, PING, wait_until


def job_identifier(job_id: int) -> dict[str, object]:
    return {
        "pipeline_name": "build",
        "pipeline_label": "1",
        "pipeline_counter": 1,
        "stage_name": "test",
        "stage_counter": "1",
        "job_name": "unit",
        "job_id": job_id,
    }


def create(stack: Stack, job_id: int) -> tuple[int, str]:
    body = create_agent_body(
        "key", stack.elastic_profile(), stack.cluster_profile(), None, job_identifier(job_id)
    )
    return stack.transport.send(CREATE, encode(body))


def ping(stack: Stack) -> None:
    status, text = stack.transport.send(PING, encode(server_ping_body([stack.cluster_profile()])))
    assert status == 200, text


def test_unreachable_cluster_shows_a_health_message_until_it_recovers(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(start_gocd=False)
    ping(stack)
    assert stack.gocd.health_messages == []
    stack.kube.set_unreachable(True)
    try:
        status, text = create(stack, 5)
        assert status == 503 and "cluster" in text
        wait_until(lambda: _ping_and_check_health(stack), 15, "a health message about the cluster")
    finally:
        stack.kube.set_unreachable(False)
    wait_until(lambda: create(stack, 5)[0] == 200, 15, "pod creation to work again")
    wait_until(
        lambda: _ping_and_check_health(stack) is False and not stack.gocd.health_messages,
        15,
        "every health message to clear",
    )


def _ping_and_check_health(stack: Stack) -> bool:
    ping(stack)
    return any("Kubernetes cluster" in message.message for message in stack.gocd.health_messages)


def test_failed_pod_creation_is_explained_in_the_console(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    faults_of(stack.kube).add(
        method="POST", path_pattern=r"/pods$", status=500, times=1, message="etcd is sad"
    )
    job = stack.gocd.schedule_job("p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 10)
    wait_until(
        lambda: "could not create an agent pod" in stack.gocd.job(job.job_id).console_text, 10, "a line"
    )


def test_a_cluster_that_refuses_the_credentials_shows_a_health_message(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(start_gocd=False)
    ping(stack)
    stack.kube.api.forbidden = True
    stack.kube.api.cut_streams()  # the open watch ends; the next list is refused
    try:
        status, text = create(stack, 6)
        assert status == 503 and "403" in text
        wait_until(lambda: _ping_and_check_health(stack), 15, "a health message about the credentials")
        assert any("refuses this plugin's credentials" in m.message for m in stack.gocd.health_messages)
    finally:
        stack.kube.api.forbidden = False
    wait_until(lambda: create(stack, 6)[0] == 200, 15, "pod creation to work again")
    wait_until(
        lambda: _ping_and_check_health(stack) is False and not stack.gocd.health_messages,
        15,
        "every health message to clear",
    )
