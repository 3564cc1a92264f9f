"""What docs/install.md tells an administrator is true: the GoCD and Kubernetes versions it names, the
RBAC checks it shows (answered by a real kube-apiserver as the guide says they answer), the Pod Security
levels it promises for agent pods (admitted or refused by the real admission plugin), the merge of values
files it recommends because Helm replaces lists, and what the values and the kustomization leave to the
chart (its ServiceAccount, its ClusterRole while the official plugin may run)."""

from __future__ import annotations

import base64
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
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
from profiles.cluster import ClusterProfile
from tests.support.control_plane import Binaries, ControlPlane, pinned_versions
from tests.support.gocd_chart import OFFICIAL_PLUGIN_INSTALL, access_objects, server_pod, service_account_name
from tests.support.guide_commands import GuideShell
from tests.support.install_guide import block_after, guide, values
from tests.support.manifests import dry_run, kustomize, namespace
from tests.support.paths import ROOT
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

POM = ROOT / "bridge" / "pom.xml"
MAVEN = "{http://maven.apache.org/POM/4.0.0}"
FIRST_GOCD_ON_JAVA_17 = "22.1.0"  # gocd/gocd build.gradle at tag 22.1.0: packaging.adoptOpenjdk 17
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


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


@pytest.fixture
def new_cluster(real_kube_binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of its own with nothing on it: a new cluster (the session's has namespaces of
    other tests)."""
    with ControlPlane.start(real_kube_binaries, tmp_path / "kube") as plane:
        yield plane


def rbac_answers(plane: ControlPlane) -> tuple[dict[str, str], dict[str, str]]:
    """Step 3's checks as the API server answers them, and as the guide writes them."""
    checks = [match for line in block_after("rbac-checks").splitlines() if (match := CAN_I.search(line))]
    assert len(checks) == len(block_after("rbac-checks").strip().splitlines()), "every line is a check"
    # RBAC reads bindings from a watch cache: wait until the binding is seen (a bound, not a timing).
    first_yes = next(check for check in checks if check["answer"] == "yes")
    deadline = time.monotonic() + 10.0
    while not allowed(plane, first_yes) and time.monotonic() < deadline:
        time.sleep(0.05)
    answers = {check.group(0): "yes" if allowed(plane, check) else "no" for check in checks}
    return answers, {check.group(0): check["answer"] for check in checks}


@pytest.mark.parametrize("gocd_installed", [False, True], ids=["new-cluster", "gocd-installed-already"])
def test_step_2_works_in_the_order_written_and_step_3s_checks_answer_as_the_guide_says(
    new_cluster: ControlPlane, real_kube_binaries: Binaries, tmp_path: Path, gocd_installed: bool
) -> None:
    """Step 2's commands as written, one after the other, on a cluster without GoCD's namespace yet
    (its Secret goes there) and on one where the chart made it; then step 3's checks, each with the
    answer the guide writes beside it (no chart ClusterRole: the state of a new cluster, or after
    step 9)."""
    if gocd_installed:
        new_cluster.create_namespace("gocd")
    shell = GuideShell.in_copy_of(ROOT, new_cluster, real_kube_binaries, tmp_path / "clone")
    done = shell.run_block(block_after("step-2"))
    assert [command for command, succeeded in done if not succeeded] == [], shell.errors
    core = client.CoreV1Api(new_cluster.admin_api_client())
    secret = core.read_namespaced_secret("gocd-reuse-backend-token", "gocd")
    assert len(base64.b64decode(secret.data["token"]).strip()) == 64, "openssl rand -hex 32"
    assert not (tmp_path / "clone" / "docker" / "kubernetes" / "backend-token.txt").exists(), "deleted"
    labels_of = core.read_namespace("gocd-agents").metadata.labels
    assert labels_of["pod-security.kubernetes.io/enforce"] == "baseline"
    answers, written = rbac_answers(new_cluster)
    assert answers == written


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
    real_kube_binaries: Binaries,
    tmp_path: Path,
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


def test_the_values_leave_the_official_plugins_cluster_role_to_you_until_the_guide_says_to_drop_it() -> None:
    """A server that ran the official plugin keeps running it from the jar on its volume (gocd/gocd
    buildSrc/.../gocd-docker-server/install-gocd-plugins overwrites downloaded jars, never removes one),
    and that plugin needs pods in every namespace: the chart's ClusterRole, bound to the server's
    account. The values do not set `rbac`, so the chart's default keeps it, and a `false` of yours is
    not turned back on."""
    assert "rbac" not in values() and "serviceAccount" not in values()
    objects = {o["kind"]: o for o in access_objects(values())}
    assert objects["ClusterRole"]["rules"][0] == {"apiGroups": [""], "resources": ["pods", "pods/log"],
                                                  "verbs": ["*"]}  # fmt: skip
    assert objects["ClusterRoleBinding"]["subjects"][0]["name"] == "gocd"
    assert "Set `rbac.create: false` in your values" in guide()
    dropped = {o["kind"] for o in access_objects({**values(), "rbac": {"create": False}})}
    assert dropped == {"ServiceAccount"}


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
