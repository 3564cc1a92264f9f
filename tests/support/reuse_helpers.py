"""Helpers for reuse tests through the whole stack (simulated GoCD drives the backend over HTTP)."""

from __future__ import annotations

from elastic_agent.simulation.gocd_model import Job
from elastic_agent.simulation.stack import Stack
from tests.support.live_stack import wait_until
from tests.support.stack_helpers import state


def completed(stack: Stack, job: Job, timeout_s: float = 20.0) -> Job:
    wait_until(lambda: stack.gocd.job(job.job_id).completed_at, timeout_s, f"job {job.job_id} to complete")
    return stack.gocd.job(job.job_id)


def assigned(stack: Stack, job: Job, timeout_s: float = 20.0) -> Job:
    wait_until(lambda: stack.gocd.job(job.job_id).agent_id, timeout_s, f"job {job.job_id} to be assigned")
    return stack.gocd.job(job.job_id)


def wait_state(stack: Stack, name: str, wanted: str, timeout_s: float = 10.0) -> None:
    wait_until(lambda: state(stack, name) == wanted, timeout_s, f"pod {name} to be {wanted}")


def run_to_idle(stack: Stack, job: Job) -> str:
    """Run a job to completion and return its pod, once that pod is idle."""
    done = completed(stack, job)
    assert done.agent_id is not None
    wait_state(stack, done.agent_id, "idle")
    return done.agent_id
