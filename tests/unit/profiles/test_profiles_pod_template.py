"""Rendering profiles into pod templates (three modes) and instantiating them per pod."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from profiles import ElasticProfile, ProfileError, instantiate, render_pod_template
from profiles.placeholders import (
    AGENT_IMAGE_NAME,
    AGENT_IMAGE_TAG,
    POSTFIX_LENGTH,
    TemplateError,
    new_postfix,
    parse_pod_template,
)

TEMPLATE = """\
apiVersion: v1
kind: Pod
metadata:
  name: gocd-agent-{{ POD_POSTFIX }}
  labels:
    app: web
spec:
  containers:
    - name: gocd-agent-container-{{CONTAINER_POSTFIX}}
      image: {{ GOCD_AGENT_IMAGE }}:{{LATEST_VERSION}}
      env:
        - name: HOME_COPY
          value: ${HOME}
"""


def yaml_profile(template: str, **extra: str) -> ElasticProfile:
    return ElasticProfile.from_properties({"PodSpecType": "yaml", "PodConfiguration": template, **extra})


def minimal(name_line: str = "", container: str = "agent", value: str = "x") -> str:
    metadata = f"metadata:\n  {name_line}\n" if name_line else ""
    return (
        f"{metadata}spec:\n  containers:\n    - name: {container}\n      image: busybox\n"
        f"      args: [{value!r}]\n"
    )


# --- properties mode -------------------------------------------------------------------------------


def test_properties_mode_builds_one_agent_container() -> None:
    profile = ElasticProfile.from_properties(
        {
            "Image": "gocd/gocd-agent-wolfi:v24.3.0",
            "MaxMemory": "1024M",
            "MaxCPU": "1.5",
            "Environment": "A=1\nB=two words",
            "Privileged": "true",
        }
    )
    assert render_pod_template(profile) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "k8s-ea-{{POD_POSTFIX}}"},
        "spec": {
            "containers": [
                {
                    "name": "gocd-agent-container-{{CONTAINER_POSTFIX}}",
                    "image": "gocd/gocd-agent-wolfi:v24.3.0",
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {"limits": {"memory": "1Gi", "cpu": "1500m"}},
                    "securityContext": {"privileged": True},
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "two words"}],
                }
            ],
            "restartPolicy": "Never",
        },
    }


def test_properties_mode_leaves_out_what_is_not_set() -> None:
    container = render_pod_template(ElasticProfile.from_properties({"Image": "busybox"}))["spec"][
        "containers"
    ][0]
    assert set(container) == {"name", "image", "imagePullPolicy"}


def test_properties_mode_without_image_raises() -> None:
    with pytest.raises(ProfileError, match="Image"):
        render_pod_template(ElasticProfile())


# --- yaml mode -------------------------------------------------------------------------------------


def test_yaml_mode_keeps_per_pod_placeholders_symbolic_and_fills_constants() -> None:
    pod = render_pod_template(yaml_profile(TEMPLATE))
    assert pod["metadata"]["name"] == "gocd-agent-{{POD_POSTFIX}}"
    container = pod["spec"]["containers"][0]
    assert container["name"] == "gocd-agent-container-{{CONTAINER_POSTFIX}}"
    assert container["image"] == f"{AGENT_IMAGE_NAME}:{AGENT_IMAGE_TAG}"


def test_official_agent_image_is_the_wolfi_one_with_a_fixed_tag() -> None:
    assert AGENT_IMAGE_NAME == "gocd/gocd-agent-wolfi"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", AGENT_IMAGE_TAG)


@pytest.mark.parametrize(
    "spelling", ["{{POD_POSTFIX}}", "{{ POD_POSTFIX }}", "{{  POD_POSTFIX}}", "{{\tPOD_POSTFIX }}"]
)
def test_placeholder_spellings_normalize_to_one_form(spelling: str) -> None:
    pod = render_pod_template(yaml_profile(minimal(f"name: a-{spelling}")))
    assert pod["metadata"]["name"] == "a-{{POD_POSTFIX}}"


@pytest.mark.parametrize(
    "text",
    [
        "{{not_a_placeholder}}",
        "${HOME}",
        "{{ pod_postfix }}",
        "{{POD_POSTFIX}",
        "{ {POD_POSTFIX}}",
        "}}{{",
        "{{}}",
    ],
)
def test_unknown_placeholder_braces_are_left_alone(text: str) -> None:
    pod = render_pod_template(yaml_profile(minimal(value=text)))
    assert pod["spec"]["containers"][0]["args"] == [text]
    assert instantiate(pod, "p1", "c1")["spec"]["containers"][0]["args"] == [text]


def test_placeholders_are_safe_wherever_yaml_puts_them() -> None:
    template = (
        "metadata:\n  name: x-{{ POD_POSTFIX }}\n  annotations:\n    plain: {{ POD_POSTFIX }}\n"
        "    quoted: \"{{POD_POSTFIX}}\"\n    single: '{{ LATEST_VERSION }}'\n"
        "    block: |\n      line {{ CONTAINER_POSTFIX }}\n    flow: {a: {{GOCD_AGENT_IMAGE}}}\n"
        "spec:\n  containers: [{name: c-{{CONTAINER_POSTFIX}},"
        " image: {{GOCD_AGENT_IMAGE}}:{{LATEST_VERSION}}}]\n"
    )
    pod = instantiate(render_pod_template(yaml_profile(template)), "p1", "c1")
    assert pod["metadata"]["annotations"] == {
        "plain": "p1",
        "quoted": "p1",
        "single": AGENT_IMAGE_TAG,
        "block": "line c1\n",
        "flow": {"a": AGENT_IMAGE_NAME},
    }
    assert pod["spec"]["containers"] == [{"name": "c-c1", "image": f"{AGENT_IMAGE_NAME}:{AGENT_IMAGE_TAG}"}]


def test_a_postfix_can_never_change_the_document_structure() -> None:
    pod = render_pod_template(yaml_profile(minimal("name: a-{{POD_POSTFIX}}")))
    with pytest.raises(ValueError, match="postfix"):
        instantiate(pod, "x\nkind: Secret", "c")


def test_template_text_that_looks_like_the_internal_marker_is_kept() -> None:
    pod = render_pod_template(yaml_profile(minimal(value="gocdph0x0x and {{POD_POSTFIX}}")))
    assert pod["spec"]["containers"][0]["args"] == ["gocdph0x0x and {{POD_POSTFIX}}"]


def test_unquoted_dates_stay_text_as_for_kubectl() -> None:
    pod = render_pod_template(yaml_profile(minimal("labels: {since: 2024-01-01}")))
    assert pod["metadata"]["labels"] == {"since": "2024-01-01"}
    json.dumps(pod)


def test_json_template_is_accepted() -> None:
    text = json.dumps(
        {"metadata": {"name": "j-{{ POD_POSTFIX }}"}, "spec": {"containers": [{"name": "a", "image": "b"}]}}
    )
    assert render_pod_template(yaml_profile(text))["metadata"]["name"] == "j-{{POD_POSTFIX}}"


def test_environment_lines_reach_every_container_and_win_over_the_template() -> None:
    template = (
        "spec:\n  containers:\n"
        "    - {name: a, image: b, env: [{name: A, value: old}, {name: K, value: kept}]}\n"
        "    - {name: c, image: d}\n"
    )
    pod = render_pod_template(yaml_profile(template, Environment="A=new"))
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "K", "value": "kept"},
        {"name": "A", "value": "new"},
    ]
    assert pod["spec"]["containers"][1]["env"] == [{"name": "A", "value": "new"}]


def test_rendering_is_deterministic() -> None:
    profile = yaml_profile(TEMPLATE)
    assert json.dumps(render_pod_template(profile)) == json.dumps(render_pod_template(profile))


def test_template_with_generate_name_is_rejected() -> None:
    with pytest.raises(TemplateError, match="generateName"):
        parse_pod_template("metadata: {generateName: a-}\nspec: {containers: [{name: a, image: b}]}")


def test_template_with_namespace_is_rejected_at_render_too() -> None:
    profile = ElasticProfile(pod_spec_type="yaml", pod_configuration="metadata: {namespace: x}\n" + minimal())
    with pytest.raises(ProfileError, match=r"metadata\.namespace"):
        render_pod_template(profile)


# --- remote mode -----------------------------------------------------------------------------------


def remote_profile(
    url: str = "https://example.com/pod.yaml?token=secret", kind: str = "yaml"
) -> ElasticProfile:
    return ElasticProfile.from_properties(
        {"PodSpecType": "remote", "RemoteFile": url, "RemoteFileType": kind}
    )


def test_remote_mode_fetches_and_parses_yaml() -> None:
    urls: list[str] = []

    def fetch(url: str) -> str:
        urls.append(url)
        return TEMPLATE

    pod = render_pod_template(remote_profile(), fetch)
    assert urls == ["https://example.com/pod.yaml?token=secret"]
    assert pod == render_pod_template(yaml_profile(TEMPLATE))


def test_remote_mode_parses_json_strictly_when_told_json() -> None:
    text = json.dumps(
        {"spec": {"containers": [{"name": "a-{{CONTAINER_POSTFIX}}", "image": "{{GOCD_AGENT_IMAGE}}"}]}}
    )
    pod = render_pod_template(remote_profile(kind="json"), lambda url: text)
    assert pod["spec"]["containers"][0] == {"name": "a-{{CONTAINER_POSTFIX}}", "image": AGENT_IMAGE_NAME}
    with pytest.raises(ProfileError, match="not valid JSON"):
        render_pod_template(remote_profile(kind="json"), lambda url: "spec: {}")


def test_remote_template_errors_name_the_file_without_its_query_string() -> None:
    with pytest.raises(ProfileError) as error:
        render_pod_template(remote_profile(), lambda url: "metadata: {namespace: x}\n" + minimal())
    assert error.value.key == "RemoteFile"
    assert "https://example.com/pod.yaml" in error.value.message and "secret" not in error.value.message


def test_remote_mode_without_a_fetcher_raises() -> None:
    with pytest.raises(ProfileError, match="cannot be fetched"):
        render_pod_template(remote_profile())


def test_fetch_errors_pass_through_unchanged() -> None:
    def fail(url: str) -> str:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        render_pod_template(remote_profile(), fail)


# --- instantiate -----------------------------------------------------------------------------------


def test_instantiate_substitutes_only_the_per_pod_placeholders() -> None:
    template = render_pod_template(yaml_profile(TEMPLATE))
    before = copy.deepcopy(template)
    pod = instantiate(template, "abc123", "def456")
    assert pod["metadata"]["name"] == "gocd-agent-abc123"
    assert pod["spec"]["containers"][0]["name"] == "gocd-agent-container-def456"
    assert pod["spec"]["containers"][0]["env"] == [{"name": "HOME_COPY", "value": "${HOME}"}]
    assert template == before  # the template is not modified


def test_name_without_pod_postfix_gets_the_postfix_appended() -> None:
    pod = instantiate(render_pod_template(yaml_profile(minimal("name: fixed"))), "p1", "c1")
    assert pod["metadata"]["name"] == "fixed-p1"


def test_pod_postfix_elsewhere_than_the_name_still_gets_the_name_a_postfix() -> None:
    template = render_pod_template(yaml_profile(minimal("name: fixed\n  labels: {id: '{{POD_POSTFIX}}'}")))
    pod = instantiate(template, "p1", "c1")
    assert pod["metadata"]["name"] == "fixed-p1" and pod["metadata"]["labels"] == {"id": "p1"}


def test_template_without_a_name_gets_the_default_prefix() -> None:
    pod = instantiate(render_pod_template(yaml_profile(minimal())), "p1", "c1")
    assert pod["metadata"]["name"] == "k8s-ea-p1"


def test_properties_pod_instantiates_into_valid_names() -> None:
    template = render_pod_template(ElasticProfile.from_properties({"Image": "busybox"}))
    pod = instantiate(template, new_postfix(), new_postfix())
    assert re.fullmatch(rf"k8s-ea-[a-z0-9]{{{POSTFIX_LENGTH}}}", pod["metadata"]["name"])
    assert re.fullmatch(r"gocd-agent-container-[a-z0-9]+", pod["spec"]["containers"][0]["name"])


def test_new_postfixes_are_fresh_and_name_safe() -> None:
    postfixes = {new_postfix() for _ in range(100)}
    assert len(postfixes) == 100
    assert all(re.fullmatch(rf"[a-z0-9]{{{POSTFIX_LENGTH}}}", p) for p in postfixes)


@pytest.mark.parametrize("bad", ["", "UPPER", "a_b", "-a", "a b"])
def test_instantiate_refuses_postfixes_that_are_not_name_safe(bad: str) -> None:
    template: dict[str, Any] = render_pod_template(yaml_profile(minimal()))
    with pytest.raises(ValueError):
        instantiate(template, bad, "c1")
    with pytest.raises(ValueError):
        instantiate(template, "p1", bad)


def test_container_name_too_long_for_its_postfix_is_rejected() -> None:
    with pytest.raises(TemplateError, match="container name"):
        parse_pod_template(minimal(container="c" * 60 + "-{{CONTAINER_POSTFIX}}"))
