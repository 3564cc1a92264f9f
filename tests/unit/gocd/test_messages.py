"""Request bodies are parsed in one place; bad ones get a sentence, never an exception escaping."""

import json
import tracemalloc

import pytest

from elastic_agent.gocd.messages import (
    AgentStatusReportRequest,
    BadRequest,
    Body,
    CreateAgentRequest,
    JobCompletionRequest,
    ServerPingRequest,
    ShouldAssignWorkRequest,
)

JOB = {
    "pipeline_name": "build",
    "pipeline_label": "12",
    "pipeline_counter": 12,
    "stage_name": "test",
    "stage_counter": "1",
    "job_name": "unit",
    "job_id": 4711,
}


def create_body(**changes: object) -> str:
    body = {
        "auto_register_key": "key-secret",
        "elastic_agent_profile_properties": {"Image": "gocd/agent"},
        "cluster_profile_properties": {"go_server_url": "https://ci.example.com/go"},
        "job_identifier": JOB,
    }
    body.update(changes)
    return json.dumps(body)


def test_create_agent_without_environment_key_means_no_environment() -> None:
    request = CreateAgentRequest.parse(create_body())
    assert request.environment is None
    assert request.job.job_id == 4711
    assert request.job.stage_counter == "1"


def test_create_agent_repr_never_shows_the_registration_key() -> None:
    request = CreateAgentRequest.parse(create_body())
    assert "key-secret" not in repr(request)
    assert "gocd/agent" not in repr(request)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "body is empty"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not a list"),
        (create_body(job_identifier="x"), "'job_identifier' must be an object, not a string"),
        (create_body(auto_register_key=5), "'auto_register_key' must be a string, not a number"),
        (create_body(job_identifier={**JOB, "job_id": "abc"}), "'job_id' must be a whole number"),
        (create_body(job_identifier={**JOB, "job_id": True}), "'job_id' must be a whole number"),
        (create_body(cluster_profile_properties={"namespace": {"a": 1}}), "'namespace' must be a string"),
    ],
)
def test_bad_create_agent_bodies_are_explained(text: str, expected: str) -> None:
    with pytest.raises(BadRequest, match=expected):
        CreateAgentRequest.parse(text)


def test_missing_field_is_named() -> None:
    body = json.loads(create_body())
    del body["job_identifier"]["job_name"]
    with pytest.raises(BadRequest, match="'job_name' is missing"):
        CreateAgentRequest.parse(json.dumps(body))


def test_null_property_values_are_dropped() -> None:
    request = CreateAgentRequest.parse(create_body(cluster_profile_properties={"namespace": None, "x": "y"}))
    assert request.cluster_profile == {"x": "y"}


def test_should_assign_work_reads_agent_states() -> None:
    request = ShouldAssignWorkRequest.parse(json.dumps(should_assign_body()))
    assert request.agent.agent_id == "pod-1"
    assert request.environment == "prod"
    assert not request.agent.building
    building = should_assign_body(agent=dict(IDLE_AGENT, agent_state="Building"))
    assert ShouldAssignWorkRequest.parse(json.dumps(building)).agent.building


def test_job_completion_needs_the_agent_id() -> None:
    body = {"elastic_agent_profile_properties": {}, "cluster_profile_properties": {}, "job_identifier": JOB}
    with pytest.raises(BadRequest, match="'elastic_agent_id' is missing"):
        JobCompletionRequest.parse(json.dumps(body))


def test_server_ping_needs_a_list_of_cluster_profiles() -> None:
    with pytest.raises(BadRequest, match="list of objects"):
        ServerPingRequest.parse(json.dumps({"all_cluster_profile_properties": {"a": "b"}}))
    assert ServerPingRequest.parse(
        json.dumps({"all_cluster_profile_properties": [{"a": "b"}]})
    ).cluster_profiles


def test_agent_status_report_needs_an_agent_or_a_job() -> None:
    with pytest.raises(BadRequest, match="elastic_agent_id"):
        AgentStatusReportRequest.parse(json.dumps({"cluster_profile_properties": {}}))
    request = AgentStatusReportRequest.parse(
        json.dumps({"cluster_profile_properties": {}, "job_identifier": JOB})
    )
    assert request.job is not None and request.agent_id is None


