"""The real control plane (tests/support/control_plane.py) works: the admin reaches it, a ServiceAccount token
from TokenRequest is refused until a Role is bound to it, and etcd keeps the data across an apiserver
restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from tests.support import real_kube_fixtures
from tests.support.control_plane import Binaries, ControlPlane
from tests.support.kube_fixtures import wait_for

real_kube = real_kube_fixtures.real_kube  # fixture
real_kube_binaries = real_kube_fixtures.real_kube_binaries  # fixture

POD_READER = {
    "metadata": {"name": "pod-reader"},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
}


def fresh_namespace(plane: ControlPlane) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    plane.create_namespace(name)
    return name


def test_the_admin_lists_namespaces_and_the_version_is_the_pinned_one(real_kube: ControlPlane) -> None:
    core = client.CoreV1Api(real_kube.admin_api_client())
    namespace = fresh_namespace(real_kube)
    real_kube.create_namespace(namespace)  # again: already there is fine
    assert wait_for(lambda: {"default", "kube-system", namespace}
                    <= {item.metadata.name for item in core.list_namespace().items})  # fmt: skip
    status, version = real_kube.request("GET", "/version")
    assert status == 200
    assert version["gitVersion"] == real_kube.binaries.kubernetes_version


def test_the_kubeconfig_is_the_admins_and_carries_the_ca(real_kube: ControlPlane) -> None:
    kubeconfig = yaml.safe_load(real_kube.kubeconfig_path.read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == real_kube.url
    assert real_kube.ca_pem.startswith("-----BEGIN CERTIFICATE-----")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(real_kube.kubeconfig_path), client_configuration=configuration)
    auth = client.AuthenticationV1Api(client.ApiClient(configuration))
    review = auth.create_self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                              "kind": "SelfSubjectReview"})  # fmt: skip
    assert review.status.user_info.username == "admin"
    assert "system:masters" in review.status.user_info.groups


def test_a_service_account_token_is_refused_until_a_role_is_bound(real_kube: ControlPlane) -> None:
    namespace = fresh_namespace(real_kube)
    other = fresh_namespace(real_kube)
    token = real_kube.service_account_token(namespace, "plugin", duration_s=600)
    pods = f"/api/v1/namespaces/{namespace}/pods"

    status, answer = real_kube.request("GET", pods, token=token)
    assert status == 403, answer  # authenticated (not 401), not authorized
    assert f"system:serviceaccount:{namespace}:plugin" in answer["message"]
    assert real_kube.request("GET", pods, token="not-a-token")[0] == 401

    real_kube.apply_role(namespace, POD_READER, "plugin")
    real_kube.apply_role(namespace, POD_READER, "plugin")  # again: replaced, not a conflict
    status, answer = real_kube.request("GET", pods, token=token)
    assert status == 200, answer
    assert answer["kind"] == "PodList"
    assert real_kube.request("GET", f"/api/v1/namespaces/{other}/pods", token=token)[0] == 403
    assert real_kube.request("POST", pods, token=token, body={"metadata": {"name": "p"}})[0] == 403


def test_pods_are_stored_but_nothing_runs_them(real_kube: ControlPlane) -> None:
    """No scheduler, no kubelet, no ServiceAccount admission: a pod is accepted and stays Pending."""
    namespace = fresh_namespace(real_kube)
    core = client.CoreV1Api(real_kube.admin_api_client())
    pod = {"metadata": {"name": "agent"},
           "spec": {"containers": [{"name": "agent", "image": "gocd/gocd-agent:v25.1.0"}]}}  # fmt: skip
    created = core.create_namespaced_pod(namespace, pod)
    assert created.spec.node_name is None
    assert core.read_namespaced_pod("agent", namespace).status.phase == "Pending"


def test_etcd_keeps_the_data_across_apiserver_restarts(real_kube_binaries: Binaries, tmp_path: Path) -> None:
    with ControlPlane.start(real_kube_binaries, tmp_path) as plane:
        plane.create_namespace("kept")
        token = plane.service_account_token("kept", "plugin")
        plane.apply_role("kept", POD_READER, "plugin")
        core = client.CoreV1Api(plane.admin_api_client())
        core.create_namespaced_config_map("kept", {"metadata": {"name": "state"}, "data": {"k": "v"}})

        plane.kill_apiserver()
        with pytest.raises(OSError):  # nothing listens
            plane.request("GET", "/readyz")
        plane.restart_apiserver()
        assert core.read_namespaced_config_map("state", "kept").data == {"k": "v"}
        assert plane.request("GET", "/api/v1/namespaces/kept/pods", token=token)[0] == 200  # same keys

        plane.restart_apiserver()  # a graceful one (SIGTERM) too
        assert core.read_namespaced_config_map("state", "kept").data == {"k": "v"}
    assert (tmp_path / "etcd.log").exists()
    assert "starting kube-apiserver" in (tmp_path / "kube-apiserver.log").read_text()
