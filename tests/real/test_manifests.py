"""Every manifest of docker/ is accepted by a real kube-apiserver (server-side dry run), as `kubectl
apply -k` would send it (rendered by kustomize, built from pinned modules), and so is the GoCD server pod
that the official chart renders from docker/helm/values-gocd.yaml (tests/support/gocd_chart.py), under the Pod
Security levels that apply: the backend's containers meet "restricted"; the pod as a whole meets
"baseline" (the chart gives the GoCD server container no security context of its own)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_agent.pool.labels import LABEL_BUSY
from tests.support.control_plane import Binaries, ControlPlane
from tests.support.gocd_chart import (
    CHART_KEYS,
    CHART_VERSION,
    charts_script_runs,
    installs_official_plugin,
    leaf_keys,
    server_pod,
)
from tests.support.manifests import dry_run, kustomize, namespace
from tests.support.paths import ROOT
from tests.support.real_cluster import project_role
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

KUSTOMIZE_DIR = ROOT / "docker" / "kubernetes"
VALUES = ROOT / "docker" / "helm" / "values-gocd.yaml"


@pytest.fixture
def rendered(real_kube_binaries: Binaries, tmp_path: Path) -> list[dict[str, Any]]:
    """docker/kubernetes as an admin applies it: with the token file created as the comment says."""
    folder = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE_DIR, folder)
    (folder / "backend-token.txt").write_text("0123456789abcdef" * 4)
    return kustomize(real_kube_binaries, folder)


def test_the_kustomize_manifests_are_the_role_its_binding_the_busy_agents_budget_and_the_secret(
    rendered: list[dict[str, Any]],
) -> None:
    by_kind = {obj["kind"]: obj for obj in rendered}
    kinds = ["PodDisruptionBudget", "Role", "RoleBinding", "Secret"]
    assert sorted(by_kind) == kinds, "the ServiceAccount is the chart's"
    budget = by_kind["PodDisruptionBudget"]
    assert budget["metadata"] == {"name": "gocd-reuse-busy-agents", "namespace": "gocd-agents"}
    assert budget["spec"] == {"selector": {"matchLabels": {LABEL_BUSY: "true"}}, "maxUnavailable": 0}
    role = by_kind["Role"]
    assert role["rules"] == project_role()["rules"], "the very Role proved on the real server"
    assert role["metadata"]["namespace"] == "gocd-agents"
    binding = by_kind["RoleBinding"]
    assert binding["metadata"]["namespace"] == "gocd-agents"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gocd", "namespace": "gocd"}]
    secret = by_kind["Secret"]
    assert secret["metadata"]["name"] == "gocd-reuse-backend-token" and set(secret["data"]) == {"token"}


def test_the_service_account_for_servers_without_the_chart_is_the_one_the_binding_names() -> None:
    account = yaml.safe_load((KUSTOMIZE_DIR / "serviceaccount.yaml").read_text())
    binding = yaml.safe_load((KUSTOMIZE_DIR / "rbac" / "rolebinding.yaml").read_text())
    assert account["kind"] == "ServiceAccount"
    assert binding["subjects"] == [{"kind": "ServiceAccount", **account["metadata"]}]


def test_every_kustomize_manifest_is_accepted_by_the_real_api_server(
    real_kube: ControlPlane, rendered: list[dict[str, Any]]
) -> None:
    namespace(real_kube, "gocd")
    namespace(real_kube, "gocd-agents")
    account = yaml.safe_load((KUSTOMIZE_DIR / "serviceaccount.yaml").read_text())
    for obj in [*rendered, account]:
        status, answer = dry_run(real_kube, obj)
        assert status in (200, 201), (obj["kind"], answer)


def test_the_rbac_folder_alone_is_the_role_and_its_binding(real_kube_binaries: Binaries) -> None:
    kinds = sorted(obj["kind"] for obj in kustomize(real_kube_binaries, KUSTOMIZE_DIR / "rbac"))
    assert kinds == ["Role", "RoleBinding"]


def test_the_optional_nodes_folder_is_a_cluster_role_that_may_list_nodes_bound_to_the_roles_account(
    real_kube: ControlPlane, real_kube_binaries: Binaries
) -> None:
    """docker/kubernetes/rbac-nodes, applied apart (the cluster status report's nodes): accepted by the
    real server, nothing but `list` on nodes, bound to the very ServiceAccount the Role is."""
    objects = {obj["kind"]: obj for obj in kustomize(real_kube_binaries, KUSTOMIZE_DIR / "rbac-nodes")}
    assert sorted(objects) == ["ClusterRole", "ClusterRoleBinding"]
    assert objects["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    role_binding = yaml.safe_load((KUSTOMIZE_DIR / "rbac" / "rolebinding.yaml").read_text())
    assert objects["ClusterRoleBinding"]["subjects"] == role_binding["subjects"]
    assert objects["ClusterRoleBinding"]["roleRef"]["name"] == objects["ClusterRole"]["metadata"]["name"]
    for obj in objects.values():
        assert "namespace" not in obj["metadata"], "cluster-scoped"
        status, answer = dry_run(real_kube, obj)
        assert status == 201, (obj["kind"], answer)


def test_the_values_set_only_keys_the_chart_has() -> None:
    values = yaml.safe_load(VALUES.read_text())
    assert leaf_keys(values) <= CHART_KEYS, leaf_keys(values) - CHART_KEYS


def test_the_gocd_server_pod_the_chart_renders_is_accepted_under_the_baseline_pod_security_level(
    real_kube: ControlPlane,
) -> None:
    namespace(real_kube, "gocd-baseline", "baseline")
    pod = server_pod(yaml.safe_load(VALUES.read_text()))
    pod["metadata"]["namespace"] = "gocd-baseline"
    status, answer = dry_run(real_kube, pod)
    assert status == 201, answer
    names = [c["name"] for c in answer["spec"]["containers"]]
    assert names == ["kubernetes-reuse-backend", "gocd-server"]
    assert [c["name"] for c in answer["spec"]["initContainers"]] == ["install-kubernetes-reuse-plugin"]


def test_the_backends_containers_meet_the_restricted_pod_security_level(real_kube: ControlPlane) -> None:
    namespace(real_kube, "gocd-restricted", "restricted")
    pod = server_pod(yaml.safe_load(VALUES.read_text()))
    spec = pod["spec"]
    ours = [c for c in spec["containers"] if c["name"] != "gocd-server"]
    used = {m["name"] for c in ours + spec["initContainers"] for m in c.get("volumeMounts", [])}
    spec["containers"] = ours
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] in used]
    pod["metadata"]["namespace"] = "gocd-restricted"
    status, answer = dry_run(real_kube, pod)
    assert status == 201, answer
    # And the whole pod is refused there only for the chart's own server container.
    whole = server_pod(yaml.safe_load(VALUES.read_text()))
    whole["metadata"]["namespace"] = "gocd-restricted"
    status, answer = dry_run(real_kube, whole)
    assert status == 403 and 'container "gocd-server"' in answer["message"], answer
    assert "kubernetes-reuse-backend" not in answer["message"]
    assert "install-kubernetes-reuse-plugin" not in answer["message"]


def test_only_the_gocd_server_container_gates_the_pods_readiness_and_kubectl_defaults_to_it() -> None:
    """A readiness probe on the sidecar would take the whole GoCD server pod out of its Service when the
    backend crash-loops (Kubernetes counts a pod ready only when every container is); the sidecar has a
    startup and a liveness probe instead."""
    pod = server_pod(yaml.safe_load(VALUES.read_text()))
    containers = {container["name"]: container for container in pod["spec"]["containers"]}
    assert [name for name, c in containers.items() if "readinessProbe" in c] == ["gocd-server"]
    sidecar = containers["kubernetes-reuse-backend"]
    assert "startupProbe" in sidecar and "livenessProbe" in sidecar
    assert pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == "gocd-server"


def test_the_values_replace_the_charts_preconfigure_which_would_fail_without_the_official_plugin() -> None:
    """With the chart's defaults the postStart hook posts a cluster profile of the official plugin; the
    values replace extraEnvVars, so that plugin is not installed, the post fails and so does the hook.
    The values' own command runs instead (tests/unit/deploy/test_chart_preconfigure.py runs it)."""
    values = yaml.safe_load(VALUES.read_text())
    assert not installs_official_plugin(values), "the values' env list replaces the chart's"
    assert not charts_script_runs(values), "no hook that needs the official plugin"
    pod = server_pod(values)
    [server] = [c for c in pod["spec"]["containers"] if c["name"] == "gocd-server"]
    assert server["lifecycle"]["postStart"]["exec"]["command"] == values["server"]["preconfigureCommand"]
    without = {**values, "server": {k: v for k, v in values["server"].items() if k != "preconfigureCommand"}}
    assert charts_script_runs(without)


def test_the_values_rely_on_the_charts_persistent_volume_for_the_jar() -> None:
    """The init container copies the jar into the chart's `goserver-vol` at subPath godata: that volume
    exists only with server.persistence.enabled (the chart's default), which the values must not turn
    off."""
    values = yaml.safe_load(VALUES.read_text())
    pod = server_pod(values)
    volumes = {volume["name"] for volume in pod["spec"]["volumes"]}
    [init] = pod["spec"]["initContainers"]
    for mount in init["volumeMounts"]:
        assert mount["name"] in volumes
    [server] = [c for c in pod["spec"]["containers"] if c["name"] == "gocd-server"]
    godata = next(m for m in server["volumeMounts"] if m["mountPath"] == "/godata")
    assert (godata["name"], godata["subPath"]) == ("goserver-vol", "godata")
    off = server_pod({**values, "server": {**values["server"], "persistence": {"enabled": False}}})
    assert "goserver-vol" not in {volume["name"] for volume in off["spec"].get("volumes", [])}


def test_every_helm_upgrade_the_docs_show_pins_the_chart_version_the_values_were_checked_against() -> None:
    pages = (VALUES, ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")))
    texts = {path: path.read_text() for path in pages}
    commands = [(path.name, line) for path, text in texts.items() for line in text.splitlines()
                if re.search(r"helm upgrade .*gocd/gocd", line)]  # fmt: skip
    assert commands, "the guide shows the helm command"
    for name, line in commands:
        assert f"--version {CHART_VERSION}" in line, (name, line)
