"""What `merge-helm-values` (elastic_agent/service/helm_values.py) produces, and what its notes tell an
administrator to change, as a real kube-apiserver takes them: the GoCD server pod the chart renders from
the merged values (tests/support/gocd_chart.py) is accepted, and the account the values name gets what
the backend needs once the bindings the note names are edited as it says."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from elastic_agent.service.helm_values import merge
from tests.support.control_plane import Binaries, ControlPlane
from tests.support.gocd_chart import server_pod
from tests.support.install_guide import values
from tests.support.manifests import dry_run, kustomize, namespace
from tests.support.paths import ROOT
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

ACCOUNT = "ci-gocd-server"  # a serviceAccount.name of the administrator's own


def test_without_persistence_the_merged_values_give_a_pod_the_api_server_accepts_with_the_jar_in_godata(
    real_kube: ControlPlane,
) -> None:
    """The chart declares `goserver-vol` only with persistence; the plugin's init container mounted it."""
    namespace(real_kube, "gocd-no-persistence", "baseline")
    result = merge({"server": {"persistence": {"enabled": False}}}, values())
    pod = server_pod(result.values)
    pod["metadata"]["namespace"] = "gocd-no-persistence"
    status, answer = dry_run(real_kube, pod)
    assert status == 201, answer
    [init] = answer["spec"]["initContainers"]
    [server] = [c for c in answer["spec"]["containers"] if c["name"] == "gocd-server"]

    def godata(container: dict[str, Any]) -> tuple[str, str]:
        [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == "/godata"]
        return mount["name"], mount.get("subPath", "")

    assert godata(init) == godata(server), "the jar lands in the server's /godata"
    assert "/godata/plugins/external" in " ".join(init["command"])
    assert any("persistence.enabled is false" in note for note in result.notes), "said in a sentence"


@pytest.fixture
def new_cluster(real_kube_binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of its own: the bindings below have the names the guide's tests apply too."""
    with ControlPlane.start(real_kube_binaries, tmp_path / "kube") as plane:
        yield plane


def follow(note: str, account: str, folder: Path) -> list[str]:
    """Edit, in a copy of docker/kubernetes, every file the note names as it says: their subject's name."""
    named = re.findall(r"docker/kubernetes/([\w/-]+\.yaml)", note)
    for relative in named:
        path = folder / relative
        binding = yaml.safe_load(path.read_text())
        for subject in binding["subjects"]:
            subject["name"] = account
        path.write_text(yaml.safe_dump(binding))
    return named


def test_with_a_service_account_name_of_yours_the_bindings_the_merge_names_let_it_list_nodes_and_pods(
    new_cluster: ControlPlane, real_kube_binaries: Binaries, tmp_path: Path
) -> None:
    """The nodes ClusterRoleBinding (docker/kubernetes/rbac-nodes) names the chart's default account as the
    RoleBinding does: both must follow serviceAccount.name. Asked with the account's own token."""
    result = merge({"serviceAccount": {"name": ACCOUNT}}, values())
    assert server_pod(result.values)["spec"]["serviceAccountName"] == ACCOUNT
    [note] = result.notes
    folder = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "docker" / "kubernetes", folder)
    follow(note, ACCOUNT, folder)
    new_cluster.create_namespace("gocd")
    new_cluster.create_namespace("gocd-agents")
    rbac = client.RbacAuthorizationV1Api(new_cluster.admin_api_client())
    rendered = [kustomize(real_kube_binaries, folder / part) for part in ("rbac", "rbac-nodes")]
    for obj in rendered[0] + rendered[1]:
        if obj["kind"] == "ClusterRole":
            rbac.create_cluster_role(obj)
        elif obj["kind"] == "ClusterRoleBinding":
            rbac.create_cluster_role_binding(obj)
        elif obj["kind"] == "Role":
            rbac.create_namespaced_role(obj["metadata"]["namespace"], obj)
        else:
            rbac.create_namespaced_role_binding(obj["metadata"]["namespace"], obj)
    token = new_cluster.service_account_token("gocd", ACCOUNT)
    asks = {"list nodes": "/api/v1/nodes", "list pods in gocd-agents": "/api/v1/namespaces/gocd-agents/pods"}
    answers: dict[str, int] = {}
    deadline = time.monotonic() + 10.0  # RBAC reads bindings from a watch cache (a bound, not a timing)
    while True:
        answers = {ask: new_cluster.request("GET", path, token=token)[0] for ask, path in asks.items()}
        if set(answers.values()) == {200} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert answers == dict.fromkeys(asks, 200)
