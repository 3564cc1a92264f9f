"""Metadata and AngularJS views: generated from the same field tables as validation."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import pytest

from profiles import (
    cluster_profile_metadata,
    cluster_profile_view,
    elastic_profile_metadata,
    elastic_profile_view,
    validate_cluster_profile,
    validate_elastic_profile,
)
from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS, Field

KINDS = [
    pytest.param(CLUSTER_FIELDS, cluster_profile_metadata, cluster_profile_view, id="cluster"),
    pytest.param(ELASTIC_FIELDS, elastic_profile_metadata, elastic_profile_view, id="elastic"),
]

CLUSTER_KEYS = {
    "go_server_url",
    "kubernetes_cluster_url",
    "namespace",
    "security_token",
    "kubernetes_cluster_ca_cert",
    "cluster_request_timeout",
    "auto_register_timeout",
    "auto_register_key_expiry",
    "pending_pods_count",
    "idle_timeout",
    "max_pods",
    "max_pod_lifetime",
}
ELASTIC_KEYS = {
    "Image",
    "MaxMemory",
    "MaxCPU",
    "Environment",
    "Privileged",
    "PodSpecType",
    "PodConfiguration",
    "RemoteFile",
    "RemoteFileType",
    "SpecifiedUsingPodConfiguration",
    "Reuse",
    "MaxJobsPerPod",
    "IdleTimeout",
    "MinIdlePods",
    "ReuseScope",
    "ReuseSchedule",
    "Predict",
}


class _Inputs(HTMLParser):
    """Collects ng-model bindings of form controls, and checks the markup is well nested."""

    VOID = {"input", "br", "img", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        model = dict(attrs).get("ng-model")
        if model is not None:
            assert tag in ("input", "textarea", "select"), tag
            self.models.append(model)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack.pop() == tag, f"unbalanced </{tag}>"


def parsed(view: str) -> _Inputs:
    parser = _Inputs()
    parser.feed(view)
    parser.close()
    assert parser.stack == []
    return parser


def test_the_tables_hold_exactly_the_documented_keys() -> None:
    assert {f.key for f in CLUSTER_FIELDS} == CLUSTER_KEYS
    assert {f.key for f in ELASTIC_FIELDS} == ELASTIC_KEYS


@pytest.mark.parametrize(("fields", "metadata", "view"), KINDS)
def test_metadata_keys_are_the_field_keys_in_order(
    fields: tuple[Field, ...], metadata: Callable[[], list[dict[str, Any]]], view: Callable[[], str]
) -> None:
    answer = metadata()
    assert [item["key"] for item in answer] == [f.key for f in fields]
    for item in answer:
        assert set(item) == {"key", "metadata"}
        assert set(item["metadata"]) == {"required", "secure"}
        assert all(isinstance(v, bool) for v in item["metadata"].values())


@pytest.mark.parametrize(("fields", "metadata", "view"), KINDS)
def test_every_key_has_exactly_one_input_and_one_error_span(
    fields: tuple[Field, ...], metadata: Callable[[], list[dict[str, Any]]], view: Callable[[], str]
) -> None:
    html = view()
    assert sorted(parsed(html).models) == sorted(f.key for f in fields)
    for field in fields:
        span = (
            f'<span class="form_error" ng-show="GOINPUTNAME[{field.key}].$error.server">'
            f"{{{{GOINPUTNAME[{field.key}].$error.server}}}}</span>"
        )
        assert html.count(span) == 1, field.key
    assert html.count('class="form_error"') == len(fields)


@pytest.mark.parametrize(("fields", "metadata", "view"), KINDS)
def test_angular_expressions_only_appear_in_error_spans(
    fields: tuple[Field, ...], metadata: Callable[[], list[dict[str, Any]]], view: Callable[[], str]
) -> None:
    html = view()
    # Help texts mention {{ POD_POSTFIX }}; they must be shown literally, not evaluated by AngularJS.
    for block in html.split('<div class="form_item_block"')[1:]:
        help_start = block.index('<span class="form_help" ng-non-bindable>')
        before_help = block[:help_start]
        assert re.findall(r"\{\{(.*?)\}\}", before_help) == [
            re.search(r"\{\{(.*?)\}\}", before_help).group(1)
        ]  # type: ignore[union-attr]


def test_secure_fields_are_the_two_cluster_secrets() -> None:
    secure = {item["key"] for item in cluster_profile_metadata() if item["metadata"]["secure"]}
    assert secure == {"security_token", "kubernetes_cluster_ca_cert"}
    assert not any(item["metadata"]["secure"] for item in elastic_profile_metadata())
    assert 'type="password" ng-model="security_token"' in cluster_profile_view()


def test_required_metadata_matches_what_validation_always_needs() -> None:
    # Nothing: a blank go_server_url is GoCD's secure site URL, as in the official plugin, so it gets no
    # star (the official plugin's metadata says required but its validation accepts a blank).
    required = {item["key"] for item in cluster_profile_metadata() if item["metadata"]["required"]}
    assert required == {p["key"] for p in validate_cluster_profile({})} == set()
    # Elastic requirements depend on PodSpecType, so none carries GoCD's star; validation decides.
    assert not any(item["metadata"]["required"] for item in elastic_profile_metadata())
    assert validate_elastic_profile({}) != []


def test_selects_offer_every_accepted_choice() -> None:
    html = elastic_profile_view()
    for key, options in (
        ("PodSpecType", ("properties", "yaml", "remote")),
        ("RemoteFileType", ("json", "yaml")),
        ("ReuseScope", ("profile", "pipeline")),
        ("Reuse", ("true", "false")),
    ):
        select = re.search(rf'<select ng-model="{key}">(.*?)</select>', html)
        assert select is not None, key
        assert re.findall(r'value="([^"]*)"', select.group(1)) == list(options)
        for option in options:
            answer = validate_elastic_profile({"Image": "x", "Reuse": "true", key: option})
            assert key not in {p["key"] for p in answer}, (key, option)


def test_mode_specific_fields_are_shown_only_in_their_mode() -> None:
    html = elastic_profile_view()
    block = html[html.index('ng-model="PodConfiguration"') - 300 : html.index('ng-model="PodConfiguration"')]
    assert "PodSpecType == &#x27;yaml&#x27;" in block


def test_help_and_labels_are_escaped() -> None:
    html = elastic_profile_view() + cluster_profile_view()
    text_only = re.sub(r"<[^>]+>", "", html)
    assert "<" not in text_only and ">" not in text_only
