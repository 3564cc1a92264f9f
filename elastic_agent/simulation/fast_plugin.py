"""This project's backend for the advisor's fast path: the real executors, pool and reaper, without JSON
text between them and the simulated GoCD server. The advisor runs many simulations of long traces, and
the text is not what it judges: the parsers and the bridge contract are tested on the full path, which
the benchmarks keep, so here the text would cost time and decide nothing.

Both directions skip only the text:
- GoCD to the plugin: `FastProjectPlugin.send_value` gets each request's body as the value the full path
  would encode (fast_gocd.py), builds the request object from it with the typed constructors the parsers
  use for well-formed bodies (`ShouldAssignWorkRequest.well_formed`, `JobIdentifier.well_formed`,
  `plain_properties`), and calls the executor behind the parser (`executors.agent_lifecycle.*_request`,
  `executors.server_ping.server_ping_request`) inside the same `answer_safely` as the HTTP app. A body
  these constructors do not take, and any other request, goes the full path: encoded and parsed.
- The plugin to GoCD: `DirectGoCDServer` is the backend's `GoCDServer`, answered by the model's methods
  as `ServerApi` would, with the answers `GoCDClient` would read from its JSON; whatever is not the plain
  case (console lines when they are kept, health messages ServerApi would refuse) goes through
  `GoCDClient` and `ServerApi` as in the full path.

Nothing else differs from `ProjectPlugin`: the same backend wiring (inprocess.py), deferred writes and
cluster port. tests/scenarios/test_fast_path.py shows both give the same pods, waits and assignments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from elastic_agent.gocd.body import plain_properties
from elastic_agent.gocd.messages import (
    Agent,
    CreateAgentRequest,
    JobCompletionRequest,
    JobIdentifier,
    ServerPingRequest,
    ShouldAssignWorkRequest,
)
from elastic_agent.gocd.server import GoCDClient, GoCDError, GoCDServer, ServerInfo
from elastic_agent.service.app import answer_safely
from elastic_agent.simulation.gocd_model import HealthMessage, SimulatedGoCD
from elastic_agent.simulation.gocd_records import AgentState, BuildState, ConfigState
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from elastic_agent.simulation.inprocess import (
    CALLBACK_URL,
    InProcessServerCalls,
    InProcessTransport,
    build_inprocess_backend,
)
from elastic_agent.simulation.virtual_time import PluginWorld, ProjectPlugin
from executors.agent_lifecycle import create_agent_request, job_completion_request, should_assign_work_request
from executors.base import RequestContext
from executors.base import Response as PluginResponse
from executors.server_ping import server_ping_request

AgentStates = tuple[AgentState, BuildState, ConfigState]


class DirectGoCDServer:
    """`GoCDServer` answered by the simulated server's methods, without JSON between them."""

    def __init__(self, model: SimulatedGoCD, client: GoCDClient, *, console: bool) -> None:
        self._model = model
        self._client = client  # the full path, for what is not the plain case
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


class _OneServer:
    def __init__(self, server: GoCDServer) -> None:
        self.server = server

    def for_callback(self, header_url: str | None) -> GoCDServer:
        return self.server


Executor = Callable[[Any, RequestContext], PluginResponse]


def _create_agent(body: dict[str, Any]) -> CreateAgentRequest | None:
    key, job = body.get("auto_register_key"), JobIdentifier.well_formed(body.get("job_identifier"))
    elastic = plain_properties(body.get("elastic_agent_profile_properties"))
    cluster = plain_properties(body.get("cluster_profile_properties"))
    environment = body.get("environment")
    if type(key) is not str or job is None or elastic is None or cluster is None:
        return None
    if environment is not None and type(environment) is not str:
        return None
    return CreateAgentRequest(key, elastic, cluster, environment or None, job)


def _job_completion(body: dict[str, Any]) -> JobCompletionRequest | None:
    agent_id, job = body.get("elastic_agent_id"), JobIdentifier.well_formed(body.get("job_identifier"))
    elastic = plain_properties(body.get("elastic_agent_profile_properties"))
    cluster = plain_properties(body.get("cluster_profile_properties"))
    if type(agent_id) is not str or job is None or elastic is None or cluster is None:
        return None
    return JobCompletionRequest(agent_id, elastic, cluster, job)


def _server_ping(body: dict[str, Any]) -> ServerPingRequest | None:
    profiles = body.get("all_cluster_profile_properties")
    if type(profiles) is not list:
        return None
    plain = [plain_properties(item) for item in profiles]
    if any(item is None for item in plain):
        return None
    return ServerPingRequest([item for item in plain if item is not None])


# Request name -> (the request from the body's value, or None for the full path; its executor).
_READERS: dict[str, tuple[Callable[[dict[str, Any]], Any], Executor]] = {
    REQUEST_PREFIX + "create-agent": (_create_agent, create_agent_request),
    REQUEST_PREFIX + "should-assign-work": (ShouldAssignWorkRequest.well_formed, should_assign_work_request),
    REQUEST_PREFIX + "job-completion": (_job_completion, job_completion_request),
    REQUEST_PREFIX + "server-ping": (_server_ping, server_ping_request),
}


class FastProjectPlugin(ProjectPlugin):
    """This project's backend in process, reached with values instead of JSON text."""

    def __init__(self, world: PluginWorld) -> None:
        console = world.settings.console
        if world.model is None:
            raise ValueError("the fast path needs the simulated GoCD server itself (PluginWorld.model)")
        client = GoCDClient(InProcessServerCalls(world.api, console=console))
        gocd = DirectGoCDServer(world.model, client, console=console)
        self.backend = build_inprocess_backend(world.clock, world.api, world.cluster_factory, console=console)
        self.backend.backend.gocd_servers = _OneServer(gocd)
        self.transport = InProcessTransport(self.backend.backend)
        self._context = RequestContext(self.backend.backend, CALLBACK_URL)
        self.settle_s = 0.0

    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        reader = _READERS.get(request_name)
        request = reader[0](body) if reader is not None else None
        if reader is None or request is None:
            return self.send(request_name, encode(body))
        started = time.perf_counter()
        executor, context = reader[1], self._context
        answer = answer_safely(request_name, lambda: executor(request, context), lambda: body)
        transport = self.transport
        transport.requests[request_name] = transport.requests.get(request_name, 0) + 1
        spent = time.perf_counter() - started
        transport.seconds[request_name] = transport.seconds.get(request_name, 0.0) + spent
        return answer.status, answer.body
