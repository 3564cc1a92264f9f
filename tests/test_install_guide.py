"""What docs/install.md tells an administrator is true: the GoCD and Kubernetes versions it names, the
RBAC checks it shows (answered by a real kube-apiserver as the guide says they answer), the Pod Security
levels it promises for agent pods (admitted or refused by the real admission plugin), the merge of values
files it recommends because Helm replaces lists, and what the values and the kustomization leave to the
chart (its ServiceAccount, its ClusterRole while the official plugin may run)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from elastic_agent.clock import SystemClock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.pool.pods import PodIdentity, build_pod, cluster_label
from elastic_agent.service.helm_values import merge
from profiles.cluster import ClusterProfile
from tests.control_plane import Binaries, ControlPlane, pinned_versions
from tests.gocd_chart import OFFICIAL_PLUGIN_INSTALL, access_objects, merged, server_pod, service_account_name
from tests.real_kube_fixtures import real_kube, real_kube_binaries
from tests.test_manifests import dry_run, kustomize, namespace

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "install.md"
VALUES = ROOT / "docker" / "helm" / "values-gocd.yaml"
POM = ROOT / "bridge" / "pom.xml"
MAVEN = "{http://maven.apache.org/POM/4.0.0}"
FIRST_GOCD_ON_JAVA_17 = "22.1.0"  # gocd/gocd build.gradle at tag 22.1.0: packaging.adoptOpenjdk 17
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def guide() -> str:
    return GUIDE.read_text()


def block_after(marker: str) -> str:
    """The fenced block that follows `<!-- marker -->` in the guide."""
    found = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", guide(), re.S)
    assert found, f"the guide has the block {marker}"
    return found.group(1)


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(VALUES.read_text())
    return loaded


def test_the_jar_targets_the_first_gocd_release_that_runs_on_its_java() -> None:
    properties = ET.parse(POM).getroot().find(f"{MAVEN}properties")
    assert properties is not None
    assert properties.findtext(f"{MAVEN}maven.compiler.release") == "17"
    assert properties.findtext(f"{MAVEN}target.go.version") == FIRST_GOCD_ON_JAVA_17
    assert f"**GoCD {FIRST_GOCD_ON_JAVA_17} or later.**" in guide()


def test_the_guide_names_the_kubernetes_versions_the_suite_runs() -> None:
    kubernetes, etcd = pinned_versions()
    assert f"kube-apiserver {kubernetes} with etcd {etcd}" in guide()


def agent_pod(elastic: dict[str, str], in_namespace: str) -> dict[str, Any]:
    """The pod the backend would create for a job of `elastic` (pool/pods.py build_pod)."""
    cluster = {"go_server_url": "http://gocd-server.gocd:8153/go", "namespace": in_namespace}
    profile = ClusterProfile.from_properties(cluster)
    spec = JobSpecs(SystemClock(), lambda url, wait=True: "").spec(elastic, profile, "", "build")
    job = JobIdentifier(pipeline_name="build", pipeline_label="1", pipeline_counter=1, stage_name="test",
                        stage_counter="1", job_name="unit", job_id=7)  # fmt: skip
    identity = PodIdentity(server_id="server-1", cluster=cluster_label(profile.cluster_key))
    return build_pod(spec.template, identity=identity, namespace=in_namespace, job=job, spec=spec,
                     auto_register_key="key", go_server_url=profile.go_server_url, now=0.0)  # fmt: skip


def test_agent_pods_of_the_profile_fields_are_admitted_under_baseline(real_kube: ControlPlane) -> None:
    namespace(real_kube, "guide-baseline", "baseline")
    pod = agent_pod({"Image": "gocd/gocd-agent-wolfi:v26.1.0", "Reuse": "true", "MaxMemory": "1G"},
                    "guide-baseline")  # fmt: skip
    status, answer = dry_run(real_kube, pod)
    assert status == 201, answer


def test_a_privileged_profile_is_refused_under_baseline_with_kubernetes_own_reason(
    real_kube: ControlPlane,
) -> None:
    namespace(real_kube, "guide-baseline", "baseline")
    pod = agent_pod({"Image": "docker:dind", "Privileged": "true"}, "guide-baseline")
    status, answer = dry_run(real_kube, pod)
    assert status == 403, answer
    assert 'violates PodSecurity "baseline:latest": privileged' in answer["message"]
    namespace(real_kube, "guide-privileged", "privileged")
    pod["metadata"]["namespace"] = "guide-privileged"
    assert dry_run(real_kube, pod)[0] == 201


def test_the_guides_pod_template_for_restricted_is_admitted_there(real_kube: ControlPlane) -> None:
    namespace(real_kube, "guide-restricted", "restricted")
    template = block_after("restricted-pod-configuration")
    pod = agent_pod({"PodSpecType": "yaml", "PodConfiguration": template, "Reuse": "true"},
                    "guide-restricted")  # fmt: skip
    status, answer = dry_run(real_kube, pod)
    assert status == 201, answer
    plain = agent_pod({"Image": "gocd/gocd-agent-wolfi:v26.1.0"}, "guide-restricted")
    assert dry_run(real_kube, plain)[0] == 403, "restricted refuses a pod without the security context"


CAN_I = re.compile(
    r"kubectl auth can-i (?P<verb>\w+) (?P<resource>\w+)(?: --subresource=(?P<sub>\w+))? "
    r"-n (?P<namespace>[\w-]+) --as=system:serviceaccount:(?P<sa_ns>[\w-]+):(?P<sa>[\w-]+)"
    r"\s+# (?P<answer>yes|no)"
)


def allowed(plane: ControlPlane, check: re.Match[str]) -> bool:
    """What `kubectl auth can-i ... --as=system:serviceaccount:NS:NAME` asks the API server: a
    SubjectAccessReview for that user with the groups every service account has."""
    sa_ns = check["sa_ns"]
    attributes = {"namespace": check["namespace"], "verb": check["verb"], "resource": check["resource"]}
    if check["sub"]:
        attributes["subresource"] = check["sub"]
    review = {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{sa_ns}:{check['sa']}",
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}",
                            "system:authenticated"],
                 "resourceAttributes": attributes},
    }  # fmt: skip
    status, answer = plane.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
    assert status == 201, answer
    return bool(answer["status"].get("allowed"))


def test_the_guides_rbac_checks_answer_as_it_says_once_the_kustomization_is_applied(
    real_kube: ControlPlane, real_kube_binaries: Binaries, tmp_path: Path
) -> None:
    """Step 2's `kubectl apply -k docker/kubernetes`, applied for real, then step 3's checks, each with
    the answer the guide writes beside it (the chart's ClusterRole is off: the state after step 9)."""
    checks = [match for line in block_after("rbac-checks").splitlines() if (match := CAN_I.search(line))]
    assert len(checks) == len(block_after("rbac-checks").strip().splitlines()), "every line is a check"
    folder = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "docker" / "kubernetes", folder)
    (folder / "backend-token.txt").write_text("0123456789abcdef" * 4)
    rbac = client.RbacAuthorizationV1Api(real_kube.admin_api_client())
    namespace(real_kube, "gocd")
    namespace(real_kube, "gocd-agents")
    for obj in kustomize(real_kube_binaries, folder):
        if obj["kind"] in ("Role", "RoleBinding"):
            if obj["kind"] == "Role":
                rbac.create_namespaced_role(obj["metadata"]["namespace"], obj)
            else:
                rbac.create_namespaced_role_binding(obj["metadata"]["namespace"], obj)
    try:
        # RBAC reads bindings from a watch cache: wait until the binding is seen (a bound, not a timing).
        first_yes = next(check for check in checks if check["answer"] == "yes")
        deadline = time.monotonic() + 10.0
        while not allowed(real_kube, first_yes) and time.monotonic() < deadline:
            time.sleep(0.05)
        answers = {check.group(0): "yes" if allowed(real_kube, check) else "no" for check in checks}
        assert answers == {check.group(0): check["answer"] for check in checks}
    finally:
        rbac.delete_namespaced_role_binding("gocd-kubernetes-reuse-elastic-agent", "gocd-agents")
        rbac.delete_namespaced_role("gocd-kubernetes-reuse-elastic-agent", "gocd-agents")


