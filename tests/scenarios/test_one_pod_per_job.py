"""One pod per job (Reuse=false), in virtual time: the simulated GoCD server, the in-process backend and
the simulated cluster."""

from __future__ import annotations

import json

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_transport import (
    create_agent_body,
    encode,
    job_completion_body,
    server_ping_body,
    should_assign_work_body,
)
from tests.support.doubles.harness import VirtualStack
from tests.support.live_stack import ASSIGN, COMPLETE, CREATE, PING
from tests.support.virtual_helpers import virtual_stack


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


def create(
    stack: VirtualStack, job_id: int, key: str = "key-1", environment: str | None = None
) -> tuple[int, str]:
    body = create_agent_body(
        key, stack.elastic_profile(), stack.cluster_profile(), environment, job_identifier(job_id)
    )
    return stack.send(CREATE, encode(body))


def assign(stack: VirtualStack, pod: str, job_id: int) -> str:
    agent = {"agent_id": pod, "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
    body = should_assign_work_body(
        agent, None, stack.elastic_profile(), stack.cluster_profile(), job_identifier(job_id)
    )
    status, text = stack.send(ASSIGN, encode(body))
    assert status == 200, text
    return text


def ping(stack: VirtualStack) -> None:
    status, text = stack.send(PING, encode(server_ping_body([stack.cluster_profile()])))
    assert status == 200, text


def pod_names(stack: VirtualStack) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in stack.pods())


def test_every_job_runs_on_its_own_pod_and_nothing_is_left_behind() -> None:
    stack = virtual_stack()
    jobs = [
        stack.gocd.schedule_job(
            "build", "test", f"job-{n}", stack.elastic_profile(), stack.cluster_profile(), None, 30
        )
        for n in range(6)
    ]
    stack.run_until(
        lambda: all(stack.gocd.job(j.job_id).completed_at for j in jobs), 1200, "all jobs to complete"
    )
    stack.run_until(
        lambda: not stack.pods() and not stack.gocd.agents(), 600, "pods and agents to be removed"
    )
    agents_used = {stack.gocd.job(j.job_id).agent_id for j in jobs}
    assert len(agents_used) == len(jobs)
    assert stack.gocd.stats.registrations_accepted == len(jobs)
    assert not stack.gocd.invariant_violations()
    assert not stack.gocd.stats.deleted_while_building
    assert not stack.gocd.stats.non_200_answers
    first = stack.gocd.job(jobs[0].job_id)
    assert "[kubernetes-reuse] created pod" in first.console_text


def test_create_agent_resend_never_duplicates_a_pod_even_after_a_backend_restart() -> None:
    stack = virtual_stack(boot_delay=10_000)
    assert create(stack, 41, "key-a")[0] == 200
    assert create(stack, 41, "key-b")[0] == 200
    assert len(stack.pods()) == 1
    stack.restart_backend()
    assert create(stack, 41, "key-c")[0] == 200
    assert len(stack.pods()) == 1
    assert create(stack, 42, "key-d")[0] == 200
    assert len(stack.pods()) == 2


def test_pending_pods_count_limits_pods_that_have_not_registered() -> None:
    stack = virtual_stack(boot_delay=10_000)
    profile = stack.cluster_profile(pending_pods_count="2")
    for job_id in range(1, 6):
        body = create_agent_body("k", stack.elastic_profile(), profile, None, job_identifier(job_id))
        assert stack.send(CREATE, encode(body))[0] == 200
    assert len(stack.pods()) == 2


def test_pending_limit_is_explained_in_the_job_console() -> None:
    stack = virtual_stack(boot_delay=10_000)
    profile = stack.cluster_profile(pending_pods_count="1")
    jobs = [
        stack.gocd.schedule_job("p", "s", f"j{n}", stack.elastic_profile(), profile, None, 10)
        for n in range(3)
    ]
    stack.run_until(
        lambda: "pending_pods_count" in stack.gocd.job(jobs[2].job_id).console_text, 600, "a waiting line"
    )
    assert len(stack.pods()) == 1


