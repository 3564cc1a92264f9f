"""Blank settings and placeholders mean what they mean to the official plugin, so that profiles moved
over from it run the same: each test names the source it holds this plugin to.

- gocd/kubernetes-elastic-agents 5.0.2 (tag v5.0.2-779, commit d8ce58a89ffb3a96db3eeb8ad3ec846257eabc87):
  KubernetesInstanceFactory.getJinJavaContext (the placeholders), KubernetesInstanceFactory.
  environmentFrom (a blank go_server_url is the server info's secure site URL),
  ClusterProfileValidateRequestExecutor.validateGoServerUrl (a blank one is refused when GoCD has no
  secure site URL), KubernetesClientFactory.createClientFor (a blank namespace is left to fabric8).
- fabric8 kubernetes-client 7.6.1 (the official plugin's, tag v7.6.1): Config.autoConfigure,
  tryNamespaceFromPath, configFromSysPropsOrEnvVars (what fabric8 takes for a blank namespace).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_agent.gocd import messages
from elastic_agent.kube.namespace import BlankNamespace, find_blank_namespace
from elastic_agent.simulation.gocd_model import GoCDConfig
from profiles import ElasticProfile, ProfileError, render_pod_template
from profiles.server_url import pods_server_url
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod, reuse_profile, schedule
from tests.support.virtual_helpers import completed, run_to_idle

VALIDATE = "cd.go.elastic-agent.validate-cluster-profile"
SECURE = "https://gocd.example.test:8154/go"


# --- the placeholders --------------------------------------------------------------------------------


def test_gocd_agent_image_and_latest_version_render_what_the_official_plugins_release_renders() -> None:
    """getJinJavaContext puts GOCD_AGENT_IMAGE = "gocd/gocd-agent-wolfi" and LATEST_VERSION = "v25.4.0"
    (constants in KubernetesInstanceFactory.java at 5.0.2, unchanged on main): a template moved over
    from it runs the same image."""
    template = (
        "metadata:\n  name: agent-{{ POD_POSTFIX }}\nspec:\n  containers:\n"
        "    - name: agent-{{ CONTAINER_POSTFIX }}\n      image: {{ GOCD_AGENT_IMAGE }}:{{LATEST_VERSION}}\n"
    )
    profile = ElasticProfile.from_properties({"PodSpecType": "yaml", "PodConfiguration": template})
    [container] = render_pod_template(profile)["spec"]["containers"]
    assert container["image"] == "gocd/gocd-agent-wolfi:v25.4.0"


# --- a blank go_server_url ---------------------------------------------------------------------------


def test_a_blank_go_server_url_is_gocds_secure_site_url_never_its_plain_site_url() -> None:
    """environmentFrom takes `getSecureSiteUrl()` alone; validateGoServerUrl refuses a blank one when it
    is blank ("Secure site url is not configured. Please specify Go Server Url.")."""
    assert pods_server_url(SECURE, "http://gocd.example.test:8153/go") == SECURE
    for missing in (None, "", "  "):
        with pytest.raises(ProfileError) as error:
            pods_server_url(missing, "http://gocd.example.test:8153/go")
        assert error.value.key == "go_server_url"
        assert (
            "GoCD has none (its site URL http://gocd.example.test:8153/go is not used" in error.value.message
        )


def test_the_secure_site_url_is_checked_as_a_typed_go_server_url_is() -> None:
    """GoCD accepts any `https://.+` as a secure site URL (SecureSiteUrl.validate), but the agent refuses a
    server URL that does not end in /go (ServerUrlValidator) and a localhost one reaches the pod itself
    (GoServerURLMetadata refuses it typed): a sentence here, not a pod that never registers."""
    with pytest.raises(
        ProfileError, match=r"must end in /go.*Set go_server_url to https://gocd\.example\.test/go"
    ):
        pods_server_url("https://gocd.example.test")
    with pytest.raises(ProfileError, match="points at localhost"):
        pods_server_url("https://localhost:8154/go")


def test_pods_of_a_blank_go_server_url_use_the_secure_site_url_and_share_pods_with_it_typed_out() -> None:
    """The pod's GO_EA_SERVER_URL is the secure site URL; and since the fingerprint takes the URL the
    pods get, a profile that types the same URL out reuses the same pods."""
    stack = VirtualStack(gocd=GoCDConfig(seed=1, secure_site_url=SECURE))
    profile = reuse_profile(stack)
    blank = stack.cluster_profile(go_server_url="")
    first = run_to_idle(stack, schedule(stack, profile, cluster=blank, duration=10))
    found = pod(stack, first)
    assert found is not None
    env = {e["name"]: e["value"] for e in found["spec"]["containers"][0]["env"]}
    assert env["GO_EA_SERVER_URL"] == SECURE

    typed = completed(stack, schedule(stack, profile, cluster=stack.cluster_profile(go_server_url=SECURE)))
    assert typed.agent_id == first


def test_a_changed_secure_site_url_reaches_new_pods_and_the_old_pods_are_not_reused() -> None:
    """GoCD is asked again at each server-ping while a profile leaves go_server_url blank (the official
    plugin asks at every create-agent): new pods take the new URL under a new fingerprint."""
    stack = VirtualStack(gocd=GoCDConfig(seed=1, secure_site_url=SECURE))
    profile = reuse_profile(stack)
    blank = stack.cluster_profile(go_server_url="")
    old = run_to_idle(stack, schedule(stack, profile, cluster=blank, duration=10))
    stack.gocd.config.secure_site_url = "https://ci.example.test/go"
    stack.run_for(61)  # a server-ping

    job = completed(stack, schedule(stack, profile, cluster=blank, duration=10))
    assert job.agent_id is not None and job.agent_id != old
    new = pod(stack, job.agent_id)
    assert new is not None
    env = {e["name"]: e["value"] for e in new["spec"]["containers"][0]["env"]}
    assert env["GO_EA_SERVER_URL"] == "https://ci.example.test/go"


def test_without_a_secure_site_url_the_job_and_gocds_health_messages_say_why_no_pod_is_made() -> None:
    stack = VirtualStack(gocd=GoCDConfig(seed=1, secure_site_url=""))
    blank = stack.cluster_profile(go_server_url="")
    job = schedule(stack, reuse_profile(stack), cluster=blank, duration=10)
    stack.run_for(130)  # create-agent, and two server-pings

    assert not stack.pods()
    console = "\n".join(stack.gocd.job(job.job_id).console)
    assert (
        "could not create an agent pod: go_server_url: blank, which means GoCD's secure site URL" in console
    )
    assert "and GoCD has none (its site URL http://gocd.example.test:8153/go is not used" in console
    health = [m.message for m in stack.gocd.health_messages]
    assert any(
        "no agent pod can be created: go_server_url is blank, which means GoCD's secure site URL" in m
        for m in health
    ), health

    stack.gocd.config.secure_site_url = SECURE  # an administrator sets it
    completed(stack, job, within_s=400)
    assert not any("go_server_url" in m.message for m in stack.gocd.health_messages)


@pytest.mark.parametrize(
    ("secure_site_url", "refused"),
    [(SECURE, None), ("", "and GoCD has none"), ("https://gocd.example.test", "must end in /go")],
)
def test_validation_refuses_a_blank_go_server_url_only_when_gocds_secure_site_url_cannot_be_used(
    secure_site_url: str, refused: str | None
) -> None:
    """As validateGoServerUrl does, asking GoCD's server info when the profile is saved; this plugin also
    refuses a secure site URL the agents would refuse."""
    stack = VirtualStack(gocd=GoCDConfig(seed=1, secure_site_url=secure_site_url))
    profile = stack.cluster_profile(go_server_url="")
    status, body = stack.send(VALIDATE, json.dumps(profile))
    assert status == 200
    problems = json.loads(body)
    if refused is None:
        assert problems == []
    else:
        [problem] = problems
        assert problem["key"] == "go_server_url" and refused in problem["message"]


# --- a blank namespace -------------------------------------------------------------------------------


def test_a_blank_namespace_is_the_pods_service_account_namespace_as_fabric8_reads_it(tmp_path: Path) -> None:
    """tryNamespaceFromPath reads /var/run/secrets/kubernetes.io/serviceaccount/namespace (or the file
    KUBENAMESPACE names) and removes line separators: the GoCD server pod's own namespace."""
    sa = tmp_path / "namespace"
    sa.write_text("gocd\n", encoding="utf-8")
    found = find_blank_namespace({}, sa, lambda: "from-kubeconfig")
    assert found.name == "gocd" and str(sa) in found.source
    other = tmp_path / "other"
    other.write_text("elsewhere", encoding="utf-8")
    assert find_blank_namespace({"KUBENAMESPACE": str(other)}, sa, lambda: None).name == "elsewhere"


