"""Helpers that read or drive either stack the same way: the HTTP one (`Stack`, real time) and the
virtual-time one (`VirtualStack`). What waits differs between them (real seconds against virtual ones)
and stays in reuse_helpers.py and virtual_helpers.py."""

from __future__ import annotations

from typing import Any, Protocol

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_model import Job, SimulatedGoCD


class AnyStack(Protocol):
    gocd: SimulatedGoCD

    def elastic_profile(self, **overrides: str) -> dict[str, str]: ...

    def cluster_profile(self, **overrides: str) -> dict[str, str]: ...

    def pods(self) -> list[dict[str, Any]]: ...


def reuse_profile(stack: AnyStack, **overrides: str) -> dict[str, str]:
    return stack.elastic_profile(Reuse="true", **overrides)


def schedule(
    stack: AnyStack,
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


def pod(stack: AnyStack, name: str) -> dict[str, Any] | None:
    return next((p for p in stack.pods() if p["metadata"]["name"] == name), None)


def annotation(stack: AnyStack, name: str, key: str) -> str | None:
    found = pod(stack, name)
    return found["metadata"]["annotations"].get(key) if found else None


def state(stack: AnyStack, name: str) -> str | None:
    return annotation(stack, name, labels.ANN_STATE)


def pod_names(stack: AnyStack) -> set[str]:
    return {p["metadata"]["name"] for p in stack.pods()}
