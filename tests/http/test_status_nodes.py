"""The cluster status report's nodes, as the backend's credentials allow them: with the project's Role
alone the API refuses to list nodes (403) and the report says in one line what to apply; with the
optional ClusterRole (docker/kubernetes/rbac-nodes) it lists them; a timeout or an outage is one line
too. Never an error page: the pods, read from memory, are shown whatever happens to the nodes; and the
agent report during an outage shows the pod as last watched, without waiting for reads that cannot be
answered.

On the fake API server, whose service accounts are authorized as RBAC authorizes them (the contract
tests hold it to the real server: tests/contracts/test_kube_contract_reports.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from elastic_agent.clock import SystemClock
from elastic_agent.kube.nodes import node_view, quantity_value, readable_bytes, readable_cpu
from elastic_agent.simulation.stack import Stack, StackOptions
from elastic_agent.status.nodes import NODES_RBAC
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import wait_until
from tests.support.paths import ROOT
from tests.support.reuse_helpers import assigned
from tests.support.stack_helpers import schedule
from tests.support.status_scene import parse, text_of

ROLE = yaml.safe_load((ROOT / "docker" / "kubernetes" / "rbac" / "role.yaml").read_text())
CLUSTER_ROLE = yaml.safe_load((ROOT / NODES_RBAC / "clusterrole.yaml").read_text())
NAMESPACE = "gocd-agents"
TOKEN = "backend-service-account-token"


@pytest.fixture
def stack() -> Iterator[Stack]:
    """A stack whose backend connects as ServiceAccount gocd, bound to the project's Role only, with a
    pod running a job."""
    stack = Stack(SystemClock(), StackOptions(boot_delay=0.2, namespace=NAMESPACE))
    api = stack.kube.api
    api.add_service_account(TOKEN, "gocd", "gocd")
    api.grant(TOKEN, NAMESPACE, ROLE["rules"])
    try:
        assigned(stack, schedule(stack, stack.elastic_profile(), cluster=cluster(stack), duration=3600))
        yield stack
    finally:
        stack.stop()


def cluster(stack: Stack) -> dict[str, str]:
    return stack.cluster_profile(security_token=TOKEN, cluster_request_timeout="2s")


def page(stack: Stack) -> str:
    body = json.dumps({"cluster_profile_properties": cluster(stack)})
    status, answer = stack.transport.send("cd.go.elastic-agent.cluster-status-report", body)
    assert status == 200, answer
    view: str = json.loads(answer)["view"]
    assert len(parse(view).rows) == 1, "the pods are shown whatever happens to the nodes"
    return view


def note(view: str) -> str:
    notes = [line for line in text_of(view).split("Nodes ", 1)[1:] if line]
    assert notes, "the page has its nodes section"
    return notes[0].split(" Kubernetes elastic agents with pod reuse")[0]


def test_with_the_role_alone_the_report_says_in_one_line_what_to_apply_to_see_nodes(stack: Stack) -> None:
    view = page(stack)
    assert parse(view).marked["data-node"] == {}
    assert note(view) == (
        "Nodes are not shown: this plugin's service account may not list them (the API answered 403). "
        f"To see them, apply the optional ClusterRole: kubectl apply -k {NODES_RBAC} "
        "(docs/install.md, step 2)."
    )


def test_with_the_shipped_cluster_role_the_nodes_are_listed(stack: Stack) -> None:
    assert CLUSTER_ROLE["kind"] == "ClusterRole"
    stack.kube.api.grant(TOKEN, None, CLUSTER_ROLE["rules"])
    view = page(stack)
    nodes: dict[str, Any] = parse(view).marked["data-node"]
    assert set(nodes) == set(stack.kube.store.nodes)
    assert "Nodes are not shown" not in view
    pod = stack.pods()[0]
    assert f"{pod['spec']['nodeName']} 10.0.1.{int(pod['spec']['nodeName'][-1])} True 4 / 4" in text_of(view)


def test_a_node_list_that_times_out_is_one_line(stack: Stack) -> None:
    stack.kube.api.grant(TOKEN, None, CLUSTER_ROLE["rules"])
    faults_of(stack.kube).add("GET", r"^/api/v1/nodes$", status=None, delay=4.0, times=1)
    shown = note(page(stack))
    cannot = f"Nodes are not shown: cannot reach the Kubernetes API at {stack.kube.url} (nodes):"
    assert shown.startswith(cannot)
    assert shown.endswith("ReadTimeoutError.") and "\n" not in shown


def test_during_an_outage_the_nodes_are_one_line_and_not_asked_for(stack: Stack) -> None:
    stack.kube.api.grant(TOKEN, None, CLUSTER_ROLE["rules"])
    pool = stack.backend.pools()[0]
    stack.kube.set_unreachable(True)
    try:
        wait_until(lambda: pool.port.outage.problem() is not None, 30, "the outage to be noticed")
        asked = pool.port.api_calls.get("nodes", 0)  # type: ignore[attr-defined]  # KubeCluster's count
        shown = note(page(stack))
        outage = f"Nodes are not shown: the Kubernetes API at {stack.kube.url} has not answered"
        assert shown.startswith(outage)
        assert pool.port.api_calls.get("nodes", 0) == asked  # type: ignore[attr-defined]
    finally:
        stack.kube.set_unreachable(False)


def test_during_an_outage_the_agent_report_shows_the_pod_as_watched_without_asking(stack: Stack) -> None:
    pool = stack.backend.pools()[0]
    name = stack.pods()[0]["metadata"]["name"]
    stack.kube.set_unreachable(True)
    try:
        wait_until(lambda: pool.port.outage.problem() is not None, 30, "the outage to be noticed")
        calls = dict(pool.port.api_calls)  # type: ignore[attr-defined]  # KubeCluster's count
        body = json.dumps({"cluster_profile_properties": cluster(stack), "elastic_agent_id": name})
        status, answer = stack.transport.send("cd.go.elastic-agent.agent-status-report", body)
        assert status == 200, answer
        text = text_of(json.loads(answer)["view"])
        assert f"Pod {name} busy" in text and "Jobs run 0 (its 1st job is running)" in text
        shown_as = "Shown as last watched, without events or logs: the Kubernetes API at"
        assert f"{shown_as} {stack.kube.url}" in text
        now = dict(pool.port.api_calls)  # type: ignore[attr-defined]
        asked = {verb: now[verb] - calls.get(verb, 0) for verb in now if now[verb] != calls.get(verb, 0)}
        assert set(asked) <= {"watch", "list"}, f"no read, no log, no events asked for: {asked}"
    finally:
        stack.kube.set_unreachable(False)


@pytest.mark.parametrize(
    ("text", "memory", "cpu"),
    [("16374584Ki", "15.62 GiB", "16767574016"), ("1500m", "2 B", "1.5"), ("2", "2 B", "2"),
     ("32Gi", "32 GiB", "34359738368"), ("4G", "3.73 GiB", "4000000000"), ("1e3", "1,000 B", "1000"),
     ("lots", "lots", "lots"), ("", "", "")],
)  # fmt: skip
def test_quantities_read_as_kubernetes_writes_them(text: str, memory: str, cpu: str) -> None:
    """k8s.io/apimachinery/pkg/api/resource: binary suffixes count in 1024s, decimal ones in 1000s,
    `m` is a thousandth; what is not a quantity is shown as given."""
    assert (readable_bytes(text), readable_cpu(text)) == (memory, cpu)
    assert quantity_value("1.5Gi") == 1.5 * 1024**3 and quantity_value("2e3k") is None


def test_a_node_is_read_whole_and_a_field_missing_or_mistyped_reads_as_blank() -> None:
    view = node_view({
        "metadata": {"name": "n1"}, "spec": {"unschedulable": True},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "allocatable": {"cpu": "7500m"},
                   "addresses": [{"type": "Hostname", "address": "n1.local"}],
                   "conditions": [{"type": "MemoryPressure", "status": "False"},
                                  {"type": "Ready", "status": "False"}],
                   "nodeInfo": {"osImage": "Ubuntu 24.04", "operatingSystem": "linux",
                                "architecture": "arm64", "kernelVersion": 6, "kubeletVersion": "v1.36.3"}},
    })  # fmt: skip
    assert (view.name, view.address, view.ready, view.schedulable) == ("n1", "n1.local", "False", False)
    assert (view.total.cpu, view.total.memory, view.total.pods) == ("8", "32 GiB", "110")
    assert (view.allocatable.cpu, view.allocatable.memory, view.allocatable.pods) == ("7.5", "", "")
    assert (view.operating_system, view.architecture, view.kernel_version) == ("linux", "arm64", "")
    blank = node_view({"status": "not a mapping"})
    assert (blank.name, blank.ready, blank.schedulable, blank.total.cpu) == ("", "Unknown", True, "")
