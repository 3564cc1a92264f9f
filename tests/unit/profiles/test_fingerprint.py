"""The reuse fingerprint: stable, versioned, and made of exactly what makes pods interchangeable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.pool.job_spec import JobSpecs
from profiles.cluster import ClusterProfile
from profiles.fingerprint import FingerprintInputs, fingerprint, label_form, version_of

TEMPLATE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "k8s-ea-{{POD_POSTFIX}}"},
    "spec": {"containers": [{"name": "agent-{{CONTAINER_POSTFIX}}", "image": "gocd/agent:v1", "env": []}]},
}
INPUTS = FingerprintInputs(
    TEMPLATE, "https://k8s.example.com\ngocd", "https://ci.example.com/go", "prod", None
)

# Pinned: if this changes, every running pod of every installation stops being reused after an upgrade.
# Cross-checked outside Python: `printf '%s\n%s' HEADER CANONICAL | sha256sum` gives the same digest.
PINNED = "v1:f857e53c15343f8480f8d0bff0ade98fdda16ebb9b2eda32bac25b670789c1dd"
CANONICAL = (
    'gocd-elastic-agent-reuse-fingerprint/v1\n{"cluster":"https://k8s.example.com\\ngocd","environment":"prod",'
    '"pipeline":null,"pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"k8s-ea-{{POD_POSTFIX}}"},'
    '"spec":{"containers":[{"env":[],"image":"gocd/agent:v1","name":"agent-{{CONTAINER_POSTFIX}}"}]}},'
    '"server":"https://ci.example.com/go"}'
)


def test_the_fingerprint_of_a_known_input_is_pinned() -> None:
    assert INPUTS.canonical().decode() == CANONICAL
    assert fingerprint(INPUTS) == PINNED


def test_the_fingerprint_is_the_same_in_a_fresh_interpreter_with_another_hash_seed() -> None:
    code = (
        "from profiles.fingerprint import FingerprintInputs, fingerprint;"
        f"print(fingerprint(FingerprintInputs({TEMPLATE!r}, {INPUTS.cluster_key!r}, {INPUTS.go_server_url!r},"
        " 'prod', None)))"
    )
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        )
        assert out.stdout.strip() == PINNED


def test_key_order_of_the_template_does_not_matter() -> None:
    reordered = {
        "spec": TEMPLATE["spec"],
        "metadata": TEMPLATE["metadata"],
        "kind": "Pod",
        "apiVersion": "v1",
    }
    assert fingerprint(FingerprintInputs(reordered, *_rest())) == PINNED


def _rest() -> tuple[str, str, str | None, str | None]:
    return INPUTS.cluster_key, INPUTS.go_server_url, INPUTS.environment, INPUTS.pipeline


@pytest.mark.parametrize(
    "changed",
    [
        FingerprintInputs(
            {**TEMPLATE, "kind": "Pod", "metadata": {"name": "other-{{POD_POSTFIX}}"}}, *_rest()
        ),
        FingerprintInputs(
            TEMPLATE, "https://k8s.example.com\nother-namespace", INPUTS.go_server_url, "prod", None
        ),
        FingerprintInputs(TEMPLATE, INPUTS.cluster_key, "https://other.example.com/go", "prod", None),
        FingerprintInputs(TEMPLATE, INPUTS.cluster_key, INPUTS.go_server_url, "staging", None),
        FingerprintInputs(TEMPLATE, INPUTS.cluster_key, INPUTS.go_server_url, None, None),
        FingerprintInputs(TEMPLATE, INPUTS.cluster_key, INPUTS.go_server_url, "prod", "my-pipeline"),
    ],
)
def test_what_makes_pods_different_changes_the_fingerprint(changed: FingerprintInputs) -> None:
    assert fingerprint(changed) != PINNED


def test_label_form_is_a_valid_short_label_value_with_the_version() -> None:
    short = label_form(PINNED)
    assert short == "v1-" + PINNED[3:23]
    assert len(short) <= 63 and version_of(PINNED) == "v1"


def specs() -> JobSpecs:
    return JobSpecs(ManualClock(), lambda url: "")


CLUSTER = ClusterProfile.from_properties(
    {"go_server_url": "https://ci.example.com/go", "kubernetes_cluster_url": "https://k8s.example.com"}
)


def test_reuse_knobs_credentials_and_the_job_do_not_change_the_fingerprint() -> None:
    base = {"Image": "gocd/agent:v1", "Reuse": "true"}
    reference = specs().spec(base, CLUSTER, "prod", "pipeline-a").fingerprint
    knobs = {**base, "MaxJobsPerPod": "5", "IdleTimeout": "3m", "MinIdlePods": "2"}
    assert specs().spec(knobs, CLUSTER, "prod", "pipeline-a").fingerprint == reference
    other_pipeline = specs().spec(base, CLUSTER, "prod", "pipeline-b").fingerprint
    assert other_pipeline == reference, "without ReuseScope=pipeline the pipeline is not part of it"
    with_token = ClusterProfile.from_properties(
        {
            "go_server_url": "https://ci.example.com/go",
            "kubernetes_cluster_url": "https://k8s.example.com",
            "security_token": "another-token",
            "pending_pods_count": "3",
            "idle_timeout": "20m",
        }
    )
    assert specs().spec(base, with_token, "prod", "pipeline-a").fingerprint == reference


def test_the_pod_the_profile_renders_and_the_pipeline_scope_change_the_fingerprint() -> None:
    base = {"Image": "gocd/agent:v1", "Reuse": "true"}
    reference = specs().spec(base, CLUSTER, "prod", "a").fingerprint
    assert specs().spec({**base, "MaxMemory": "1Gi"}, CLUSTER, "prod", "a").fingerprint != reference
    assert specs().spec({**base, "Environment": "A=1"}, CLUSTER, "prod", "a").fingerprint != reference
    scoped = {**base, "ReuseScope": "pipeline"}
    assert (
        specs().spec(scoped, CLUSTER, "prod", "a").fingerprint
        != specs().spec(scoped, CLUSTER, "prod", "b").fingerprint
    )
