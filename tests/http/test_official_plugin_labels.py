"""This plugin's pods carry no label the official Kubernetes plugin selects on, whatever their template
says, and this plugin's identity never matches a pod of the official plugin: the two can share a
namespace (tests/real/test_beside_official_plugin_real.py runs them side by side on a real API server)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from elastic_agent.pool import labels
from elastic_agent.pool.pods import PodIdentity, cluster_label
from elastic_agent.simulation.stack import Stack
from tests.support import official_plugin
from tests.support.live_stack import wait_until
from tests.support.official_pods import COPIED_TEMPLATE, IMAGE, our_pod
from tests.support.reuse_helpers import completed, run_to_idle
from tests.support.stack_helpers import pod, reuse_profile, schedule

OFFICIAL_KEYS = {
    official_plugin.CREATED_BY_LABEL, official_plugin.JOB_ID_LABEL, official_plugin.ENVIRONMENT_LABEL
}  # fmt: skip


def adopted_by_the_official_plugin(pod_labels: dict[str, str]) -> bool:
    return pod_labels.get(official_plugin.KIND_LABEL) == official_plugin.KIND_VALUE


@pytest.mark.parametrize(
    "elastic",
    [
        {"Image": IMAGE},
        {"Image": IMAGE, "Reuse": "true"},
        {"PodSpecType": "yaml", "PodConfiguration": COPIED_TEMPLATE, "Reuse": "true"},
    ],
)
def test_no_pod_of_ours_carries_a_label_the_official_plugin_selects_on(elastic: dict[str, str]) -> None:
    pod_labels = our_pod(elastic)["metadata"]["labels"]
    assert not adopted_by_the_official_plugin(pod_labels)
    assert not OFFICIAL_KEYS & set(pod_labels)


def test_a_template_keeps_its_own_labels_even_one_named_kind() -> None:
    template = COPIED_TEMPLATE.replace("kind: kubernetes-elastic-agent", "kind: frontend-builds")
    pod_labels = our_pod({"PodSpecType": "yaml", "PodConfiguration": template})["metadata"]["labels"]
    assert pod_labels["app"] == "builds"
    assert pod_labels[official_plugin.KIND_LABEL] == "frontend-builds"


def test_our_identity_never_matches_a_pod_of_the_official_plugin() -> None:
    theirs = {official_plugin.CREATED_BY_LABEL: official_plugin.PLUGIN_ID, official_plugin.JOB_ID_LABEL: "41",
              official_plugin.KIND_LABEL: official_plugin.KIND_VALUE}  # fmt: skip
    identity = PodIdentity(server_id="server-1", cluster=cluster_label("https://kube.test|builds"))
    assert not identity.owns(theirs)
    assert not set(identity.selector()) & set(theirs), "no label selected on is one of theirs"
    ours = our_pod({"Image": IMAGE})["metadata"]["labels"]
    assert PodIdentity(server_id="server-1", cluster=ours[labels.LABEL_CLUSTER]).owns(ours)


def test_a_pod_of_an_earlier_version_loses_the_official_labels_and_is_reused(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack()
    profile = reuse_profile(stack)
    name = run_to_idle(stack, schedule(stack, profile))
    stack.stop_backend()
    earlier = {official_plugin.KIND_LABEL: official_plugin.KIND_VALUE, official_plugin.JOB_ID_LABEL: "41",
               "app": "builds"}  # fmt: skip
    stack.kube.store.patch_pod(stack.options.namespace, name, {"metadata": {"labels": earlier}},
                               "application/merge-patch+json")  # fmt: skip
    stack.start_backend()  # the new version, with the pod of the earlier one

    def pod_labels() -> dict[str, str]:
        found = pod(stack, name)
        assert found is not None
        return dict(found["metadata"]["labels"])

    wait_until(lambda: not adopted_by_the_official_plugin(pod_labels()), 10, "the kind label to go")
    assert not OFFICIAL_KEYS & set(pod_labels())
    assert pod_labels()["app"] == "builds", "a label of the user's own stays"
    again = completed(stack, schedule(stack, profile, name="again"))
    assert again.agent_id == name, "the pod is reused as before"
