"""One pod per job through the whole stack: GoCD (simulated) -> backend over HTTP -> fake cluster."""

from __future__ import annotations

import json
from collections.abc import Callable

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_transport import (
    create_agent_body,
    encode,
    job_completion_body,
    server_ping_body,
    should_assign_work_body,
)
from elastic_agent.simulation.stack import Stack
from tests.conftest import ASSIGN, COMPLETE, CREATE, PING, wait_until


def job_identifier(job_id: int, name: str = "unit") -> dict[str, object]:
    return {
        "pipeline_name": "build",
        "pipeline_label": "1",
        "pipeline_counter": 1,
        "stage_name": "test",
        "stage_counter": "1",
        "job_name": name,
        "job_id": job_id,
    }


def create(stack: Stack, job_id: int, key: str = "key-1", environment: str | None = None) -> tuple[int, str]:
    body = create_agent_body(
        key, stack.elastic_profile(), stack.cluster_profile(), environment, job_identifier(job_id)
    )
    return stack.transport.send(CREATE, encode(body))


def assign(stack: Stack, pod: str, job_id: int) -> str:
    agent = {"agent_id": pod, "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
    body = should_assign_work_body(
        agent, None, stack.elastic_profile(), stack.cluster_profile(), job_identifier(job_id)
    )
    status, text = stack.transport.send(ASSIGN, encode(body))
    assert status == 200, text
    return text


def ping(stack: Stack) -> None:
    status, text = stack.transport.send(PING, encode(server_ping_body([stack.cluster_profile()])))
    assert status == 200, text


def pod_names(stack: Stack) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in stack.pods())


