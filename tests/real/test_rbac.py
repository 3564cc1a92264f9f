"""Least privilege, proved on a real kube-apiserver: docker/kubernetes/rbac/role.yaml is exactly what
the backend needs. The end-to-end tests run with it (tests/real/test_real_cluster_e2e.py); here each
permission of it is taken away in turn, and the test shows what breaks, that the backend says so
clearly (the job's console, GoCD's health messages, the status page), that it does not crash, and that
with the permission given back everything recovers and no pod is left behind."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from elastic_agent.simulation.stack import Stack
from tests.support.live_stack import wait_until
from tests.support.real_cluster import SERVICE_ACCOUNT, RealCluster, make_real_stack, project_role
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.reuse_helpers import assigned, completed, run_to_idle
from tests.support.stack_helpers import reuse_profile, schedule

__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name


def without(resource: str, verb: str | None = None) -> dict[str, Any]:
    """The project's Role without one verb on `resource`, or (verb None) without its rule."""
    role = copy.deepcopy(project_role())
    rules = []
    for rule in role["rules"]:
        if resource in rule["resources"]:
            if verb is None:
                continue
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        rules.append(rule)
    role["rules"] = rules
    return role


def give_back(stack: Stack) -> None:
    cluster = stack.cluster
    assert isinstance(cluster, RealCluster)
    cluster.plane.apply_role(cluster.namespace, project_role(), SERVICE_ACCOUNT)


def health(stack: Stack) -> list[str]:
    return [message.message for message in stack.gocd.health_messages]


def says(stack: Stack, *fragments: str) -> Callable[[], bool]:
    return lambda: any(all(f in message for f in fragments) for message in health(stack))


def healthy_backend(stack: Stack) -> None:
    assert stack.transport.send(REQUEST_PREFIX + "get-capabilities", "")[0] == 200
    assert all(failure.status in (502, 503) for failure in stack.gocd.stats.non_200_answers), [
        (failure.request_name, failure.status) for failure in stack.gocd.stats.non_200_answers
    ]


def nothing_left(stack: Stack) -> bool:
    return not stack.pods() and not stack.gocd.agents()


def agent_page(stack: Stack, agent_id: str) -> str:
    body = {"cluster_profile_properties": stack.cluster_profile(), "elastic_agent_id": agent_id}
    status, text = stack.transport.send(REQUEST_PREFIX + "agent-status-report", encode(body))
    assert status == 200, text
    view: str = json.loads(text)["view"]
    return view


def test_without_pods_create_no_pod_is_made_and_gocd_and_the_console_say_why(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack(role=without("pods", "create"))
    job = schedule(stack, stack.elastic_profile())
    wait_until(says(stack, "Creating agent pods fails", "403"), 30, "a health message about creating pods")
    assert "could not create an agent pod" in stack.gocd.job(job.job_id).console_text
    assert stack.pods() == []
    healthy_backend(stack)
    give_back(stack)
    completed(stack, job, timeout_s=60)  # at GoCD's next re-send of create-agent
    wait_until(lambda: nothing_left(stack) and not health(stack), 30, "the pod gone and the message cleared")


@pytest.mark.parametrize("verb", ["list", "watch"])
def test_without_listing_or_watching_pods_gocd_says_the_cluster_refuses_the_credentials(
    make_real_stack: Callable[..., Stack], verb: str
) -> None:
    stack = make_real_stack(role=without("pods", verb))
    job = schedule(stack, stack.elastic_profile())
    wait_until(says(stack, "refuses this plugin's credentials", "403"), 60, f"a health message about {verb}")
    healthy_backend(stack)
    give_back(stack)
    completed(stack, job, timeout_s=90)
    wait_until(
        lambda: nothing_left(stack) and not health(stack), 60, "everything gone and the message cleared"
    )


def test_without_pods_patch_jobs_still_run_from_memory_and_gocd_says_the_state_is_not_written(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack(role=without("pods", "patch"))
    profile = reuse_profile(stack)
    first = completed(stack, schedule(stack, profile), timeout_s=60)
    second = completed(stack, schedule(stack, profile), timeout_s=60)
    assert second.agent_id == first.agent_id, "reuse decided from memory"
    wait_until(
        says(stack, "Writing the state of agent pods fails", "403"), 30, "a health message about patch"
    )
    healthy_backend(stack)
    give_back(stack)
    wait_until(lambda: not health(stack), 30, "the message cleared once the state is written")
    pod = stack.pods()[0]["metadata"]["annotations"]
    assert pod["reuse.gocd.org/jobs-run"] == "2", "the state kept in memory reached the pod"


def test_without_pods_delete_the_pod_stays_retiring_gocd_says_so_and_it_goes_once_allowed(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack(role=without("pods", "delete"))
    job = completed(stack, schedule(stack, stack.elastic_profile()), timeout_s=60)
    wait_until(says(stack, "Deleting agent pods fails", "403"), 30, "a health message about delete")
    assert [p["metadata"]["name"] for p in stack.pods()] == [job.agent_id], "it is still there"
    assert stack.pods()[0]["metadata"]["annotations"]["reuse.gocd.org/state"] == "retiring"
    healthy_backend(stack)
    give_back(stack)
    wait_until(lambda: nothing_left(stack) and not health(stack), 30, "the pod deleted at a ping")


@pytest.mark.parametrize(
    ("resource", "shown"),
    [("pods/log", "The log of container"), ("events", "Events could not be read")],
)
def test_without_logs_or_events_the_agent_page_says_what_it_cannot_show(
    make_real_stack: Callable[..., Stack], resource: str, shown: str
) -> None:
    stack = make_real_stack(role=without(resource))
    pod = assigned(stack, schedule(stack, reuse_profile(stack), duration=3600), timeout_s=60).agent_id
    assert pod is not None
    page = agent_page(stack, pod)
    assert shown in page and "answered 403" in page, page[-2000:]
    other = "Events could not be read" if resource == "pods/log" else "The log of container"
    if resource == "pods/log":
        assert other not in page, "the events are still shown"
    healthy_backend(stack)
    give_back(stack)
    assert "answered 403" not in agent_page(stack, pod)  # (a label hash may hold the digits)


def test_with_the_whole_role_a_pod_reused_and_retired_leaves_nothing(
    make_real_stack: Callable[..., Stack],
) -> None:
    stack = make_real_stack()
    cluster = stack.cluster_profile(idle_timeout="1m")
    pod = run_to_idle(stack, schedule(stack, reuse_profile(stack), cluster=cluster))
    assert "answered 403" not in agent_page(stack, pod)
    wait_until(lambda: nothing_left(stack), 30, "the idle pod retired")
    assert not health(stack)