def test_should_assign_work_is_true_only_for_the_pods_own_job() -> None:
    stack = virtual_stack(boot_delay=10_000)
    create(stack, 7)
    create(stack, 8)
    pods = {pod["metadata"]["labels"][labels.LABEL_JOB_ID]: pod["metadata"]["name"] for pod in stack.pods()}
    assert assign(stack, pods["7"], 8) == "false"
    assert assign(stack, pods["7"], 7) == "true"
    assert assign(stack, pods["7"], 7) == "false", "a busy pod takes no second job"
    assert assign(stack, "not-a-pod-of-ours", 7) == "false"


def test_job_completion_removes_the_pod_and_the_agent_in_order() -> None:
    stack = virtual_stack(boot_delay=1)
    job = stack.gocd.schedule_job("p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 20)
    stack.run_until(lambda: stack.gocd.job(job.job_id).completed_at, 900, "the job to complete")
    stack.run_until(lambda: not stack.pods(), 600, "the pod to be deleted")
    stack.run_until(lambda: not stack.gocd.agents(), 600, "the agent to be deleted")
    assert not stack.gocd.stats.deleted_while_building
    assert stack.gocd.stats.delete_refused_enabled == 0, "agents are disabled before they are deleted"


def test_job_completion_for_an_unknown_agent_is_answered_200() -> None:
    stack = virtual_stack()
    body = job_completion_body("nobody", stack.elastic_profile(), stack.cluster_profile(), job_identifier(1))
    assert stack.send(COMPLETE, encode(body)) == (200, "")


def test_ping_removes_pods_whose_agent_never_registered() -> None:
    stack = virtual_stack(boot_delay=10_000)
    create(stack, 1)
    assert len(stack.pods()) == 1
    ping(stack)
    assert len(stack.pods()) == 1, "still within auto_register_timeout"
    stack.clock.advance(11 * 60)  # GoCD not running meanwhile
    ping(stack)
    stack.run_until(lambda: not stack.pods(), 300, "the never-registered pod to go")


def test_ping_removes_evicted_pods_and_their_agents() -> None:
    stack = virtual_stack(boot_delay=1)
    job = stack.gocd.schedule_job(
        "p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 10_000
    )
    stack.run_until(lambda: stack.gocd.job(job.job_id).agent_id, 900, "the job to be assigned")
    name = stack.gocd.job(job.job_id).agent_id
    assert name is not None
    stack.kubelet.evict(name)
    stack.run_until(lambda: not stack.pods(), 600, "the evicted pod to be deleted at a ping")


def test_ping_removes_agents_whose_pod_is_gone() -> None:
    stack = virtual_stack(boot_delay=1)
    job = stack.gocd.schedule_job("p", "s", "j", stack.elastic_profile(), stack.cluster_profile(), None, 30)
    stack.run_until(lambda: stack.gocd.job(job.job_id).completed_at, 900, "the job to complete")
    # An agent GoCD still knows but whose pod someone deleted by hand.
    stack.run_until(lambda: not stack.gocd.agents(), 600, "the first agent to go")
    stack.gocd.schedule_job("p", "s", "k", stack.elastic_profile(), stack.cluster_profile(), None, 10_000)
    stack.run_until(lambda: stack.gocd.agents(), 900, "an agent to register")
    agent = stack.gocd.agents()[0].agent_id
    stack.store.delete_pod(stack.namespace, agent)
    stack.run_until(lambda: stack.gocd.agent(agent) is None, 600, "the agent without a pod to be deleted")


def test_pods_of_another_gocd_server_are_never_touched() -> None:
    stack = virtual_stack(boot_delay=10_000)
    create(stack, 1)
    ours = stack.pods()[0]
    foreign = json.loads(json.dumps(ours))
    foreign["metadata"] = {
        "name": "foreign-pod",
        "labels": {**ours["metadata"]["labels"], labels.LABEL_SERVER_ID: "another-server"},
        "annotations": ours["metadata"]["annotations"],
    }
    foreign.pop("status", None)
    stack.store.create_pod(stack.namespace, foreign)
    stack.clock.advance(30 * 60)  # GoCD not running meanwhile
    ping(stack)
    ping(stack)
    assert pod_names(stack) == ["foreign-pod"]
    assert assign(stack, "foreign-pod", 1) == "false"