CAN_I_CLUSTER = re.compile(
    r"kubectl auth can-i (?P<verb>\w+) (?P<resource>\w+) --as=system:serviceaccount:(?P<sa_ns>[\w-]+):"
    r"(?P<sa>[\w-]+)\s+# (?P<answer>yes|no)"
)


def cluster_allowed(plane: ControlPlane, check: re.Match[str]) -> bool:
    """`kubectl auth can-i VERB RESOURCE --as=...` without a namespace: at the cluster scope."""
    sa_ns = check["sa_ns"]
    review = {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{sa_ns}:{check['sa']}",
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}",
                            "system:authenticated"],
                 "resourceAttributes": {"verb": check["verb"], "resource": check["resource"]}},
    }  # fmt: skip
    status, answer = plane.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
    assert status == 201, answer
    return bool(answer["status"].get("allowed"))


def test_the_guides_node_checks_answer_as_it_says_once_the_optional_cluster_role_is_applied(
    real_kube: ControlPlane, real_kube_binaries: Binaries
) -> None:
    """Step 2's `kubectl apply -k docker/kubernetes/rbac-nodes`, applied for real, then step 3's node
    checks, each with the answer the guide writes beside it."""
    assert block_after("rbac-nodes-apply").strip() == "kubectl apply -k docker/kubernetes/rbac-nodes"
    lines = block_after("rbac-nodes-checks").strip().splitlines()
    checks = [match for line in lines if (match := CAN_I_CLUSTER.search(line))]
    assert len(checks) == len(lines) == 3, "every line is a check"
    rbac = client.RbacAuthorizationV1Api(real_kube.admin_api_client())
    folder = ROOT / "docker" / "kubernetes" / "rbac-nodes"
    objects = {obj["kind"]: obj for obj in kustomize(real_kube_binaries, folder)}
    rbac.create_cluster_role(objects["ClusterRole"])
    rbac.create_cluster_role_binding(objects["ClusterRoleBinding"])
    try:
        deadline = time.monotonic() + 10.0  # RBAC reads bindings from a watch cache
        while not cluster_allowed(real_kube, checks[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        answers = {c.group(0): "yes" if cluster_allowed(real_kube, c) else "no" for c in checks}
        assert answers == {check.group(0): check["answer"] for check in checks}
    finally:
        rbac.delete_cluster_role_binding(objects["ClusterRoleBinding"]["metadata"]["name"])
        rbac.delete_cluster_role(objects["ClusterRole"]["metadata"]["name"])


def test_the_guides_checks_ask_about_the_account_the_chart_gives_the_server_pod() -> None:
    pod = server_pod(values())
    account = pod["spec"]["serviceAccountName"]
    assert account == service_account_name(values()) == "gocd"
    for line in block_after("rbac-checks").splitlines():
        assert f"--as=system:serviceaccount:gocd:{account}" in line


def test_the_kustomization_creates_nothing_the_chart_owns(
    real_kube_binaries: Binaries, tmp_path: Path,
) -> None:
    """An object in both would be Helm's after the next upgrade, and deleted with the release (or the
    apply would fail against Helm's ownership annotations)."""
    folder = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "docker" / "kubernetes", folder)
    (folder / "backend-token.txt").write_text("0123456789abcdef" * 4)
    ours = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in kustomize(real_kube_binaries, folder)}  # fmt: skip
    charts = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
              for o in access_objects(values())}  # fmt: skip
    assert ("ServiceAccount", "gocd", "gocd") in charts
    assert not ours & charts, ours & charts
    [binding] = [o for o in kustomize(real_kube_binaries, folder) if o["kind"] == "RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gocd", "namespace": "gocd"}]


