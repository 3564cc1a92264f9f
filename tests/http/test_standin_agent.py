"""The stand-in agent (tests/support/doubles/standin_agent.py) as a process of its own, against the agent
API of the simulated GoCD server (gocd_agent_api.py) in the HTTP stack: the backend creates the pods, the
simulated kubelet starts each pod's agent as a process with the pod's GO_EA_* variables
(agent_processes.py), and everything the agent does goes over HTTP."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_agent_api import AgentApiServer
from elastic_agent.simulation.gocd_model import GoCDConfig, JobState, SimulatedGoCD
from elastic_agent.simulation.gocd_records import ENV_AGENT_ID, ENV_KEY, ENV_PLUGIN_ID, ENV_SERVER_URL
from elastic_agent.simulation.stack import Stack, StackOptions, SwitchableTransport
from tests.support.doubles.standin_agent import standin_command
from tests.support.live_stack import SPEED, wait_until
from tests.support.reuse_helpers import completed
from tests.support.stack_helpers import pod, reuse_profile
from tests.support.standin_timing import FAST_AGENT

# Kubernetes' default terminationGracePeriodSeconds: what a pod's agent has between SIGTERM and SIGKILL.
GRACE_PERIOD_S = 30.0


@pytest.fixture
def stack() -> Iterator[Stack]:
    # LostContact one simulated minute (a second) after the last ping, to see it within the test.
    options = StackOptions(
        gocd=GoCDConfig(lost_contact_after_s=60.0), agent_processes=FAST_AGENT, agent_command=standin_command
    )
    running = Stack(ScaledClock(SPEED), options)
    yield running
    running.stop()


def pod_env(stack: Stack, name: str) -> dict[str, str]:
    found = pod(stack, name)
    assert found is not None
    return {item["name"]: item["value"] for item in found["spec"]["containers"][0]["env"] if "value" in item}


def stdout_of(stack: Stack, pod_name: str) -> str:
    assert stack.agent_processes is not None
    return stack.agent_processes.stdout_path(pod_name).read_text()


def stderr_of(stack: Stack, pod_name: str) -> str:
    assert stack.agent_processes is not None
    return stack.agent_processes.stderr_path(pod_name).read_text()


def agent_process(stack: Stack, pod_name: str) -> subprocess.Popen[bytes]:
    assert stack.agent_processes is not None
    process = stack.agent_processes.process(pod_name)
    assert process is not None
    return process


def refusals_of(stack: Stack, pod_name: str) -> list[Any]:
    return [r for r in stack.gocd.refusals if r.pod_name == pod_name]


def test_one_agent_process_registers_with_its_key_and_runs_two_jobs_in_a_row(stack: Stack) -> None:
    profile = reuse_profile(stack)
    first = stack.gocd.schedule_job(
        "build", "stage", "compile", profile, stack.cluster_profile(), duration_s=30.0
    )
    first = completed(stack, first)
    second = stack.gocd.schedule_job(
        "build", "stage", "test", profile, stack.cluster_profile(), duration_s=30.0, planned_result="Failed"
    )
    second = completed(stack, second)
    pod_name = first.agent_id
    assert pod_name is not None
    assert second.agent_id == pod_name  # reused: the same agent process ran both
    assert (first.result, second.result) == ("Passed", "Failed")
    assert first.agent_reports == ["Preparing", "Building", "Completing Passed", "Completed Passed"]
    assert second.agent_reports == ["Preparing", "Building", "Completing Failed", "Completed Failed"]
    [registration] = stack.gocd.registrations
    assert registration.key == pod_env(stack, pod_name)[ENV_KEY]  # its own single-use key
    assert stack.gocd.registration_key(registration.key).used_by == pod_name  # type: ignore[union-attr]
    job_lines = [line for line in stdout_of(stack, pod_name).splitlines() if line.startswith("job ")]
    assert job_lines == [
        f"job build/1/stage/1/compile (id {first.job_id}): sleep 0.5 s, exit 0",
        "job build/1/stage/1/compile: Passed",
        f"job build/2/stage/1/test (id {second.job_id}): sleep 0.5 s, exit 1",
        "job build/2/stage/1/test: Failed",
    ]
    assert agent_process(stack, pod_name).poll() is None  # it waits for the next job
    assert stack.gocd.invariant_violations() == []


def test_a_second_agent_with_a_spent_key_is_refused_and_gets_no_work(stack: Stack) -> None:
    profile = reuse_profile(stack)
    job = completed(
        stack,
        stack.gocd.schedule_job(
            "build", "stage", "compile", profile, stack.cluster_profile(), duration_s=30.0
        ),
    )
    assert job.agent_id is not None
    env = pod_env(stack, job.agent_id)
    assert stack.agent_processes is not None
    stack.agent_processes.agent_started("copy-of-the-pod", env)  # the same variables, key included
    wait_until(lambda: len(refusals_of(stack, job.agent_id or "")) >= 2, what="the copy to retry")  # type: ignore[arg-type]
    reasons = {r.reason for r in refusals_of(stack, job.agent_id)}
    assert reasons == {"auto-register key already used"}
    # Work keeps going to the registered agent, and none to the copy.
    again = completed(
        stack,
        stack.gocd.schedule_job("build", "stage", "test", profile, stack.cluster_profile(), duration_s=30.0),
    )
    assert again.agent_id == job.agent_id
    assert [a.agent_id for a in stack.gocd.agents()] == [job.agent_id]
    assert "job " not in stdout_of(stack, "copy-of-the-pod")
    assert "registration refused" in stderr_of(stack, "copy-of-the-pod")
    assert env[ENV_KEY] not in stderr_of(stack, "copy-of-the-pod")  # the key is a secret: never printed


def test_an_agent_with_a_key_the_server_never_issued_is_refused_and_gets_no_work(stack: Stack) -> None:
    job = stack.gocd.schedule_job(
        "build", "stage", "compile", reuse_profile(stack), stack.cluster_profile(), duration_s=30.0
    )
    assert stack.agent_processes is not None
    stray = {
        ENV_SERVER_URL: "unused",
        ENV_KEY: "not-a-key-the-server-issued",
        ENV_AGENT_ID: "stray",
        ENV_PLUGIN_ID: stack.gocd.config.plugin_id,
    }
    stack.agent_processes.agent_started("stray", stray)
    wait_until(lambda: len(refusals_of(stack, "stray")) >= 2, what="the stray agent to retry")
    assert {r.reason for r in refusals_of(stack, "stray")} == {"unknown auto-register key"}
    assert stack.gocd.agent("stray") is None
    completed(stack, job)  # the job runs on the pod the plugin made for it, not on the stray agent
    assert stack.gocd.job(job.job_id).agent_id != "stray"
    assert "job " not in stdout_of(stack, "stray")
    stray_process = agent_process(stack, "stray")  # still retrying its registration, and stoppable so
    stray_process.send_signal(signal.SIGTERM)
    assert stray_process.wait(GRACE_PERIOD_S) == 128 + signal.SIGTERM


def test_sigterm_stops_a_busy_agent_within_the_grace_period_and_gocd_then_loses_it(stack: Stack) -> None:
    job = stack.gocd.schedule_job(
        "build", "stage", "compile", reuse_profile(stack), stack.cluster_profile(), duration_s=3600.0
    )
    wait_until(lambda: "Building" in stack.gocd.job(job.job_id).agent_reports, what="the job to be building")
    pod_name = stack.gocd.job(job.job_id).agent_id
    assert pod_name is not None
    process = agent_process(stack, pod_name)
    process.send_signal(signal.SIGTERM)
    assert process.wait(GRACE_PERIOD_S) == 128 + signal.SIGTERM  # before the kubelet's SIGKILL
    # Abandoned unreported, as a real agent's JVM ends: GoCD finds the agent silent and reschedules the job.
    wait_until(
        lambda: stack.gocd.job(job.job_id).state is JobState.RESCHEDULED, what="the job to be rescheduled"
    )
    assert stack.gocd.job(job.job_id).agent_reports == ["Preparing", "Building"]
    assert stack.gocd.job(job.job_id).completed_at is None


@pytest.fixture
def agent_api() -> Iterator[tuple[SimulatedGoCD, str]]:
    model = SimulatedGoCD(ScaledClock(SPEED), SwitchableTransport())
    server = AgentApiServer(model)
    yield model, server.start()
    server.stop()


def test_the_agent_api_refuses_forged_tokens_and_requests_for_another_agent(
    agent_api: tuple[SimulatedGoCD, str],
) -> None:
    model, url = agent_api
    assert requests.get(f"{url}/admin/agent/token", params={"uuid": ""}, timeout=5).status_code == 409
    token_a = requests.get(f"{url}/admin/agent/token", params={"uuid": "uuid-a"}, timeout=5).text
    key = model.issue_key(1)
    form = {
        "hostname": "h",
        "uuid": "uuid-b",
        "location": "/",
        "usablespace": "0",
        "operatingSystem": "linux",
        "agentAutoRegisterKey": key,
        "agentAutoRegisterResources": "",
        "agentAutoRegisterEnvironments": "",
        "agentAutoRegisterHostname": "",
        "elasticAgentId": "pod-b",
        "elasticPluginId": model.config.plugin_id,
        "token": token_a,
    }
    forged = requests.post(f"{url}/admin/agent", data=form, timeout=5)
    assert (forged.status_code, forged.text) == (403, "Not a valid token.")
    assert model.registration_key(key).used_by is None  # type: ignore[union-attr]  # refused before the key
    registered = requests.post(f"{url}/admin/agent", data={**form, "uuid": "uuid-a"}, timeout=5)
    assert registered.status_code == 200
    again = requests.get(f"{url}/admin/agent/token", params={"uuid": "uuid-a"}, timeout=5)
    assert again.status_code == 409  # a registered agent gets no second token
    body = {"type": "PingRequest", "agentRuntimeInfo": {"identifier": {"uuid": "uuid-a"}}}
    headers = {"X-Agent-GUID": "uuid-b", "Authorization": token_a}
    impostor = requests.post(f"{url}/remoting/api/agent/ping", json=body, headers=headers, timeout=5)
    assert impostor.status_code == 403
    assert "'uuid-b' is attempting a request for agent: 'uuid-a'" in impostor.text
    no_cookie = requests.post(
        f"{url}/remoting/api/agent/ping", json=body, headers={**headers, "X-Agent-GUID": "uuid-a"}, timeout=5
    )
    assert no_cookie.status_code == 403  # a ping before get_cookie
    cookie = requests.post(
        f"{url}/remoting/api/agent/get_cookie",
        json=body,
        headers={**headers, "X-Agent-GUID": "uuid-a"},
        timeout=5,
    ).json()
    body["agentRuntimeInfo"]["cookie"] = cookie  # type: ignore[index]
    ping = requests.post(
        f"{url}/remoting/api/agent/ping", json=body, headers={**headers, "X-Agent-GUID": "uuid-a"}, timeout=5
    )
    assert (ping.status_code, ping.json()) == (200, "NONE")


def test_a_job_cancelled_while_it_runs_stops_its_tasks_and_the_agent_takes_the_next(stack: Stack) -> None:
    profile = reuse_profile(stack)
    cluster = stack.cluster_profile()
    long = stack.gocd.schedule_job("build", "stage", "compile", profile, cluster, duration_s=3600.0)
    wait_until(lambda: "Building" in stack.gocd.job(long.job_id).agent_reports, what="the job to be building")
    pod_name = stack.gocd.job(long.job_id).agent_id
    assert pod_name is not None and stack.gocd.cancel_job(long.job_id)
    # A ping answered CANCEL ends the hour-long sleep; is_ignored keeps the agent from reporting the job.
    wait_until(lambda: "ignored" in stdout_of(stack, pod_name), what="the agent to stop the cancelled job")
    assert stack.gocd.job(long.job_id).result == "Cancelled"
    assert stack.gocd.job(long.job_id).agent_reports == ["Preparing", "Building"]
    short = completed(
        stack, stack.gocd.schedule_job("build", "stage", "test", profile, cluster, duration_s=30.0)
    )
    assert (short.agent_id, short.result) == (pod_name, "Passed")
