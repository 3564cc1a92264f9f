"""Rotating credentials on a real kube-apiserver, without restarting the backend.

- In a pod, the backend reads the service account's token from its projected file; bound tokens expire
  and kubelet writes a new one into the file. Here the token file is replaced by a token of another
  ServiceAccount and the old token stops working (its ServiceAccount is deleted: TokenRequest refuses
  lifetimes under ten minutes, so an expiry cannot be waited for in a test; a deleted ServiceAccount's
  tokens are refused from that moment, which is what an expired token meets).
- An admin edits the cluster profile's `security_token` in GoCD: the next request brings it.
In both, jobs go on running and reusing the pods made with the old token.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from elastic_agent.kube import connect
from elastic_agent.simulation.stack import Stack
from tests.support.control_plane import ControlPlane
from tests.support.live_stack import wait_until
from tests.support.real_cluster import SERVICE_ACCOUNT, RealCluster, make_real_stack, project_role
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.reuse_helpers import completed, run_to_idle
from tests.support.stack_helpers import reuse_profile, schedule

__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name


def refused_now(plane: ControlPlane, namespace: str, token: str) -> bool:
    status, _ = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods", token=token)
    return status == 401


def retire_service_account(plane: ControlPlane, namespace: str, name: str) -> None:
    client.CoreV1Api(plane.admin_api_client()).delete_namespaced_service_account(name, namespace)


def write_atomically(path: Path, text: str) -> None:
    """As kubelet does: the new file takes the old one's place in one step."""
    temporary = path.with_suffix(".new")
    temporary.write_text(text)
    os.replace(temporary, path)


class InCluster(RealCluster):
    """The real server as seen from a pod: no URL, token or CA in the cluster profile."""

    def profile_properties(self) -> dict[str, str]:
        return {}


def test_a_rotated_service_account_token_file_is_read_again_without_a_restart(
    real_kube: ControlPlane, make_real_stack: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    cluster = InCluster(real_kube)
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(cluster.token)
    (mounted / "ca.crt").write_text(real_kube.ca_pem)
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", mounted)
    host, port = real_kube.url.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    stack = make_real_stack(cluster=cluster)
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))

    # kubelet rotates the token; the old one stops working.
    real_kube.apply_role(cluster.namespace, project_role(), "rotated")
    write_atomically(mounted / "token", real_kube.service_account_token(cluster.namespace, "rotated"))
    retire_service_account(real_kube, cluster.namespace, SERVICE_ACCOUNT)
    wait_until(lambda: refused_now(real_kube, cluster.namespace, cluster.token), 10, "the old token refused")

    for n in range(3):
        again = completed(stack, schedule(stack, profile, name=f"after-{n}"), timeout_s=60)
        assert again.agent_id == first, "the pod made with the old token is reused"
    assert not [m.message for m in stack.gocd.health_messages]


def test_a_security_token_edited_in_the_cluster_profile_is_used_from_the_next_request(
    real_kube: ControlPlane, make_real_stack: Callable[..., Stack]
) -> None:
    stack = make_real_stack()
    cluster = stack.cluster
    assert isinstance(cluster, RealCluster)
    profile = reuse_profile(stack)
    first = run_to_idle(stack, schedule(stack, profile))

    real_kube.apply_role(cluster.namespace, project_role(), "edited")
    old = stack.cluster_profile()
    new = {**old, "security_token": real_kube.service_account_token(cluster.namespace, "edited")}
    stack.gocd.edit_cluster_profile(old, new)
    retire_service_account(real_kube, cluster.namespace, SERVICE_ACCOUNT)
    wait_until(lambda: refused_now(real_kube, cluster.namespace, cluster.token), 10, "the old token refused")

    for n in range(3):
        again = completed(stack, schedule(stack, profile, cluster=new, name=f"after-{n}"), timeout_s=60)
        assert again.agent_id == first, "the credentials are not part of what makes pods interchangeable"
    assert not [m.message for m in stack.gocd.health_messages]
