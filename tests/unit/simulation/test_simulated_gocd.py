"""Behaviour of the simulated GoCD server: the double every flow test drives the backend with."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from elastic_agent.clock import ManualClock, ScaledClock
from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_callbacks import CallbackServer, ServerApi
from elastic_agent.simulation.gocd_model import (
    AgentState,
    ConfigState,
    GoCDConfig,
    JobState,
    SimulatedGoCD,
)
from elastic_agent.simulation.gocd_transport import HttpPluginTransport
from tests.support.scripted_gocd import CLUSTER, ELASTIC, START, ScriptedPlugin, agent_env, key_for, schedule


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def plugin() -> ScriptedPlugin:
    return ScriptedPlugin()


@pytest.fixture
def gocd(clock: ManualClock, plugin: ScriptedPlugin) -> SimulatedGoCD:
    return SimulatedGoCD(clock, plugin)


def asked_job_ids(plugin: ScriptedPlugin, agent_id: str) -> list[int]:
    asked = plugin.bodies("should-assign-work")
    return [b["job_identifier"]["job_id"] for b in asked if b["agent"]["agent_id"] == agent_id]


def test_create_agent_is_sent_once_then_resent_after_starvation_timeout_with_new_key_and_same_job_id(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    job = schedule(gocd, "unit")
    gocd.advance_to(START + 124)
    [first] = plugin.bodies("create-agent")
    gocd.advance_to(START + 125)
    first_again, resent = plugin.bodies("create-agent")

    assert first_again is first
    assert list(first) == [
        "auto_register_key",
        "elastic_agent_profile_properties",
        "cluster_profile_properties",
        "job_identifier",
    ]
    assert first["elastic_agent_profile_properties"] == ELASTIC
    assert first["cluster_profile_properties"] == CLUSTER
    assert first["job_identifier"] == {
        "pipeline_name": "build",
        "pipeline_label": "1",
        "pipeline_counter": 1,
        "stage_name": "compile",
        "stage_counter": "1",
        "job_name": "unit",
        "job_id": job.job_id,
    }
    assert resent["job_identifier"] == first["job_identifier"]
    assert resent["auto_register_key"] != first["auto_register_key"]
    assert (gocd.stats.create_agent_sent, gocd.stats.create_agent_resends) == (2, 1)


def test_environment_key_is_absent_when_the_job_has_no_environment(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    schedule(gocd, "plain")
    schedule(gocd, "deploy", environment="production")
    gocd.advance_to(START + 5)
    plain, deploy = plugin.bodies("create-agent")
    assert "environment" not in plain
    assert deploy["environment"] == "production"


def test_cancelled_waiting_job_is_no_longer_resent(gocd: SimulatedGoCD, plugin: ScriptedPlugin) -> None:
    job = schedule(gocd, "unit")
    gocd.advance_to(START + 5)
    assert gocd.cancel_job(job.job_id)
    gocd.advance_to(START + 600)
    assert len(plugin.bodies("create-agent")) == 1
    assert gocd.job(job.job_id).state is JobState.CANCELLED
    assert plugin.bodies("job-completion") == []


def test_a_registration_key_works_once(gocd: SimulatedGoCD, plugin: ScriptedPlugin) -> None:
    job = schedule(gocd, "unit")
    gocd.advance_to(START + 5)
    key = key_for(plugin, job.job_id)

    gocd.agent_started("pod-1", agent_env(key, "pod-1"))
    gocd.agent_started("pod-2", agent_env(key, "pod-2"))

    assert [r.agent_id for r in gocd.registrations] == ["pod-1"]
    [refusal] = gocd.refusals
    assert (refusal.agent_id, refusal.status) == ("pod-2", 422)
    assert refusal.reason == "auto-register key already used"
    registration_key = gocd.registration_key(key)
    assert registration_key is not None and registration_key.used_by == "pod-1"


def test_an_unused_key_stays_valid_until_it_expires_after_30_minutes(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    first, second = schedule(gocd, "one"), schedule(gocd, "two")
    gocd.advance_to(START + 5)
    key_one, key_two = key_for(plugin, first.job_id), key_for(plugin, second.job_id)

    gocd.advance_to(START + 5 + 1799)
    gocd.agent_started("pod-1", agent_env(key_one, "pod-1"))
    gocd.advance_to(START + 5 + 1800)
    gocd.agent_started("pod-2", agent_env(key_two, "pod-2"))

    assert [r.agent_id for r in gocd.registrations] == ["pod-1"]
    assert [(r.agent_id, r.reason) for r in gocd.refusals] == [("pod-2", "auto-register key expired")]


def test_registration_is_refused_for_a_known_agent_id_or_a_missing_plugin_id(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    first, second, third = schedule(gocd, "one"), schedule(gocd, "two"), schedule(gocd, "three")
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, first.job_id), "pod-1"))
    gocd.agent_started("pod-1b", agent_env(key_for(plugin, second.job_id), "pod-1"))
    no_plugin = agent_env(key_for(plugin, third.job_id), "pod-3")
    del no_plugin["GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID"]
    gocd.agent_started("pod-3", no_plugin)

    assert [r.pod_name for r in gocd.refusals] == ["pod-1b", "pod-3"]
    assert len(gocd.agents()) == 1


def test_agents_are_only_asked_about_jobs_of_their_own_environment(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    job_a = schedule(gocd, "in-a", environment="A")
    job_b = schedule(gocd, "in-b", environment="B")
    job_none = schedule(gocd, "in-none")
    gocd.advance_to(START + 5)
    gocd.agent_started("agent-a", agent_env(key_for(plugin, job_a.job_id), "agent-a", "A"))
    gocd.agent_started("agent-none", agent_env(key_for(plugin, job_b.job_id), "agent-none"))
    gocd.advance_to(START + 120)

    assert set(asked_job_ids(plugin, "agent-a")) == {job_a.job_id}
    assert set(asked_job_ids(plugin, "agent-none")) == {job_none.job_id}
    asked_a = [b for b in plugin.bodies("should-assign-work") if b["agent"]["agent_id"] == "agent-a"]
    assert all(b["environment"] == "A" for b in asked_a)
    assert len(asked_a) > 10, "an idle agent keeps polling every few seconds"


def test_the_first_true_wins_and_jobs_are_offered_in_scheduling_order(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    jobs = [schedule(gocd, f"job-{n}") for n in range(4)]
    wanted = {jobs[2].job_id, jobs[3].job_id}
    plugin.assign = lambda body: body["job_identifier"]["job_id"] in wanted
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, jobs[0].job_id), "pod-1"))
    gocd.step()

    assert asked_job_ids(plugin, "pod-1") == [j.job_id for j in jobs[:3]]
    [first_ask, *_] = plugin.bodies("should-assign-work")
    assert first_ask["agent"] == {
        "agent_id": "pod-1",
        "agent_state": "Idle",
        "build_state": "Idle",
        "config_state": "Enabled",
    }
    assert "environment" not in first_ask
    assert [(a.job_id, a.agent_id) for a in gocd.assignments] == [(jobs[2].job_id, "pod-1")]
    assert gocd.job(jobs[2].job_id).state is JobState.BUILDING
    assert gocd.wait_times() == {jobs[2].job_id: 5.0}
    assert len(gocd.stats.should_assign_latencies_s) == 3


def test_an_answer_other_than_true_or_false_is_a_protocol_error(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    job = schedule(gocd, "unit")
    plugin.fixed_answers["should-assign-work"] = (200, "yes")
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    gocd.step()
    assert gocd.assignments == []
    assert gocd.stats.protocol_errors == ["should-assign-work answered 'yes', not true or false"]


def test_job_completion_is_sent_once_with_the_agent_id_and_never_retried(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    job = schedule(gocd, "unit", duration_s=30)
    plugin.assign = lambda body: True
    plugin.fixed_answers["job-completion"] = (500, "plugin failed")
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    gocd.advance_to(START + 34)
    assert plugin.bodies("job-completion") == []
    gocd.advance_to(START + 600)

    [completion] = plugin.bodies("job-completion")
    assert completion["elastic_agent_id"] == "pod-1"
    assert completion["job_identifier"]["job_id"] == job.job_id
    assert gocd.job(job.job_id).state is JobState.COMPLETED
    agent = gocd.agent("pod-1")
    assert agent is not None and agent.agent_state is AgentState.IDLE and agent.jobs_run == 1
    assert [(f.request_name, f.status) for f in gocd.stats.non_200_answers] == [
        ("cd.go.elastic-agent.job-completion", 500)
    ]
    assert gocd.invariant_violations() == []


def test_delete_agents_removes_only_disabled_agents_that_are_not_building(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    jobs = [schedule(gocd, f"job-{n}", duration_s=3600) for n in range(3)]
    plugin.assign = lambda body: body["agent"]["agent_id"] == "building"
    gocd.advance_to(START + 5)
    for job, agent_id in zip(jobs, ["enabled", "disabled", "building"], strict=True):
        gocd.agent_started(agent_id, agent_env(key_for(plugin, job.job_id), agent_id))
    gocd.step()
    api = ServerApi(gocd)
    ids = json.dumps([{"agent_id": a} for a in ["disabled", "building", "unknown"]])
    assert api.submit("go.processor.elastic-agents.disable-agents", "1.0", ids) == (200, "")

    everyone = json.dumps([{"agent_id": a} for a in ["enabled", "disabled", "building", "unknown"]])
    assert api.submit("go.processor.elastic-agents.delete-agents", "1.0", everyone)[0] == 200

    assert sorted(a.agent_id for a in gocd.agents()) == ["building", "enabled"]
    assert gocd.stats.deleted_while_building == ["building"]
    assert gocd.invariant_violations() == ["agent building deleted while building"]
    building = gocd.agent("building")
    assert building is not None and building.config_state is ConfigState.DISABLED


def test_an_agent_whose_pod_stopped_loses_contact_after_300_s_and_its_job_is_rescheduled(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    job = schedule(gocd, "unit", duration_s=60)
    plugin.assign = lambda body: body["agent"]["agent_id"] == "pod-1"
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    gocd.step()
    gocd.agent_stopped("pod-1")
    gocd.advance_to(START + 5 + 299)
    agent = gocd.agent("pod-1")
    assert agent is not None and agent.agent_state is AgentState.BUILDING
    gocd.advance_to(START + 5 + 300)

    assert agent.agent_state is AgentState.LOST_CONTACT
    rerun = gocd.job(job.job_id).rescheduled_as
    assert rerun is not None and gocd.job(rerun).state is JobState.SCHEDULED
    assert plugin.bodies("job-completion") == []
    assert gocd.list_agents()[0]["agent_state"] == "LostContact"


def test_immediate_lost_contact_mode(clock: ManualClock, plugin: ScriptedPlugin) -> None:
    gocd = SimulatedGoCD(clock, plugin, GoCDConfig(immediate_lost_contact=True))
    job = schedule(gocd, "unit")
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    gocd.agent_stopped("pod-1")
    assert gocd.list_agents()[0]["agent_state"] == "LostContact"


def test_server_ping_every_60_s_carries_each_cluster_profile_once(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin
) -> None:
    schedule(gocd, "one")
    schedule(gocd, "two")
    gocd.schedule_job("other", "s", "j", ELASTIC, {"namespace": "other"}, None, 10)
    gocd.advance_to(START + 180)
    pings = plugin.bodies("server-ping")
    assert len(pings) == 3
    assert pings[0] == {"all_cluster_profile_properties": [CLUSTER, {"namespace": "other"}]}


def test_server_health_messages_are_replaced_and_cleared(gocd: SimulatedGoCD) -> None:
    api = ServerApi(gocd)
    add = "go.processor.server-health.add-messages"
    api.submit(add, "1.0", json.dumps([{"type": "error", "message": "cluster unreachable"}]))
    api.submit(add, "1.0", json.dumps([{"type": "warning", "message": "slow"}]))
    assert [(m.type, m.message) for m in gocd.health_messages] == [("warning", "slow")]
    api.submit(add, "1.0", "[]")
    assert gocd.health_messages == []
    assert api.submit(add, "1.0", json.dumps([{"type": "info", "message": "x"}]))[0] == 400


def test_console_log_appends_to_the_jobs_console_in_both_versions(gocd: SimulatedGoCD) -> None:
    job = schedule(gocd, "unit")
    api = ServerApi(gocd)
    snake: dict[str, object] = {"pipeline_name": "build", "pipeline_counter": 1, "stage_name": "compile"}
    snake |= {"stage_counter": "1", "job_name": "unit", "text": "pod created\n"}
    camel: dict[str, object] = {"pipelineName": "build", "pipelineCounter": "1", "stageName": "compile"}
    camel |= {"stageCounter": 1, "jobName": "unit", "text": "pod running\n"}
    assert api.submit("go.processor.console-log.append", "2.0", json.dumps(snake)) == (200, "")
    assert api.submit("go.processor.console-log.append", "1.0", json.dumps(camel)) == (200, "")
    assert gocd.job(job.job_id).console_text == "pod created\npod running\n"


def test_server_info_and_unknown_versions(gocd: SimulatedGoCD) -> None:
    api = ServerApi(gocd)
    status, body = api.submit("go.processor.server-info.get", "1.0", "")
    assert status == 200 and set(json.loads(body)) == {"server_id", "site_url", "secure_site_url"}
    status, message = api.submit("go.processor.server-info.get", "2.0", "")
    assert status == 500 and "version" in message
    assert api.submit("go.processor.nothing", "1.0", "")[0] == 404


def test_a_busy_workload_keeps_every_invariant(gocd: SimulatedGoCD, plugin: ScriptedPlugin) -> None:
    """Each create-agent starts a pod at once; every agent takes any job (reuse without limits)."""
    plugin.assign = lambda body: True

    def start_pod(name: str, body: dict[str, Any]) -> None:
        if name == "create-agent":
            pod = f"pod-{len(plugin.bodies('create-agent'))}"
            gocd.agent_started(pod, agent_env(body["auto_register_key"], pod))

    plugin.on_request = start_pod
    for n in range(30):
        schedule(gocd, f"job-{n}", duration_s=20 + n)
        gocd.advance_to(START + 7 * n)
    gocd.advance_to(START + 1200)
    assert all(job.state is JobState.COMPLETED for job in gocd.jobs())
    assert gocd.invariant_violations() == []
    assert len(plugin.bodies("job-completion")) == 30
    assert max(gocd.wait_times().values()) <= 10


def run_busy_workload(seed: int) -> list[tuple[str, dict[str, Any]]]:
    clock, plugin = ManualClock(START), ScriptedPlugin()
    gocd = SimulatedGoCD(clock, plugin, GoCDConfig(seed=seed))
    plugin.assign = lambda body: (
        body["job_identifier"]["job_id"] % 2 == 0 or body["agent"]["agent_id"] != "pod-1"
    )

    def start_pod(name: str, body: dict[str, Any]) -> None:
        if name == "create-agent" and len(gocd.agents()) < 3:
            pod = f"pod-{len(gocd.agents()) + 1}"
            gocd.agent_started(pod, agent_env(body["auto_register_key"], pod))

    plugin.on_request = start_pod
    for n in range(12):
        schedule(gocd, f"job-{n}", duration_s=30 + 7 * n)
        gocd.advance_to(START + 11 * n)
    gocd.advance_to(START + 900)
    assert all(job.state is JobState.COMPLETED for job in gocd.jobs())
    return plugin.requests


def test_the_same_seed_gives_the_same_run() -> None:
    first, again, other_seed = run_busy_workload(7), run_busy_workload(7), run_busy_workload(8)
    assert first == again
    assert first != other_seed


# ---- over real HTTP ------------------------------------------------------------------------------


@pytest.fixture
def callback_server(gocd: SimulatedGoCD) -> Iterator[str]:
    server = CallbackServer(gocd, token="s3cret")
    url = server.start()
    yield url
    server.stop()


def test_callback_app_checks_the_token_the_api_and_lists_agents(
    gocd: SimulatedGoCD, plugin: ScriptedPlugin, callback_server: str
) -> None:
    job = schedule(gocd, "unit")
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    good = {"Authorization": "Bearer s3cret", "X-GoCD-API-Version": "1.0"}
    list_agents = f"{callback_server}/gocd/server/go.processor.elastic-agents.list-agents"

    wrong_token = {**good, "Authorization": "Bearer wrong"}
    assert requests.post(list_agents, headers=wrong_token, timeout=5).status_code == 401
    unknown_api = f"{callback_server}/gocd/server/go.nothing"
    assert requests.post(unknown_api, headers=good, timeout=5).status_code == 404
    wrong_version = requests.post(list_agents, headers={**good, "X-GoCD-API-Version": "9.9"}, timeout=5)
    assert wrong_version.status_code == 500 and "version" in wrong_version.text
    answer = requests.post(list_agents, headers=good, timeout=5)
    assert answer.status_code == 200
    assert answer.json() == [
        {"agent_id": "pod-1", "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
    ]


def test_http_plugin_transport_follows_the_bridge_contract() -> None:
    seen: list[dict[str, Any]] = []

    def backend(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        seen.append(
            {
                "method": environ["REQUEST_METHOD"],
                "path": environ["PATH_INFO"],
                "authorization": environ.get("HTTP_AUTHORIZATION"),
                "extension": environ.get("HTTP_X_GOCD_EXTENSION_VERSION"),
                "callback": environ.get("HTTP_X_GOCD_CALLBACK_URL"),
                "body": environ["wsgi.input"].read(length).decode(),
            }
        )
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"true"]

    server = make_server("127.0.0.1", 0, backend, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        with HttpPluginTransport(base, "tok", "http://127.0.0.1:9/cb") as transport:
            answer = transport.send("cd.go.elastic-agent.should-assign-work", '{"a":1}')
    finally:
        server.shutdown()
        server.server_close()
    assert answer == (200, "true")
    assert seen == [
        {
            "method": "POST",
            "path": "/gocd/plugin/cd.go.elastic-agent.should-assign-work",
            "authorization": "Bearer tok",
            "extension": "5.0",
            "callback": "http://127.0.0.1:9/cb",
            "body": '{"a":1}',
        }
    ]


def test_http_plugin_transport_answers_502_when_the_backend_is_unreachable() -> None:
    # Port 9 (discard) is closed on loopback: the connection is refused at once.
    with HttpPluginTransport("http://127.0.0.1:9", "tok", "http://cb", connect_timeout_s=0.5) as transport:
        status, message = transport.send("cd.go.elastic-agent.server-ping", "{}")
    assert status == 502 and "unreachable" in message


def test_background_runner_survives_the_plugin_calling_back_during_ping_and_assignment(
    plugin: ScriptedPlugin,
) -> None:
    """Scaled time: the plugin calls list-agents during a ping and disable-agents while it is asked
    should-assign-work, over HTTP from another thread; nothing deadlocks."""
    clock = ScaledClock(600.0, start=START)
    gocd = SimulatedGoCD(clock, plugin, GoCDConfig(runner_tick_s=0.5))
    server = CallbackServer(gocd, token="t")
    base = server.start()
    headers = {"Authorization": "Bearer t", "X-GoCD-API-Version": "1.0"}
    listed: list[Any] = []

    def call_back(name: str, body: dict[str, Any]) -> None:
        if name == "create-agent":
            gocd.agent_started("pod-1", agent_env(body["auto_register_key"], "pod-1"))
        elif name == "server-ping":
            url = f"{base}/gocd/server/go.processor.elastic-agents.list-agents"
            listed.append(requests.post(url, headers=headers, timeout=5).json())
        elif name == "should-assign-work":
            url = f"{base}/gocd/server/go.processor.elastic-agents.disable-agents"
            requests.post(url, headers=headers, data=json.dumps([{"agent_id": "pod-1"}]), timeout=5)

    plugin.on_request = call_back
    plugin.assign = lambda body: True
    schedule(gocd, "unit")
    gocd.start()
    try:
        deadline = time.monotonic() + 5
        while not (listed and gocd.assignments) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        gocd.stop()
        server.stop()
    assert listed and listed[0][0]["agent_id"] == "pod-1"
    assert len(gocd.assignments) == 1
    assert gocd.stats.assignment_races == [f"agent pod-1 disabled while assigned job {gocd.jobs()[0].job_id}"]
    assert gocd.stats.protocol_errors == []


@pytest.mark.parametrize("environment", ["prod", None])
def test_pre_encoded_should_assign_work_text_equals_the_encoded_body(environment: str | None) -> None:
    status = {"agent_id": "a-1", "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
    elastic, cluster = {"Image": "x:1", "Reuse": "true"}, {"namespace": "ci"}
    job = {"pipeline_name": "p", "pipeline_label": "1", "pipeline_counter": 1, "stage_name": "s",
           "stage_counter": "1", "job_name": "j", "job_id": 7}  # fmt: skip
    members = wire.should_assign_work_job_members(environment, elastic, cluster, job)
    expected = wire.encode(wire.should_assign_work_body(status, environment, elastic, cluster, job))
    assert wire.should_assign_work_text(wire.encode(status), members) == expected
    assert ("environment" in json.loads(expected)) is (environment is not None)