def test_the_values_keep_the_official_plugins_cluster_role_until_the_guide_says_to_drop_it() -> None:
    """A server that ran the official plugin keeps running it from the jar on its volume (gocd/gocd
    buildSrc/.../gocd-docker-server/install-gocd-plugins overwrites downloaded jars, never removes one),
    and that plugin needs pods in every namespace: the chart's ClusterRole, bound to the server's
    account."""
    objects = {o["kind"]: o for o in access_objects(values())}
    assert objects["ClusterRole"]["rules"][0] == {"apiGroups": [""], "resources": ["pods", "pods/log"],
                                                  "verbs": ["*"]}  # fmt: skip
    assert objects["ClusterRoleBinding"]["subjects"][0]["name"] == "gocd"
    assert "Set `rbac.create: false` in your values" in guide()
    dropped = {o["kind"] for o in access_objects({**values(), "rbac": {"create": False}})}
    assert dropped == {"ServiceAccount"}


YOURS = {
    "server": {
        "env": {"extraEnvVars": [{"name": "TZ", "value": "Europe/Berlin"},
                                 {"name": "GOCD_REUSE_BACKEND_URL", "value": "http://127.0.0.1:9999"}]},
        "persistence": {"extraVolumes": [{"name": "ssh-keys", "secret": {"secretName": "ssh"}}],
                        "extraVolumeMounts": [{"name": "ssh-keys", "mountPath": "/home/go/.ssh"}]},
        "sidecarContainers": [{"name": "log-shipper", "image": "fluent/fluent-bit:3"}],
        "initContainers": [{"name": "fetch-config", "image": "busybox:1"}],
        "service": {"type": "ClusterIP"},
    },
}  # fmt: skip


