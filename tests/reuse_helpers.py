"""Helpers for reuse tests through the whole stack (simulated GoCD drives the backend over HTTP)."""

from __future__ import annotations

from typing import Any

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_model import Job
from elastic_agent.simulation.stack import Stack
from tests.conftest import wait_until


def reuse_profile(stack: Stack, **overrides: str) -> dict[str, str]:
    return stack.elastic_profile(Reuse="true", **overrides)


def schedule(
    stack: Stack,
    profile: dict[str, str],
    *,
    cluster: dict[str, str] | None = None,
    environment: str | None = None,
    pipeline: str = "build",
    duration: float = 20.0,
    name: str = "compile",
) -> Job:
    return stack.gocd.schedule_job(
        pipeline, "stage", name, profile, cluster or stack.cluster_profile(), environment, duration
    )


def completed(stack: Stack, job: Job, timeout_s: float = 20.0) -> Job:
    wait_until(lambda: stack.gocd.job(job.job_id).completed_at, timeout_s, f"job {job.job_id} to complete")
    return stack.gocd.job(job.job_id)


def assigned(stack: Stack, job: Job, timeout_s: float = 20.0) -> Job:
    wait_until(lambda: stack.gocd.job(job.job_id).agent_id, timeout_s, f"job {job.job_id} to be assigned")
    return stack.gocd.job(job.job_id)


def pod(stack: Stack, name: str) -> dict[str, Any] | None:
    return next((p for p in stack.pods() if p["metadata"]["name"] == name), None)


def state(stack: Stack, name: str) -> str | None:
    found = pod(stack, name)
    return found["metadata"]["annotations"].get(labels.ANN_STATE) if found else None


def wait_state(stack: Stack, name: str, wanted: str, timeout_s: float = 10.0) -> None:
    wait_until(lambda: state(stack, name) == wanted, timeout_s, f"pod {name} to be {wanted}")


def run_to_idle(stack: Stack, job: Job) -> str:
    """Run a job to completion and return its pod, once that pod is idle."""
    done = completed(stack, job)
    assert done.agent_id is not None
    wait_state(stack, done.agent_id, "idle")
    return done.agent_id


def pod_names(stack: Stack) -> set[str]:
    return {p["metadata"]["name"] for p in stack.pods()}
