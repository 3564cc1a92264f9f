"""The job specs' cache: a remote pod template is fetched again after JobSpecs.TTL_S (it may change
behind its URL), other properties make another spec at once, and a profile that does not parse is
refused with its message every time (its parse is not kept)."""

from __future__ import annotations

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.pool.job_spec import JobSpecs
from profiles.cluster import ClusterProfile
from profiles.errors import ProfileError

CLUSTER = ClusterProfile.from_properties(
    {"go_server_url": "https://ci.example.com/go", "kubernetes_cluster_url": "https://k8s.example.com"}
)
REMOTE = {"PodSpecType": "remote", "RemoteFile": "https://templates.example.test/agent.yaml", "Reuse": "true"}
INLINE = {"Image": "gocd/agent:v1", "Reuse": "true", "IdleTimeout": "10m"}


def template(image: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: agent-{{POD_POSTFIX}}\nspec:\n  containers:\n"
        f"  - name: agent\n    image: {image}\n"
    )


def test_a_remote_template_changed_behind_its_url_is_taken_once_the_spec_expires() -> None:
    clock = ManualClock(1000.0)
    served = {"image": "gocd/agent:v1"}
    specs = JobSpecs(clock, lambda url, wait=True: template(served["image"]))
    before = specs.spec(REMOTE, CLUSTER, "prod", "build")
    served["image"] = "gocd/agent:v2"
    clock.advance(JobSpecs.TTL_S - 1)
    assert specs.spec(REMOTE, CLUSTER, "prod", "build").fingerprint == before.fingerprint
    clock.advance(2)
    after = specs.spec(REMOTE, CLUSTER, "prod", "build")
    assert after.fingerprint != before.fingerprint
    assert after.template["spec"]["containers"][0]["image"] == "gocd/agent:v2"


def test_changed_properties_make_a_new_spec_however_recent_the_old_one() -> None:
    specs = JobSpecs(ManualClock(1000.0), lambda url, wait=True: "")
    first = specs.spec(INLINE, CLUSTER, "prod", "build")
    changed = specs.spec({**INLINE, "IdleTimeout": "30m", "MaxMemory": "1Gi"}, CLUSTER, "prod", "build")
    assert changed.idle_timeout == 1800.0
    assert changed.fingerprint != first.fingerprint
    assert specs.spec(dict(INLINE), CLUSTER, "prod", "build") is first


def test_a_profile_that_does_not_parse_is_refused_with_its_message_at_every_request() -> None:
    specs = JobSpecs(ManualClock(1000.0), lambda url, wait=True: "")
    bad = {"Image": "gocd/agent:v1", "IdleTimeout": "soon"}
    for _ in range(2):
        with pytest.raises(ProfileError) as refused:
            specs.spec(bad, CLUSTER, "prod", "build")
        assert "IdleTimeout" in str(refused.value)
    assert len(specs) == 0
