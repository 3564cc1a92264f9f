"""Which jobs can share a pod, under each ReuseScope: the reuse security model of docs/security.md ("What a
reused pod shares") and docs/install.md, in virtual time through the real decisions (the in-process
backend, the simulated GoCD server and cluster). A pod is shared by jobs whose fingerprints are equal
(profiles/fingerprint.py): the pod their profiles render, the cluster, the GoCD server, the GoCD
environment and, with ReuseScope=pipeline, the pipeline. Requests carry an elastic profile's
properties, never its name, so two profiles that render the same pod are one fingerprint."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from elastic_agent.simulation.gocd_model import Job
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule, state
from tests.support.virtual_helpers import completed, virtual_stack

SCOPES = ("profile", "pipeline")


Spec = dict[str, Any]  # `profile` (beyond Reuse and ReuseScope), `cluster`, `pipeline`, `environment`
ONE_JOB = {"profile": {"MaxJobsPerPod": "1"}}


def run_then(stack: VirtualStack, first: Spec, second: Spec, scope: str) -> tuple[Job, Job]:
    """The first job runs to its end and its pod settles (idle, or gone when it retires); then the second
    is scheduled."""

    def job(spec: Spec, name: str) -> Job:
        profile = reuse_profile(stack, ReuseScope=scope, **spec.get("profile", {}))
        cluster = stack.cluster_profile(**spec.get("cluster", {}))
        return schedule(stack, profile, cluster=cluster, pipeline=spec.get("pipeline", "alpha"),
                        environment=spec.get("environment", "A"), name=name)  # fmt: skip

    done = completed(stack, job(first, "first"))
    pod = done.agent_id or ""
    settled = lambda: state(stack, pod) == "idle" or pod not in pod_names(stack)  # noqa: E731
    stack.run_until(settled, 120, "the pod settled")
    return done, completed(stack, job(second, "second"))


def shares(first: Spec, second: Spec, scope: str) -> bool:
    done, then = run_then(virtual_stack(boot_delay=5), first, second, scope)
    return then.agent_id == done.agent_id


CASES: dict[str, tuple[Spec, Spec, bool, bool]] = {
    # what differs between two jobs: (first, second, shares under ReuseScope=profile, under =pipeline)
    "nothing: the same pipeline, profile and environment": ({}, {}, True, True),
    "the pipeline": ({}, {"pipeline": "beta"}, True, False),
    "the GoCD environment": ({}, {"environment": "B"}, False, False),
    "the profile, whose pod differs (an Environment line)": (
        {"profile": {"Environment": "TRUST=builds"}},
        {"profile": {"Environment": "TRUST=releases"}},
        False,
        False,
    ),
    "the profile, whose pod differs (the image)": (
        {},
        {"profile": {"Image": "registry.example.test/release-agent:v1"}},
        False,
        False,
    ),
    "the cluster profile's namespace": ({}, {"cluster": {"namespace": "ci-releases"}}, False, False),
    "the pipeline, with MaxJobsPerPod=1": (ONE_JOB, {**ONE_JOB, "pipeline": "beta"}, False, False),
    "nothing, with MaxJobsPerPod=1": (ONE_JOB, ONE_JOB, False, False),
}


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("case", list(CASES))
def test_which_jobs_share_a_pod_under_each_reuse_scope(case: str, scope: str) -> None:
    first, second, under_profile, under_pipeline = CASES[case]
    expected = under_profile if scope == "profile" else under_pipeline
    assert shares(first, second, scope) is expected, f"{case}, ReuseScope={scope}"


@pytest.mark.parametrize("scope", SCOPES)
def test_profiles_that_render_the_same_pod_share_it_whatever_else_they_set(scope: str) -> None:
    # Two elastic profiles that differ only in reuse knobs (or only in their names, which GoCD never
    # sends) are one fingerprint: their jobs share pods.
    assert shares({}, {"profile": {"IdleTimeout": "20m", "MinIdlePods": "0"}}, scope)


def test_max_jobs_per_pod_one_gives_every_job_a_pod_of_its_own() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack, MaxJobsPerPod="1")
    jobs = [schedule(stack, profile, pipeline=f"p{n % 2}", name=f"job-{n}", duration=30) for n in range(6)]
    stack.run_until(lambda: all(stack.gocd.job(j.job_id).completed_at for j in jobs), 1800, "all six jobs")
    pods = Counter(stack.gocd.job(j.job_id).agent_id for j in jobs)
    assert len(pods) == 6 and set(pods.values()) == {1}
    assert stack.gocd.invariant_violations() == []


def test_a_max_jobs_per_pod_one_job_can_get_a_used_pod_of_another_profile_that_renders_the_same_pod() -> None:
    # MaxJobsPerPod limits the pods its profile's jobs leave behind, not which pod its job is given: a
    # profile without the limit that renders the same pod shares the fingerprint. A pod that differs
    # (here an Environment line) keeps them apart.
    used = run_then(virtual_stack(boot_delay=5), {}, {"profile": {"MaxJobsPerPod": "1"}}, "profile")
    assert used[1].agent_id == used[0].agent_id
    apart = {"profile": {"MaxJobsPerPod": "1", "Environment": "TRUST=releases"}}
    kept = run_then(virtual_stack(boot_delay=5), {}, apart, "profile")
    assert kept[1].agent_id != kept[0].agent_id
