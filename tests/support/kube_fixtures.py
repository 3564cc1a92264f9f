"""Shared fixtures for the fake Kubernetes API server, the simulated kubelet and the adapter tests.

Import the fixtures you use into a test module (`from tests.support.kube_fixtures import fake_kube`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client

from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.fake_kube_store import FakeKubeStore

NS = "agents"


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll `predicate` until it is truthy or `timeout` real seconds have passed (bounded waits only)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def core_api_for(url: str, token: str | None = None) -> client.CoreV1Api:
    configuration = client.Configuration()
    configuration.host = url
    configuration.retries = 0
    if token is not None:
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.CoreV1Api(client.ApiClient(configuration))


def pod_manifest(name: str, labels: Mapping[str, str] | None = None, **env: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "containers": [
                {
                    "name": "agent",
                    "image": "gocd/gocd-agent-ubuntu-22.04:v24.1.0",
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                }
            ]
        },
    }


@pytest.fixture
def fake_kube() -> Iterator[FakeKubeServer]:
    server = FakeKubeServer(FakeKubeStore())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def core_api(fake_kube: FakeKubeServer) -> client.CoreV1Api:
    return core_api_for(fake_kube.url)
