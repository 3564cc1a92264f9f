"""Property-based tests of every profile validator and parser (profiles/): whatever a settings form or a
broken client sends, the answer is a list of validation messages (sentences, one per field), or the typed
profile, never an exception, and validation and the typed profiles never disagree."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, reject
from hypothesis import strategies as st

from profiles.cluster import ClusterProfile
from profiles.elastic import ElasticProfile
from profiles.errors import ProfileError
from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS
from profiles.fingerprint import FingerprintInputs, fingerprint
from profiles.placeholders import TemplateError, parse_pod_template
from profiles.pod_template import instantiate, render_pod_template
from profiles.quantities import format_duration, parse_cpu, parse_duration, parse_memory
from profiles.validation import validate_cluster_profile, validate_elastic_profile
from tests.support.fuzz_strategies import ANY_VALUE, AWKWARD_TEXT, JSON, REPLACEMENT, fuzz_settings, mutated

VALID_CLUSTER = {
    "go_server_url": "https://gocd.example.test/go",
    "kubernetes_cluster_url": "https://kubernetes.example.test",
    "namespace": "ci",
    "pending_pods_count": "10",
    "auto_register_timeout": "10m",
    "idle_timeout": "5m",
    "max_pods": "20",
    "max_pod_lifetime": "8h",
    "cluster_request_timeout": "10s",
}
VALID_ELASTIC = {"PodSpecType": "properties", "Image": "gocd/agent:v1", "MaxMemory": "1Gi", "MaxCPU": "500m"}
POD_TEMPLATE = """apiVersion: v1
kind: Pod
metadata:
  name: build-{{ POD_POSTFIX }}
spec:
  containers:
  - name: agent-{{ CONTAINER_POSTFIX }}
    image: {{ GOCD_AGENT_IMAGE }}:{{ LATEST_VERSION }}
    env:
    - name: A
      value: "1"
"""
VALID_YAML_ELASTIC = {"PodSpecType": "yaml", "PodConfiguration": POD_TEMPLATE, "Reuse": "true"}

# Text for a settings field: what a person may type, and what a bug may produce.
FIELD_TEXT = st.one_of(AWKWARD_TEXT, st.text(max_size=40), st.from_regex(r"\s*[0-9.]{1,12}\s*[a-zA-Z]{0,3}"))
CLUSTER_KEYS = st.sampled_from([field.key for field in CLUSTER_FIELDS])
ELASTIC_KEYS = st.sampled_from([field.key for field in ELASTIC_FIELDS])


def settings_like(keys: st.SearchStrategy[str], base: dict[str, str]) -> st.SearchStrategy[Any]:
    """Settings objects: the valid ones changed anywhere, a known key given odd text, or any JSON."""
    odd_field = st.builds(lambda key, text: {**base, key: text}, keys, FIELD_TEXT)
    return st.one_of(mutated(base), odd_field, odd_field, st.dictionaries(keys, FIELD_TEXT), ANY_VALUE)


def assert_messages(problems: Any) -> None:
    """GoCD's validation shape, every message a sentence of its own and not a caught bug."""
    assert isinstance(problems, list)
    for problem in problems:
        assert set(problem) == {"key", "message"}, problem
        assert isinstance(problem["key"], str) and isinstance(problem["message"], str)
        assert problem["message"].strip(), problem
        assert "could not be read" not in problem["message"], f"a reader raised a non-ValueError: {problem}"
        assert "could not be checked" not in problem["message"], f"validation raised: {problem}"
        assert "int_max_str_digits" not in problem["message"], f"Python's own words, not ours: {problem}"


@fuzz_settings(300)
@given(settings_like(CLUSTER_KEYS, VALID_CLUSTER))
def test_cluster_profile_validation_answers_messages_and_agrees_with_the_typed_profile(props: Any) -> None:
    problems = validate_cluster_profile(props)
    assert_messages(problems)
    try:
        ClusterProfile.from_properties(props)
    except ProfileError as error:
        assert problems, "the typed profile refused what validation accepted"
        assert error.message.strip()
    else:
        known = {field.key for field in CLUSTER_FIELDS}
        assert all(p["key"] not in known for p in problems), "validation refused what the profile took"


@fuzz_settings(300)
@given(st.one_of(settings_like(ELASTIC_KEYS, VALID_ELASTIC), settings_like(ELASTIC_KEYS, VALID_YAML_ELASTIC)))
def test_elastic_profile_validation_answers_messages_and_agrees_with_the_typed_profile(props: Any) -> None:
    problems = validate_elastic_profile(props)
    assert_messages(problems)
    try:
        profile = ElasticProfile.from_properties(props)
    except ProfileError as error:
        assert problems, "the typed profile refused what validation accepted"
        assert error.message.strip()
        return
    known = {field.key for field in ELASTIC_FIELDS}
    assert all(p["key"] not in known for p in problems), "validation refused what the profile took"
    if profile.pod_spec_type != "remote":
        pod = render_pod_template(profile)
        instantiate(pod, "abcde12345", "fghij67890")