def test_every_job_runs_on_its_own_pod_and_nothing_is_left_behind(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack()
    jobs = [
        stack.gocd.schedule_job(
            "build", "test", f"job-{n}", stack.elastic_profile(), stack.cluster_profile(), None, 30
        )
        for n in range(6)
    ]
    wait_until(lambda: all(stack.gocd.job(j.job_id).completed_at for j in jobs), 20, "all jobs to complete")
    wait_until(lambda: not stack.pods() and not stack.gocd.agents(), 10, "pods and agents to be removed")
    agents_used = {stack.gocd.job(j.job_id).agent_id for j in jobs}
    assert len(agents_used) == len(jobs)
    assert stack.gocd.stats.registrations_accepted == len(jobs)
    assert not stack.gocd.invariant_violations()
    assert not stack.gocd.stats.deleted_while_building
    assert not stack.gocd.stats.non_200_answers
    first = stack.gocd.job(jobs[0].job_id)
    assert "[kubernetes-reuse] created pod" in first.console_text


def test_create_agent_resend_never_duplicates_a_pod_even_after_a_backend_restart(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(boot_delay=10_000, start_gocd=False)
    assert create(stack, 41, "key-a")[0] == 200
    assert create(stack, 41, "key-b")[0] == 200
    assert len(stack.pods()) == 1
    stack.restart_backend()
    assert create(stack, 41, "key-c")[0] == 200
    assert len(stack.pods()) == 1
    assert create(stack, 42, "key-d")[0] == 200
    assert len(stack.pods()) == 2


def test_pending_pods_count_limits_pods_that_have_not_registered(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=10_000, start_gocd=False)
    profile = stack.cluster_profile(pending_pods_count="2")
    for job_id in range(1, 6):
        body = create_agent_body("k", stack.elastic_profile(), profile, None, job_identifier(job_id))
        assert stack.transport.send(CREATE, encode(body))[0] == 200
    assert len(stack.pods()) == 2


def test_pending_limit_is_explained_in_the_job_console(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=10_000)
    profile = stack.cluster_profile(pending_pods_count="1")
    jobs = [
        stack.gocd.schedule_job("p", "s", f"j{n}", stack.elastic_profile(), profile, None, 10)
        for n in range(3)
    ]
    wait_until(
        lambda: "pending_pods_count" in stack.gocd.job(jobs[2].job_id).console_text, 10, "a waiting line"
    )
    assert len(stack.pods()) == 1


def test_should_assign_work_is_true_only_for_the_pods_own_job(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=10_000, start_gocd=False)
    create(stack, 7)
    create(stack, 8)
    pods = {pod["metadata"]["labels"][labels.LABEL_JOB_ID]: pod["metadata"]["name"] for pod in stack.pods()}
    assert assign(stack, pods["7"], 8) == "false"
    assert assign(stack, pods["7"], 7) == "true"
    assert assign(stack, pods["7"], 7) == "false", "a busy pod takes no second job"
    assert assign(stack, "not-a-pod-of-ours", 7) == "false"


def test_job_completion_removes_the_pod_and_the_agent_in_order(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=1)
    job = stack.gocd.schedule_job("p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 20)
    wait_until(lambda: stack.gocd.job(job.job_id).completed_at, 15, "the job to complete")
    wait_until(lambda: not stack.pods(), 10, "the pod to be deleted")
    wait_until(lambda: not stack.gocd.agents(), 10, "the agent to be deleted")
    assert not stack.gocd.stats.deleted_while_building
    assert stack.gocd.stats.delete_refused_enabled == 0, "agents are disabled before they are deleted"


def test_job_completion_for_an_unknown_agent_is_answered_200(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(start_gocd=False)
    body = job_completion_body("nobody", stack.elastic_profile(), stack.cluster_profile(), job_identifier(1))
    assert stack.transport.send(COMPLETE, encode(body)) == (200, "")


def test_ping_removes_pods_whose_agent_never_registered(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=10_000, start_gocd=False)
    create(stack, 1)
    assert len(stack.pods()) == 1
    ping(stack)
    assert len(stack.pods()) == 1, "still within auto_register_timeout"
    stack.clock.advance(11 * 60)  # type: ignore[attr-defined]
    ping(stack)
    wait_until(lambda: not stack.pods(), 5, "the never-registered pod to go")


def test_ping_removes_evicted_pods_and_their_agents(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=1)
    job = stack.gocd.schedule_job(
        "p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 10_000
    )
    wait_until(lambda: stack.gocd.job(job.job_id).agent_id, 15, "the job to be assigned")
    name = stack.gocd.job(job.job_id).agent_id
    assert name is not None
    stack.kubelet.evict(name)
    wait_until(lambda: not stack.pods(), 10, "the evicted pod to be deleted at a ping")


def test_ping_removes_agents_whose_pod_is_gone(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=1)
    job = stack.gocd.schedule_job("p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 30)
    wait_until(lambda: stack.gocd.job(job.job_id).completed_at, 15, "the job to complete")
    # An agent GoCD still knows but whose pod someone deleted by hand.
    wait_until(lambda: not stack.gocd.agents(), 10, "the first agent to go")
    stack.gocd.schedule_job("p", "s", "k", stack.elastic_profile(), stack.cluster_profile(), None, 10_000)
    wait_until(lambda: stack.gocd.agents(), 15, "an agent to register")
    agent = stack.gocd.agents()[0].agent_id
    stack.kube.store.delete_pod("default", agent)
    wait_until(lambda: stack.gocd.agent(agent) is None, 10, "the agent without a pod to be deleted")


def test_pods_of_another_gocd_server_are_never_touched(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(boot_delay=10_000, start_gocd=False)
    create(stack, 1)
    ours = stack.pods()[0]
    foreign = json.loads(json.dumps(ours))
    foreign["metadata"] = {
        "name": "foreign-pod",
        "labels": {**ours["metadata"]["labels"], labels.LABEL_SERVER_ID: "another-server"},
        "annotations": ours["metadata"]["annotations"],
    }
    foreign.pop("status", None)
    stack.kube.store.create_pod("default", foreign)
    stack.clock.advance(30 * 60)  # type: ignore[attr-defined]
    ping(stack)
    ping(stack)
    assert pod_names(stack) == ["foreign-pod"]
    assert assign(stack, "foreign-pod", 1) == "false"


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
    stack.kube.faults.add(method="POST", path_pattern=r"/pods$", status=500, times=1, message="etcd is sad")
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
