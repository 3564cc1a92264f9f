"""Property-based tests of every request parser (elastic_agent/gocd/messages.py, body.py): any body, and
any valid body changed in one place, parses or raises BadRequest with a sentence; nothing else escapes.
And should-assign-work's fast path (exact types only) never disagrees with the checked path."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_agent.gocd.body import BadRequest, Body
from elastic_agent.gocd.messages import (
    AgentStatusReportRequest,
    ClusterProfileChangedRequest,
    ClusterStatusReportRequest,
    CreateAgentRequest,
    JobCompletionRequest,
    JobIdentifier,
    MigrateConfigRequest,
    PluginStatusReportRequest,
    ServerPingRequest,
    ShouldAssignWorkRequest,
    ValidateProfileRequest,
)
from tests.support.fuzz_strategies import ANY_VALUE, REPLACEMENT, fuzz_settings, mutated

CLUSTER = {"go_server_url": "https://gocd.example.test/go", "namespace": "ci", "security_token": "t"}
ELASTIC = {"Image": "gocd/agent:v1", "PodSpecType": "properties"}
JOB = {
    "pipeline_name": "build",
    "pipeline_label": "7",
    "pipeline_counter": 7,
    "stage_name": "test",
    "stage_counter": "1",
    "job_name": "unit",
    "job_id": 42,
}
AGENT = {"agent_id": "k8s-ea-1", "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}

# Each parser, with a body it accepts.
PARSERS: dict[str, tuple[Callable[[str], object], dict[str, Any]]] = {
    "create-agent": (
        CreateAgentRequest.parse,
        {
            "auto_register_key": "key",
            "elastic_agent_profile_properties": ELASTIC,
            "cluster_profile_properties": CLUSTER,
            "environment": "prod",
            "job_identifier": JOB,
        },
    ),
    "should-assign-work": (
        ShouldAssignWorkRequest.parse_uncached,
        {
            "agent": AGENT,
            "environment": "prod",
            "elastic_agent_profile_properties": ELASTIC,
            "cluster_profile_properties": CLUSTER,
            "job_identifier": JOB,
        },
    ),
    "job-completion": (
        JobCompletionRequest.parse,
        {
            "elastic_agent_id": "k8s-ea-1",
            "elastic_agent_profile_properties": ELASTIC,
            "cluster_profile_properties": CLUSTER,
            "job_identifier": JOB,
        },
    ),
    "server-ping": (ServerPingRequest.parse, {"all_cluster_profile_properties": [CLUSTER, CLUSTER]}),
    "agent-status-report": (
        AgentStatusReportRequest.parse,
        {"cluster_profile_properties": CLUSTER, "elastic_agent_id": "k8s-ea-1", "job_identifier": JOB},
    ),
    "cluster-status-report": (ClusterStatusReportRequest.parse, {"cluster_profile_properties": CLUSTER}),
    "plugin-status-report": (PluginStatusReportRequest.parse, {"all_cluster_profiles_properties": [CLUSTER]}),
    "cluster-profile-changed": (ClusterProfileChangedRequest.parse, {"status": "updated"}),
    "validate-cluster-profile": (
        lambda text: ValidateProfileRequest.parse(text, "validate-cluster-profile"),
        CLUSTER,
    ),
    "migrate-config": (
        MigrateConfigRequest.parse,
        {
            "plugin_settings": {},
            "cluster_profiles": [{"id": "c", "plugin_id": "p", "properties": CLUSTER}],
            "elastic_agent_profiles": [{"id": "e", "cluster_profile_id": "c", "properties": ELASTIC}],
        },
    ),
}


def body_text(value: Any) -> st.SearchStrategy[str]:
    """The JSON text of a value, and sometimes text that is no JSON at all."""
    return st.one_of(st.just(json.dumps(value)), st.just(json.dumps(value)), st.text(max_size=40))


def parses_or_explains(parse: Callable[[str], object], text: str) -> None:
    try:
        parse(text)
    except BadRequest as error:
        message = str(error)
        assert message[:1].isalpha() and message.endswith("."), message


@pytest.mark.parametrize("name", sorted(PARSERS))
@fuzz_settings(200)
@given(data=st.data())
def test_every_request_body_parses_or_is_refused_with_a_sentence(name: str, data: st.DataObject) -> None:
    parse, valid = PARSERS[name]
    parse(json.dumps(valid))  # the template itself is accepted
    value = data.draw(mutated(valid), label="body")
    parses_or_explains(parse, data.draw(body_text(value), label="text"))


@fuzz_settings(300)
@given(mutated({"job": JOB}))
def test_a_job_identifier_parses_or_is_refused_and_both_readings_agree(value: Any) -> None:
    job = value.get("job") if isinstance(value, dict) else value
    fast = JobIdentifier.well_formed(job)
    try:
        checked = JobIdentifier.parse(Body(job, "test")) if isinstance(job, dict) else None
    except BadRequest:
        checked = None
    if fast is not None:
        assert checked == fast, "the fast path read a job identifier differently from the checked one"


@fuzz_settings(300)
@given(PARSERS["should-assign-work"][1] and mutated(PARSERS["should-assign-work"][1]))
def test_should_assign_work_fast_path_agrees_with_the_checked_path(value: Any) -> None:
    """The fast path answers most requests; it may decline (None) but never read a body otherwise."""
    if not isinstance(value, dict):
        return
    fast = ShouldAssignWorkRequest.well_formed(value)
    if fast is None:
        return
    checked = ShouldAssignWorkRequest.checked(Body(value, "should-assign-work"))
    assert fast == checked


@fuzz_settings(300)
@given(st.dictionaries(st.text(max_size=8), ANY_VALUE, max_size=4), REPLACEMENT, st.text(max_size=8))
def test_body_accessors_return_their_type_or_explain(data: dict[str, Any], value: Any, key: str) -> None:
    body = Body({**data, "k": value}, "test")
    for accessor in (
        body.string,
        body.optional_string,
        body.integer,
        body.object,
        body.optional_object,
        body.list_of_objects,
        body.properties,
        body.properties_list,
    ):
        for name in (key, "k"):
            try:
                accessor(name)
            except BadRequest as error:
                assert str(error).startswith("test") and str(error).endswith("."), str(error)


# Regression tests, one per defect the properties above found.


@pytest.mark.parametrize("value", ["--1", "²", "9" * 5000, "9" * 20, 2**63, -(2**63) - 1])
def test_a_counter_that_is_no_java_long_is_a_bad_request_not_a_crash(value: object) -> None:
    with pytest.raises(BadRequest, match="'job_id' must be a whole number"):
        Body({"job_id": value}, "test").integer("job_id")


def test_the_largest_and_smallest_java_longs_are_counters() -> None:
    assert Body({"a": str(2**63 - 1), "b": -(2**63)}, "t").integer("a") == 2**63 - 1
    assert Body({"b": -(2**63)}, "t").integer("b") == -(2**63)


def test_a_stage_counter_of_five_thousand_digits_is_left_to_the_checked_path() -> None:
    assert JobIdentifier.well_formed({**JOB, "stage_counter": "9" * 5000}) is None
    text = json.dumps(
        {**PARSERS["should-assign-work"][1], "job_identifier": {**JOB, "stage_counter": "9" * 5000}}
    )
    with pytest.raises(BadRequest, match="'stage_counter' must be a whole number of at most 19 digits"):
        ShouldAssignWorkRequest.parse_uncached(text)
