"""A plugin answering the simulated GoCD server from a script, and the jobs and agents it is driven with.

The tests of the simulated server, and those of an agent's polling, drive SimulatedGoCD with this plugin
instead of the backend, so that what the server sends, and when, can be read off the requests it
recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.simulation.gocd_model import (
    Job,
    SimulatedGoCD,
)

START = 1_700_000_000.0
ELASTIC = {"Image": "gocd/gocd-agent:v1"}
CLUSTER = {"namespace": "ci", "go_server_url": "https://gocd.example.test/go"}


class ScriptedPlugin:
    """Answers like a plugin: records every request (short name, parsed body); should-assign-work is
    answered by `assign`, any request can be given a fixed answer, and `on_request` runs first."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.assign: Callable[[dict[str, Any]], bool] = lambda body: False
        self.fixed_answers: dict[str, tuple[int, str]] = {}
        self.on_request: Callable[[str, dict[str, Any]], None] = lambda name, body: None

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        name = request_name.removeprefix("cd.go.elastic-agent.")
        payload = json.loads(body)
        self.requests.append((name, payload))
        self.on_request(name, payload)
        if name in self.fixed_answers:
            return self.fixed_answers[name]
        if name == "should-assign-work":
            return 200, "true" if self.assign(payload) else "false"
        return 200, ""

    def bodies(self, name: str) -> list[dict[str, Any]]:
        return [body for sent, body in self.requests if sent == name]


def schedule(
    gocd: SimulatedGoCD, job_name: str, environment: str | None = None, duration_s: float = 60.0
) -> Job:
    return gocd.schedule_job("build", "compile", job_name, ELASTIC, CLUSTER, environment, duration_s)


def agent_env(key: str, agent_id: str, environment: str = "") -> dict[str, str]:
    return {
        "GO_EA_SERVER_URL": "https://gocd.example.test/go",
        "GO_EA_AUTO_REGISTER_KEY": key,
        "GO_EA_AUTO_REGISTER_ENVIRONMENT": environment,
        "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID": agent_id,
        "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID": PLUGIN_ID,
    }


def key_for(plugin: ScriptedPlugin, job_id: int) -> str:
    """The latest auto-register key sent for `job_id`."""
    sent = plugin.bodies("create-agent")
    return [b["auto_register_key"] for b in sent if b["job_identifier"]["job_id"] == job_id][-1]
