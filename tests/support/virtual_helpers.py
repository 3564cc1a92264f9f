"""Helpers for scenarios in virtual time (tests.support.doubles.harness.VirtualStack)."""

from __future__ import annotations

from typing import Any

from elastic_agent.simulation.gocd_model import GoCDConfig, Job
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import state


def completed(stack: VirtualStack, job: Job, within_s: float = 600.0) -> Job:
    stack.run_until(lambda: stack.gocd.job(job.job_id).completed_at, within_s, f"job {job.job_id} completing")
    return stack.gocd.job(job.job_id)


def assigned(stack: VirtualStack, job: Job, within_s: float = 600.0) -> Job:
    stack.run_until(lambda: stack.gocd.job(job.job_id).agent_id, within_s, f"job {job.job_id} being assigned")
    return stack.gocd.job(job.job_id)


def run_to_idle(stack: VirtualStack, job: Job) -> str:
    """Run a job to completion and return its pod, once that pod is idle on the cluster."""
    done = completed(stack, job)
    assert done.agent_id is not None
    stack.run_until(lambda: state(stack, done.agent_id or "") == "idle", 60, f"pod {done.agent_id} idle")
    return done.agent_id


def virtual_stack(boot_delay: float = 5.0, **gocd: Any) -> VirtualStack:
    """A VirtualStack with GoCDConfig settings given as keywords (get_work_interval_s=30, ...)."""
    return VirtualStack(boot_delay=boot_delay, gocd=GoCDConfig(**{"seed": 1, **gocd}))


def wait_state(stack: VirtualStack, name: str, wanted: str, within_s: float = 600.0) -> None:
    stack.run_until(lambda: state(stack, name) == wanted, within_s, f"pod {name} being {wanted}")
