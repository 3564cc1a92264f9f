"""The fake API server's PodDisruptionBudgets and pods/eviction, driven through the official client over
HTTP: kube-apiserver's eviction rules (fake_kube_disruption.py names them) and the status the disruption
controller writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from elastic_agent.simulation.fake_kube import FakeKubeServer
from tests.support import kube_fixtures
from tests.support.kube_fixtures import NS, pod_manifest

fake_kube = kube_fixtures.fake_kube  # fixtures
core_api = kube_fixtures.core_api

BUSY = {"reuse.gocd.org/busy": "true"}
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def policy_api(core_api: client.CoreV1Api) -> client.PolicyV1Api:
    return client.PolicyV1Api(core_api.api_client)


def running(fake_kube: FakeKubeServer, core_api: client.CoreV1Api, name: str, pod_labels: dict[str, str],
            grace: int = 30) -> None:  # fmt: skip
    """A pod bound to a node, Running and Ready, as the kubelet reports it."""
    manifest = pod_manifest(name, pod_labels)
    manifest["spec"]["terminationGracePeriodSeconds"] = grace
    core_api.create_namespaced_pod(NS, manifest)
    fake_kube.store.bind_pod(NS, name, "fake-node-1")
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    fake_kube.store.update_status(NS, name, None, ready)


def budget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def busy_budget(name: str = "gocd-reuse-busy-agents") -> dict[str, Any]:
    return budget(name, {"selector": {"matchLabels": BUSY}, "maxUnavailable": 0})


def evict(core_api: client.CoreV1Api, name: str, grace: int | None = None) -> None:
    options = client.V1DeleteOptions(grace_period_seconds=grace) if grace is not None else None
    meta = client.V1ObjectMeta(name=name, namespace=NS)
    eviction = client.V1Eviction(metadata=meta, delete_options=options)
    core_api.create_namespaced_pod_eviction(name, NS, eviction)


def refusal(core_api: client.CoreV1Api, name: str) -> tuple[int, dict[str, Any]]:
    with pytest.raises(client.ApiException) as refused:
        evict(core_api, name)
    return refused.value.status, json.loads(refused.value.body)


def test_a_pod_no_budget_selects_is_evicted_with_the_evictions_grace_period(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget())
    running(fake_kube, core_api, "idle-1", {"app": "agent"})
    evict(core_api, "idle-1", grace=7)
    gone = core_api.read_namespaced_pod("idle-1", NS)
    assert gone.metadata.deletion_timestamp is not None and gone.metadata.deletion_grace_period_seconds == 7


def test_a_running_pod_a_max_unavailable_0_budget_selects_is_refused_with_429_and_kept(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget())
    running(fake_kube, core_api, "busy-1", BUSY)
    status, body = refusal(core_api, "busy-1")
    assert (status, body["reason"], body["message"]) == (429, "TooManyRequests", TOO_MANY)
    [cause] = body["details"]["causes"]
    assert cause == {"reason": "DisruptionBudget",
                     "message": "The disruption budget gocd-reuse-busy-agents needs 0 healthy pods and has 1 "
                                "currently"}  # fmt: skip
    assert core_api.read_namespaced_pod("busy-1", NS).metadata.deletion_timestamp is None


def test_a_budget_reads_with_the_status_the_disruption_controller_writes(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget())
    running(fake_kube, core_api, "busy-1", BUSY)
    running(fake_kube, core_api, "idle-1", {})
    status = policy_api.read_namespaced_pod_disruption_budget("gocd-reuse-busy-agents", NS).status
    # Bare pods have no controller to give an expected scale: none expected, so no disruption allowed.
    assert (status.current_healthy, status.desired_healthy, status.expected_pods) == (1, 0, 0)
    assert (status.disruptions_allowed, status.observed_generation) == (0, 1)
    assert [b.metadata.name for b in policy_api.list_namespaced_pod_disruption_budget(NS).items] == [
        "gocd-reuse-busy-agents"
    ]


def test_a_budget_allowing_disruptions_lets_the_pod_it_selects_be_evicted(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    lenient = budget("lenient", {"selector": {"matchLabels": BUSY}, "minAvailable": 0})
    policy_api.create_namespaced_pod_disruption_budget(NS, lenient)
    running(fake_kube, core_api, "busy-1", BUSY)
    evict(core_api, "busy-1")
    assert core_api.read_namespaced_pod("busy-1", NS).metadata.deletion_timestamp is not None


def test_a_pending_pod_is_evicted_whatever_budget_selects_it(
    core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget())
    core_api.create_namespaced_pod(NS, pod_manifest("pending-1", BUSY))
    evict(core_api, "pending-1")
    assert "pending-1" not in [p.metadata.name for p in core_api.list_namespaced_pod(NS).items]


def test_a_pod_two_budgets_select_is_a_500_and_kept(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget("first"))
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget("second"))
    running(fake_kube, core_api, "busy-1", BUSY)
    status, body = refusal(core_api, "busy-1")
    assert status == 500 and "more than one PodDisruptionBudget" in body["message"]
    assert core_api.read_namespaced_pod("busy-1", NS).metadata.deletion_timestamp is None


def test_a_budget_with_an_empty_selector_selects_no_pod(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, budget("empty", {"selector": {},
                                                                      "maxUnavailable": 0}))
    running(fake_kube, core_api, "any-1", {"app": "agent"})
    evict(core_api, "any-1")
    assert core_api.read_namespaced_pod("any-1", NS).metadata.deletion_timestamp is not None


def test_a_deleted_budget_no_longer_refuses_evictions(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api, policy_api: client.PolicyV1Api
) -> None:
    policy_api.create_namespaced_pod_disruption_budget(NS, busy_budget())
    running(fake_kube, core_api, "busy-1", BUSY)
    assert refusal(core_api, "busy-1")[0] == 429
    policy_api.delete_namespaced_pod_disruption_budget("gocd-reuse-busy-agents", NS)
    evict(core_api, "busy-1")
    assert core_api.read_namespaced_pod("busy-1", NS).metadata.deletion_timestamp is not None


def test_an_eviction_naming_another_pod_than_its_url_is_a_400(
    fake_kube: FakeKubeServer, core_api: client.CoreV1Api
) -> None:
    running(fake_kube, core_api, "one", {})
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="other", namespace=NS))
    with pytest.raises(client.ApiException) as bad:
        core_api.create_namespaced_pod_eviction("one", NS, eviction)
    assert bad.value.status == 400
    assert json.loads(bad.value.body)["message"] == "name in URL does not match name in Eviction object"