IDLE_AGENT = {"agent_id": "pod-1", "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}


def should_assign_body(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "agent": dict(IDLE_AGENT),
        "environment": "prod",
        "elastic_agent_profile_properties": {"Image": "gocd/agent", "Reuse": "true"},
        "cluster_profile_properties": {"go_server_url": "https://ci.example.com/go"},
        "job_identifier": dict(JOB),
    }
    body.update(changes)
    return body


LOOSE_BUT_VALID = {
    "exact": should_assign_body(),
    "no environment key": {k: v for k, v in should_assign_body().items() if k != "environment"},
    "empty environment": should_assign_body(environment=""),
    "null property dropped": should_assign_body(cluster_profile_properties={"namespace": None, "x": "y"}),
    "number property": should_assign_body(elastic_agent_profile_properties={"MaxJobsPerPod": 5}),
    "stage counter as number": should_assign_body(job_identifier=dict(JOB, stage_counter=2)),
    "stage counter with leading zero": should_assign_body(job_identifier=dict(JOB, stage_counter="02")),
    "pipeline counter as text": should_assign_body(job_identifier=dict(JOB, pipeline_counter="12")),
    "no pipeline label": should_assign_body(
        job_identifier={k: v for k, v in JOB.items() if k != "pipeline_label"}
    ),
    "empty agent state": should_assign_body(
        agent={"agent_id": "pod-1", "agent_state": "", "build_state": None, "config_state": "Enabled"}
    ),
}


@pytest.mark.parametrize("body", LOOSE_BUT_VALID.values(), ids=LOOSE_BUT_VALID.keys())
def test_should_assign_work_fast_path_reads_what_the_checked_path_reads(body: dict[str, object]) -> None:
    text = json.dumps(body)
    checked = ShouldAssignWorkRequest.checked(Body.parse(text, "should-assign-work"))
    assert ShouldAssignWorkRequest.parse(text) == checked
    assert ShouldAssignWorkRequest.parse_uncached(text) == checked


def test_should_assign_work_fast_path_accepts_only_exact_types() -> None:
    assert ShouldAssignWorkRequest.well_formed(should_assign_body()) is not None
    for loose in ("number property", "stage counter as number", "empty agent state", "null property dropped"):
        assert ShouldAssignWorkRequest.well_formed(LOOSE_BUT_VALID[loose]) is None, loose


def test_repeated_should_assign_work_body_is_parsed_once_and_bad_bodies_still_fail() -> None:
    text = json.dumps(should_assign_body(job_identifier=dict(JOB, job_id=987654)))
    assert ShouldAssignWorkRequest.parse(text) is ShouldAssignWorkRequest.parse(text)
    bad = json.dumps(should_assign_body(job_identifier=dict(JOB, job_id="soon")))
    for _ in range(2):
        with pytest.raises(BadRequest, match="job_id"):
            ShouldAssignWorkRequest.parse(bad)


CA = "-----BEGIN CERTIFICATE-----\n" + "QUJD" * 500 + "\n-----END CERTIFICATE-----\n"  # 2 KiB, like a real CA


def job_body(cluster: dict[str, str], job_id: int) -> str:
    body = should_assign_body(cluster_profile_properties=cluster, job_identifier=dict(JOB, job_id=job_id))
    return json.dumps(body)


def test_cached_should_assign_work_requests_share_their_profile_maps_across_jobs() -> None:
    cluster = {"go_server_url": "https://ci.example.com/go", "kubernetes_cluster_ca_cert": CA}
    first, second = (ShouldAssignWorkRequest.parse(job_body(cluster, n)) for n in (5001, 5002))
    assert first is not second
    assert first.cluster_profile is second.cluster_profile and first.cluster_profile == cluster
    assert first.elastic_profile is second.elastic_profile
    other = ShouldAssignWorkRequest.parse(
        json.dumps(should_assign_body(cluster_profile_properties=dict(cluster, namespace="other")))
    )
    assert other.cluster_profile is not first.cluster_profile
    assert other.cluster_profile["namespace"] == "other"
    assert first.cluster is second.cluster and other.cluster.namespace == "other"


def test_a_thousand_cached_requests_keep_one_copy_of_their_cluster_profile() -> None:
    cluster = {"go_server_url": "https://ci.example.com/go", "kubernetes_cluster_ca_cert": CA}
    texts = [job_body(cluster, n) for n in range(100_000, 101_000)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        kept = [ShouldAssignWorkRequest.parse(text) for text in texts]
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len({id(request.cluster_profile) for request in kept}) == 1
    # A copy of the 2 KiB certificate per request would alone take 2 MB for these 1,000; shared maps stay
    # well under it (benchmarks/RESULTS.md section 8 has the figures).
    assert after - before < 2_000_000, after - before
