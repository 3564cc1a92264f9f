"""The backend's calls into GoCD answered by the simulated server's methods, without JSON between them.

In process, the backend's `GoCDServer` would otherwise be a `GoCDClient` whose calls `ServerApi`
(gocd_callbacks.py, the server's `GoApplicationAccessor.submit`) answers: JSON text both ways, though
both sides are this process's objects and a simulation calls them on every ping and assignment.
`DirectGoCDServer` calls the methods `ServerApi` would call, and gives the backend what `GoCDClient`
would read from the answers. Whatever is not the plain case (console lines when they are kept, health
messages `ServerApi` would refuse) goes through `GoCDClient` and `ServerApi` as before, so the refusals
and their records are theirs. The JSON of these calls is tested where it is real: the callback app over
HTTP (`CallbackServer` in the HTTP stacks of stack.py, and the bridge's end-to-end test).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from elastic_agent.gocd.messages import Agent
from elastic_agent.gocd.server import GoCDClient, GoCDError, ServerInfo
from elastic_agent.simulation.gocd_model import HealthMessage, SimulatedGoCD
from elastic_agent.simulation.gocd_records import AgentState, BuildState, ConfigState

AgentStates = tuple[AgentState, BuildState, ConfigState]


class DirectGoCDServer:
    """`GoCDServer` answered by the simulated server's methods, without JSON between them."""

    def __init__(self, model: SimulatedGoCD, client: GoCDClient, *, console: bool) -> None:
        self._model = model
        self._client = client  # through ServerApi, for what is not the plain case
        self._console = console
        self._listed: dict[str, tuple[AgentStates, Agent]] = {}  # agent id -> its last listing

    def list_agents(self) -> list[Agent]:
        listed, agents = self._listed, []
        for agent in self._model.agents():
            if agent.plugin_id != self._model.config.plugin_id:
                continue
            states = (agent.agent_state, agent.build_state, agent.config_state)
            known = listed.get(agent.agent_id)
            if known is None or known[0] != states:
                status = agent.status()
                known = listed[agent.agent_id] = (states, Agent(**status))
            agents.append(known[1])
        if len(listed) > 2 * len(agents) + 64:  # forget agents long deleted
            ids = {agent.agent_id for agent in agents}
            self._listed = {key: value for key, value in listed.items() if key in ids}
        return agents

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        ids = list(agent_ids)
        if ids:
            self._model.disable_agents(ids)

    def delete_agents(self, agent_ids: Iterable[str]) -> None:
        ids = list(agent_ids)
        if ids:
            self._model.delete_agents(ids)

    def server_info(self) -> ServerInfo:
        info = self._model.server_info()
        if not info.get("server_id"):
            raise GoCDError("GoCD's server-info answer has no server_id")
        return ServerInfo(info["server_id"], info.get("site_url"), info.get("secure_site_url"))

    def set_health_messages(self, messages: list[dict[str, str]]) -> None:
        plain = all(
            type(m) is dict and m.get("type") in ("warning", "error") and type(m.get("message")) is str
            for m in messages
        )
        if not plain:  # ServerApi refuses it and records why: let it
            self._client.set_health_messages(messages)
            return
        self._model.replace_health_messages([HealthMessage(m["type"], m["message"]) for m in messages])

    def console_log(self, job: dict[str, Any], text: str) -> None:
        if self._console:
            self._client.console_log(job, text)
