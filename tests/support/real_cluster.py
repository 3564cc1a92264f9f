"""The real kube-apiserver (tests/support/control_plane.py) as the cluster of a `Stack`: a namespace of its
own, a ServiceAccount bound to exactly the project's Role (docker/kubernetes/rbac/role.yaml), whose bound
token the backend uses as `security_token`, with the control plane's CA as `kubernetes_cluster_ca_cert`; and
the simulated kubelet driving pods through the API (ApiServerNode), with the admin's credentials."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.kubelet import FaultPolicy, PodHost
from elastic_agent.simulation.stack import Stack, StackOptions
from tests.support.control_plane import ControlPlane
from tests.support.doubles.apiserver_node import ApiServerNode
from tests.support.paths import ROOT

ROLE_FILE = ROOT / "docker" / "kubernetes" / "rbac" / "role.yaml"
SERVICE_ACCOUNT = "gocd-elastic-agent"
# Simulated seconds per real second on the real server: its calls take real milliseconds.
SPEED = 30.0
_namespaces = itertools.count(1)


def project_role() -> dict[str, Any]:
    role: dict[str, Any] = yaml.safe_load(ROLE_FILE.read_text())
    return role


class RealCluster:
    def __init__(
        self,
        plane: ControlPlane,
        role: Mapping[str, Any] | None = None,
        token_duration_s: int = 3600,
        namespace: str | None = None,
    ) -> None:
        self.plane = plane
        self.namespace = namespace or f"e2e-{next(_namespaces)}"
        plane.create_namespace(self.namespace)
        self.role = dict(role) if role is not None else project_role()
        plane.apply_role(self.namespace, self.role, SERVICE_ACCOUNT)
        self.token = plane.service_account_token(self.namespace, SERVICE_ACCOUNT, token_duration_s)
        self.url = plane.url
        self.node = ApiServerNode(plane.admin_api_client(), self.namespace)
        self.pod_host: PodHost = self.node

    def profile_properties(self) -> dict[str, str]:
        return {
            "kubernetes_cluster_url": self.url,
            "security_token": self.token,
            "kubernetes_cluster_ca_cert": self.plane.ca_pem,
        }

    def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        pods, _ = self.node.list_pods(namespace)
        return pods

    def stop(self) -> None:
        self.node.stop()


@pytest.fixture
def make_real_stack(real_kube: ControlPlane) -> Iterator[Callable[..., Stack]]:
    """Stacks on the real API server, each in a namespace of its own, stopped after the test."""
    stacks: list[Stack] = []

    def make(boot_delay: float = 10.0, start_gocd: bool = True, role: Mapping[str, Any] | None = None,
             cluster: RealCluster | None = None, faults: FaultPolicy | None = None,
             **gocd: Any) -> Stack:  # fmt: skip
        cluster = cluster or RealCluster(real_kube, role)
        options = StackOptions(boot_delay=boot_delay, gocd=GoCDConfig(**gocd), namespace=cluster.namespace,
                               start_gocd=start_gocd, faults=faults)  # fmt: skip
        stack = Stack(ScaledClock(SPEED), options, cluster)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()