def names(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["name"] for entry in entries]


def test_two_values_files_lose_your_list_entries_and_the_merge_keeps_them() -> None:
    helm = server_pod(merged(YOURS, values()))  # `-f yours.yaml -f values-gocd.yaml`: lists replaced
    assert "TZ" not in names(helm["spec"]["containers"][-1]["env"])
    assert "log-shipper" not in names(helm["spec"]["containers"])
    pod = server_pod(merge(YOURS, values()))
    server = pod["spec"]["containers"][-1]
    env = {entry["name"]: entry["value"] for entry in server["env"]}
    assert env["TZ"] == "Europe/Berlin"
    assert env["GOCD_REUSE_BACKEND_URL"] == "http://127.0.0.1:8155", "the plugin's entry replaces yours"
    assert names(pod["spec"]["containers"]) == ["log-shipper", "kubernetes-reuse-backend", "gocd-server"]
    assert names(pod["spec"]["initContainers"]) == ["fetch-config", "install-kubernetes-reuse-plugin"]
    assert {"ssh-keys", "gocd-reuse-token", "gocd-reuse-tmp"} <= set(names(pod["spec"]["volumes"]))
    mounts = {m["mountPath"] for m in server["volumeMounts"]}
    assert {"/home/go/.ssh", "/var/run/secrets/gocd-reuse"} <= mounts
    assert merge(YOURS, values())["server"]["service"] == {"type": "ClusterIP"}


def test_merging_again_changes_nothing() -> None:
    once = merge(YOURS, values())
    assert merge(once, values()) == once


def run_merge(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elastic_agent", "merge-helm-values", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_merge_command_writes_one_values_file_from_helms_output(tmp_path: Path) -> None:
    done = run_merge("-", str(VALUES), stdin=yaml.safe_dump(YOURS))
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == merge(YOURS, values())
    assert "*" not in re.sub(r"'[^']*'|\"[^\"]*\"", "", done.stdout.split("preconfigureCommand")[0]), (
        "no YAML aliases: the output reads as a person's values file"
    )
    empty = run_merge("-", str(VALUES), stdin="null\n")  # `helm get values` of a release without values
    assert empty.returncode == 0 and yaml.safe_load(empty.stdout) == values()


@pytest.mark.parametrize(
    "content, message",
    [("server: [unclosed", "not valid YAML"),
     ("- a\n- b\n", "a values file is a map of keys, this is a list")],
)
def test_the_merge_command_names_the_file_it_cannot_use(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "current-values.yaml"
    bad.write_text(content)
    done = run_merge(str(bad), str(VALUES))
    assert done.returncode == 2 and done.stdout == ""
    assert f"merge-helm-values: {bad}: {message}" in done.stderr
    missing = run_merge(str(tmp_path / "nope.yaml"), str(VALUES))
    assert missing.returncode == 2
    assert "nope.yaml: cannot be read (No such file or directory)" in missing.stderr


def test_the_guides_uninstall_selects_this_plugins_pods_by_the_label_they_carry() -> None:
    pod = agent_pod({"Image": "gocd/gocd-agent-wolfi:v26.1.0"}, "gocd-agents")
    selector = f"-l {labels.LABEL_PLUGIN_ID}={pod['metadata']['labels'][labels.LABEL_PLUGIN_ID]}"
    assert f"kubectl -n gocd-agents delete pods {selector}" in guide()
    assert OFFICIAL_PLUGIN_INSTALL in guide(), "the entry that keeps the official plugin updated"


def test_the_guide_names_the_busy_agents_budget_the_label_it_selects_and_deletes_it_on_uninstall() -> None:
    budget = yaml.safe_load((ROOT / "docker" / "kubernetes" / "pdb.yaml").read_text())
    name = budget["metadata"]["name"]
    assert budget["spec"]["selector"] == {"matchLabels": {labels.LABEL_BUSY: "true"}}
    text = " ".join(guide().split())
    assert f"`{name}` (`docker/kubernetes/pdb.yaml`)" in text
    assert f"`{labels.LABEL_BUSY}=true`" in text and "refused (429 Too Many Requests" in text
    assert f"kubectl -n gocd-agents delete pdb {name}" in text
