"""Elastic profile validation and the typed ElasticProfile."""

from __future__ import annotations

from typing import Any

import pytest

from profiles import ElasticProfile, ProfileError, validate_elastic_profile
from profiles.quantities import Cpu, Memory

PROPS: dict[str, Any] = {"Image": "gocd/gocd-agent-wolfi:v24.3.0"}
POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: agent-{{ POD_POSTFIX }}
spec:
  containers:
    - name: agent-{{CONTAINER_POSTFIX}}
      image: {{ GOCD_AGENT_IMAGE }}:{{ LATEST_VERSION }}
"""


def problems(props: dict[str, Any]) -> dict[str, str]:
    return {p["key"]: p["message"] for p in validate_elastic_profile(props)}


def test_properties_profile_with_an_image_is_valid_and_takes_defaults() -> None:
    assert validate_elastic_profile(PROPS) == []
    assert ElasticProfile.from_properties(PROPS) == ElasticProfile(
        pod_spec_type="properties",
        image="gocd/gocd-agent-wolfi:v24.3.0",
        privileged=False,
        remote_file_type="yaml",
        environment=(),
        reuse=False,
        max_jobs_per_pod=None,
        idle_timeout=None,
        min_idle_pods=0,
        reuse_scope="profile",
    )


def test_every_setting_is_read() -> None:
    profile = ElasticProfile.from_properties(
        {
            **PROPS,
            "PodSpecType": "properties",
            "MaxMemory": "1G",
            "MaxCPU": "0.5",
            "Environment": "A=1\nB=x=y\n",
            "Privileged": "TRUE",
            "Reuse": "true",
            "MaxJobsPerPod": "20",
            "IdleTimeout": "5m",
            "MinIdlePods": "2",
            "ReuseScope": "pipeline",
        }
    )
    assert profile.max_memory == Memory("1Gi", 1024**3)
    assert profile.max_cpu == Cpu("500m", 500)
    assert profile.environment == (("A", "1"), ("B", "x=y"))
    assert profile.privileged and profile.reuse
    assert (profile.max_jobs_per_pod, profile.idle_timeout, profile.min_idle_pods) == (20, 300, 2)
    assert profile.reuse_scope == "pipeline"


@pytest.mark.parametrize(
    ("mode", "key"), [("properties", "Image"), ("yaml", "PodConfiguration"), ("remote", "RemoteFile")]
)
def test_each_pod_spec_type_requires_its_own_setting(mode: str, key: str) -> None:
    assert set(problems({"PodSpecType": mode})) == {key}
    assert "must be set" in problems({"PodSpecType": mode})[key]


def test_missing_pod_spec_type_means_properties() -> None:
    assert set(problems({})) == {"Image"}
    assert ElasticProfile.from_properties(PROPS).pod_spec_type == "properties"


def test_legacy_flag_means_yaml_when_pod_spec_type_is_absent() -> None:
    props = {"SpecifiedUsingPodConfiguration": "true", "PodConfiguration": POD_YAML}
    assert validate_elastic_profile(props) == []
    assert ElasticProfile.from_properties(props).pod_spec_type == "yaml"
    assert set(problems({"SpecifiedUsingPodConfiguration": "true"})) == {"PodConfiguration"}


def test_pod_spec_type_wins_over_the_legacy_flag() -> None:
    props = {**PROPS, "PodSpecType": "properties", "SpecifiedUsingPodConfiguration": "true"}
    assert ElasticProfile.from_properties(props).pod_spec_type == "properties"


def test_unknown_pod_spec_type_is_explained_without_guessing_what_else_is_missing() -> None:
    assert problems({"PodSpecType": "helm"}) == {
        "PodSpecType": "'helm' is not one of properties, yaml, remote"
    }


def test_remote_profile_is_valid_with_a_url_and_defaults_to_yaml() -> None:
    props = {"PodSpecType": "remote", "RemoteFile": "https://example.com/pod.yaml?token=x"}
    assert validate_elastic_profile(props) == []
    profile = ElasticProfile.from_properties(props)
    assert (profile.remote_file_type, profile.remote_file) == ("yaml", "https://example.com/pod.yaml?token=x")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("Image", "gocd agent"),
        ("Image", ":latest"),
        ("MaxMemory", "lots"),
        ("MaxMemory", "0"),
        ("MaxCPU", "two"),
        ("MaxCPU", "0.0001"),
        ("Privileged", "yes"),
        ("Reuse", "1"),
        ("SpecifiedUsingPodConfiguration", "maybe"),
        ("RemoteFile", "ftp://example.com/pod.yaml"),
        ("RemoteFile", "example.com/pod.yaml"),
        ("RemoteFileType", "xml"),
        ("MaxJobsPerPod", "0"),
        ("MaxJobsPerPod", "many"),
        ("IdleTimeout", "10x"),
        ("MinIdlePods", "-1"),
        ("ReuseScope", "stage"),
    ],
)
def test_bad_values_are_reported_on_their_key(key: str, value: str) -> None:
    assert key in problems({**PROPS, "Reuse": "true", key: value})


def test_booleans_are_case_insensitive_and_blank_means_default() -> None:
    assert ElasticProfile.from_properties({**PROPS, "Privileged": "True", "Reuse": ""}).privileged is True
    assert ElasticProfile.from_properties({**PROPS, "Privileged": "false"}).privileged is False


def test_idle_timeout_blank_means_the_cluster_profiles() -> None:
    assert ElasticProfile.from_properties({**PROPS, "IdleTimeout": ""}).idle_timeout is None
    assert ElasticProfile.from_properties({**PROPS, "IdleTimeout": "2"}).idle_timeout == 120


def test_min_idle_pods_needs_reuse() -> None:
    assert "Reuse" in problems({**PROPS, "MinIdlePods": "2"})["MinIdlePods"]
    assert problems({**PROPS, "MinIdlePods": "2", "Reuse": "true"}) == {}
    assert problems({**PROPS, "MinIdlePods": "0"}) == {}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("A", "line 1 is not NAME=value: it has no '='"),
        ("A=1\n=2", "line 2"),
        ("A=1\nA=2", "A is set twice"),
        ("GO_EA_SERVER_URL=x", "set by the plugin"),
        ("1A=x", "not NAME=value"),
    ],
)
def test_malformed_environment_lines_are_explained(text: str, fragment: str) -> None:
    assert fragment in problems({**PROPS, "Environment": text})["Environment"]


def test_environment_skips_blank_lines_and_keeps_values_verbatim() -> None:
    profile = ElasticProfile.from_properties({**PROPS, "Environment": "\r\nA= spaced \r\n\nB=${HOME}\n"})
    assert profile.environment == (("A", " spaced "), ("B", "${HOME}"))


def test_pod_configuration_is_checked_only_in_yaml_mode() -> None:
    assert problems({**PROPS, "PodConfiguration": "not: [a pod"}) == {}
    assert "PodConfiguration" in problems({"PodSpecType": "yaml", "PodConfiguration": "not: [a pod"})


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("a: [b", "not valid YAML (line"),
        ("- a\n- b", "must be a mapping"),
        ("kind: Deployment\nspec: {containers: [{name: a, image: b}]}", "only kind: Pod"),
        ("apiVersion: apps/v1\nspec: {containers: [{name: a, image: b}]}", "apiVersion"),
        ("metadata: {name: a}", "needs a spec"),
        ("spec: {containers: []}", "at least one container"),
        ("spec: {containers: [{image: b}]}", "needs a name"),
        ("spec: {containers: [{name: a}]}", "needs an image"),
        ("metadata: {generateName: a-}\nspec: {containers: [{name: a, image: b}]}", "generateName"),
        ("metadata: {name: Agent}\nspec: {containers: [{name: a, image: b}]}", "valid pod name"),
        ("spec: {containers: [{name: Bad_Name, image: b}]}", "valid container name"),
        ("spec: {containers: [{name: a, image: b}]}\n---\nkind: Pod", "not valid YAML"),
        ("spec: {containers: [{name: a, image: !!binary aGk=}]}", "not plain data"),
        ("metadata: {labels: {on: x}}\nspec: {containers: [{name: a, image: b}]}", "quote it"),
    ],
)
def test_unusable_pod_templates_are_explained(template: str, fragment: str) -> None:
    assert fragment in problems({"PodSpecType": "yaml", "PodConfiguration": template})["PodConfiguration"]


@pytest.mark.parametrize("namespace", ["default", "other", "null", "''"])
def test_template_with_namespace_is_rejected(namespace: str) -> None:
    template = (
        f"metadata:\n  name: a\n  namespace: {namespace}\nspec:\n  containers: [{{name: a, image: b}}]\n"
    )
    message = problems({"PodSpecType": "yaml", "PodConfiguration": template})["PodConfiguration"]
    assert "metadata.namespace must not be set" in message and "cluster profile" in message


def test_json_pod_configuration_is_accepted() -> None:
    template = '{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "a", "image": "b"}]}}'
    assert problems({"PodSpecType": "yaml", "PodConfiguration": template}) == {}


def test_template_with_placeholders_is_valid() -> None:
    assert problems({"PodSpecType": "yaml", "PodConfiguration": POD_YAML}) == {}


def test_unknown_key_is_reported() -> None:
    assert problems({**PROPS, "foo": "1"}) == {"foo": "'foo' is not a setting of this plugin"}


def test_null_values_are_as_if_absent() -> None:
    props = {**PROPS, "MaxMemory": None, "Reuse": None, "PodSpecType": None, "Environment": None}
    assert validate_elastic_profile(props) == []
    assert ElasticProfile.from_properties(props).reuse is False


@pytest.mark.parametrize("value", [1, 0.5, False, ["x"], {"x": 1}])
def test_non_string_values_are_reported_not_raised(value: Any) -> None:
    assert problems({**PROPS, "MaxCPU": value})["MaxCPU"].startswith("must be text, not ")


@pytest.mark.parametrize(
    "props",
    [
        None,
        [],
        "x",
        3,
        {3: "x"},
        {"PodSpecType": 1},
        {"PodSpecType": "yaml", "PodConfiguration": "[" * 10000},
        {"PodSpecType": "yaml", "PodConfiguration": "\x00\ufffe"},
    ],
)
def test_any_input_gets_an_answer(props: Any) -> None:
    answer = validate_elastic_profile(props)
    assert answer and all(isinstance(i["key"], str) and isinstance(i["message"], str) for i in answer)


def test_alias_bombs_are_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    template = "\n".join(lines) + "\nspec: {containers: [{name: a, image: b}]}\n"
    assert "too large" in problems({"PodSpecType": "yaml", "PodConfiguration": template})["PodConfiguration"]


def test_from_properties_raises_with_the_validation_message() -> None:
    props = {"PodSpecType": "yaml", "PodConfiguration": "metadata: {namespace: x}\nspec: {containers: []}"}
    with pytest.raises(ProfileError) as error:
        ElasticProfile.from_properties(props)
    assert (error.value.key, error.value.message) == (
        "PodConfiguration",
        validate_elastic_profile(props)[0]["message"],
    )


def test_from_properties_ignores_unknown_keys() -> None:
    assert ElasticProfile.from_properties({**PROPS, "Legacy": "x"}).image == PROPS["Image"]