@fuzz_settings(300)
@given(FIELD_TEXT, st.sampled_from([0.001, 1.0, 60.0]))
def test_durations_parse_or_explain_and_format_back(text: str, bare_unit: float) -> None:
    try:
        seconds = parse_duration(text, bare_unit)
    except ValueError as error:
        assert str(error).strip()
        return
    assert seconds >= 0
    spelled = format_duration(seconds)
    assert spelled and parse_duration(spelled, 1.0) == pytest.approx(seconds, rel=1e-9)


@fuzz_settings(300)
@given(FIELD_TEXT)
def test_memory_and_cpu_parse_or_explain_and_the_quantity_means_the_same(text: str) -> None:
    try:
        memory = parse_memory(text)
    except ValueError as error:
        assert str(error).strip() and "int_max_str_digits" not in str(error)
    else:
        assert memory.bytes > 0 and parse_memory(memory.quantity) == memory
    try:
        cpu = parse_cpu(text)
    except ValueError as error:
        assert str(error).strip()
    else:
        assert cpu.millicores > 0 and parse_cpu(cpu.quantity) == cpu


def template_texts() -> st.SearchStrategy[str]:
    """Pod templates: the valid one with a line changed, any text, and JSON documents."""
    lines = POD_TEMPLATE.splitlines()
    edited = st.builds(
        lambda index, text: "\n".join([*lines[:index], text, *lines[index + 1 :]]),
        st.integers(min_value=0, max_value=len(lines) - 1),
        st.one_of(FIELD_TEXT, st.sampled_from(["  x: .nan", "  y: .inf", "- &a [*a]", "!!python/none"])),
    )
    as_json = JSON.map(json.dumps)
    return st.one_of(edited, edited, st.text(max_size=200), as_json)


@fuzz_settings(300)
@given(template_texts(), st.sampled_from(["auto", "yaml", "json"]))
def test_pod_templates_parse_into_plain_data_or_explain(text: str, file_type: str) -> None:
    try:
        pod = parse_pod_template(text, file_type)
    except TemplateError as error:
        assert str(error).strip()
        return
    assert isinstance(pod, dict)
    instantiate(pod, "abcde12345", "fghij67890")


@fuzz_settings(300)
@given(REPLACEMENT, st.sampled_from(["json", "yaml"]))
def test_a_pod_template_that_parses_is_plain_json_a_fingerprint_and_kubernetes_can_take(
    value: Any, written_as: str
) -> None:
    container = {"name": "agent-{{ CONTAINER_POSTFIX }}", "image": "gocd/agent:v1", "extra": value}
    document = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container]}}
    try:
        text = json.dumps(document) if written_as == "json" else yaml.safe_dump(document)
    except RecursionError:  # PyYAML's writer cannot write what is nested hundreds deep
        reject()
    try:
        pod = parse_pod_template(text)
    except TemplateError as error:
        assert str(error).strip()
        return
    json.dumps(pod, allow_nan=False)
    fingerprint(FingerprintInputs(pod, "https://k\nci", "https://gocd.example.test/go", None, None))


# Regression tests, one per defect the properties above found.


def test_a_count_of_five_thousand_digits_is_out_of_range_in_our_words_not_pythons() -> None:
    problems = validate_cluster_profile({**VALID_CLUSTER, "pending_pods_count": "9" * 5000})
    assert problems == [
        {
            "key": "pending_pods_count",
            "message": "the number is out of range: write a number from 1 to 1000000",
        }
    ]


def test_a_duration_of_hundreds_of_digits_is_refused_not_read_as_infinity() -> None:
    with pytest.raises(ValueError, match="too long: the longest duration is 3650d"):
        parse_duration("9" * 400 + "s")
    assert validate_cluster_profile({**VALID_CLUSTER, "idle_timeout": "9" * 400})[0]["key"] == "idle_timeout"
    assert parse_duration("3650d") == 3650 * 86400


def test_a_duration_shown_keeps_its_milliseconds() -> None:
    assert format_duration(1000.001) == "1000.001s"


def test_memory_and_cpu_beyond_what_kubernetes_can_express_are_refused_with_a_sentence() -> None:
    with pytest.raises(ValueError, match="more memory than Kubernetes can express"):
        parse_memory("9" * 5000)
    with pytest.raises(ValueError, match="more CPU than Kubernetes can express"):
        parse_cpu("9" * 5000)
    assert parse_memory("1048575Ti").bytes == 1048575 * 1024**4


def test_a_pod_template_holding_a_number_too_long_to_read_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="a number in it is too long"):
        parse_pod_template(POD_TEMPLATE + "    terminationGracePeriodSeconds: " + "9" * 5000 + "\n")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_pod_template_holding_nan_or_infinity_is_refused_by_validation(value: str) -> None:
    template = POD_TEMPLATE.replace('value: "1"', f"value: {value}")
    problems = validate_elastic_profile({**VALID_YAML_ELASTIC, "PodConfiguration": template})
    assert problems == [
        {
            "key": "PodConfiguration",
            "message": "the value at spec.containers[0].env[0].value is not a finite number",
        }
    ]
