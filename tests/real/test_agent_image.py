"""The agent image (tests/support/agent_image.py) run with podman as the pod's agent container: the backend
creates the pod in the fake cluster, the simulated kubelet starts a container of the image with the pod's
GO_EA_* variables, and the stand-in agent inside registers with the simulated GoCD's agent API on 127.0.0.1
(host network) and runs its job."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence

import pytest

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.agent_processes import AgentCommand
from elastic_agent.simulation.stack import Stack, StackOptions
from tests.support.agent_image import REPOSITORY, USER, AgentImage, build
from tests.support.container_image import RUNTIME_OPTIONS
from tests.support.live_stack import SPEED
from tests.support.reuse_helpers import completed
from tests.support.stack_helpers import reuse_profile
from tests.support.standin_timing import FAST_AGENT


@pytest.fixture(scope="module")
def agent_image() -> AgentImage:
    built = build()  # a lookup once scripts/test.sh has built it
    subprocess.run(["podman", "load", "-q", "-i", str(built.archive)], check=True, capture_output=True)
    tags = subprocess.run(
        ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", REPOSITORY],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for stale in set(tags) - {built.name}:  # this image made from other inputs: never used again
        subprocess.run(["podman", "rmi", stale], capture_output=True, check=False)
    return built


def podman_command(image: str) -> AgentCommand:
    def command(pod_name: str, variables: Sequence[str]) -> list[str]:
        return [
            "podman",
            "run",
            "--rm",
            *RUNTIME_OPTIONS,
            "--network",
            "host",
            "--name",
            f"standin-{pod_name}",
            *(f"--env={name}" for name in variables),
            image,
        ]

    return command


@pytest.fixture
def stack(agent_image: AgentImage) -> Iterator[Stack]:
    options = StackOptions(agent_processes=FAST_AGENT, agent_command=podman_command(agent_image.name))
    running = Stack(ScaledClock(SPEED), options)
    yield running
    running.stop()


def test_the_image_is_debian_python_with_the_agent_as_its_entrypoint_run_as_nobody(
    agent_image: AgentImage,
) -> None:
    inspected = subprocess.run(
        ["podman", "image", "inspect", agent_image.name], check=True, capture_output=True, text=True
    )
    config = json.loads(inspected.stdout)[0]["Config"]
    assert config["Entrypoint"] == ["/usr/bin/python3", "/opt/standin-agent/standin_agent.py"]
    assert config["User"] == USER


def test_an_agent_container_of_the_image_registers_and_runs_a_job(stack: Stack) -> None:
    job = stack.gocd.schedule_job(
        "build", "stage", "compile", reuse_profile(stack), stack.cluster_profile(), duration_s=30.0
    )
    job = completed(stack, job, timeout_s=60.0)
    assert job.result == "Passed"
    assert job.agent_reports == ["Preparing", "Building", "Completing Passed", "Completed Passed"]
    [registration] = stack.gocd.registrations
    assert registration.agent_id == job.agent_id
    assert stack.agent_processes is not None
    out = stack.agent_processes.stdout_path(job.agent_id or "").read_text()
    assert f"job build/1/stage/1/compile (id {job.job_id}): sleep 0.5 s, exit 0" in out