def test_kubernetes_namespace_wins_as_fabric8_applies_it_last(tmp_path: Path) -> None:
    """configFromSysPropsOrEnvVars runs after autoConfigure and sets `kubernetes.namespace` /
    KUBERNETES_NAMESPACE over whatever was found."""
    sa = tmp_path / "namespace"
    sa.write_text("gocd", encoding="utf-8")
    assert find_blank_namespace({"KUBERNETES_NAMESPACE": "agents"}, sa, lambda: "ctx").name == "agents"


def test_outside_a_pod_the_kubeconfig_context_namespace_else_default(tmp_path: Path) -> None:
    """Without the service account's file: the kubeconfig's current context (this backend connects
    through it there), else `default`, where fabric8 would find none and the official plugin could
    create no pod ("namespace not specified for an operation requiring one")."""
    absent = tmp_path / "absent"
    assert find_blank_namespace({}, absent, lambda: "ctx-ns") == BlankNamespace(
        "ctx-ns", "the kubeconfig's current context"
    )
    assert find_blank_namespace({}, absent, lambda: None).name == "default"
    damaged = tmp_path / "damaged"
    damaged.write_text("Not A Name!", encoding="utf-8")
    assert find_blank_namespace({}, damaged, lambda: None).name == "default"


def test_a_kubeconfig_names_its_current_contexts_namespace(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: work\n"
        "contexts:\n- name: work\n  context: {cluster: c, user: u, namespace: team-ci}\n"
        "- name: other\n  context: {cluster: c, user: u}\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://k8s.example.test'}\n"
        "users:\n- name: u\n  user: {}\n",
        encoding="utf-8",
    )
    found = find_blank_namespace({"KUBECONFIG": str(kubeconfig)}, tmp_path / "absent")
    assert found.name == "team-ci"


def test_requests_read_a_blank_namespace_as_the_backends_and_share_the_pool_of_it_typed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(messages, "blank_namespace", lambda: BlankNamespace("ci", "a test"))
    stack = VirtualStack(gocd=GoCDConfig(seed=1), namespace="ci")
    profile = reuse_profile(stack)
    first = run_to_idle(
        stack, schedule(stack, profile, cluster=stack.cluster_profile(namespace=""), duration=10)
    )
    assert pod(stack, first) is not None  # in namespace ci

    typed = completed(stack, schedule(stack, profile, cluster=stack.cluster_profile(namespace="ci")))
    assert typed.agent_id == first
