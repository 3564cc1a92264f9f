"""Calls from the backend to the GoCD server.

`GoCDClient` speaks GoCD's server APIs (what to send, how to read the answer) over a `ServerTransport`,
GoCD's `GoApplicationAccessor.submit(api, version, body)` in one method. In production the transport is
the bridge's callback endpoint over HTTP (`POST <callback-url>/gocd/server/<api-name>` with the shared
token and `X-GoCD-API-Version`; docs/architecture.md, "The bridge contract"); the simulator passes the
simulated server's own `submit`, so bodies and answers are read by this same code.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3

from elastic_agent.gocd.messages import Agent
from elastic_agent.gocd.shared_token import SharedToken, shared

log = logging.getLogger(__name__)

LIST_AGENTS = "go.processor.elastic-agents.list-agents"
DISABLE_AGENTS = "go.processor.elastic-agents.disable-agents"
DELETE_AGENTS = "go.processor.elastic-agents.delete-agents"
SERVER_INFO = "go.processor.server-info.get"
ADD_HEALTH_MESSAGES = "go.processor.server-health.add-messages"
CONSOLE_LOG = "go.processor.console-log.append"

API_VERSIONS = {
    LIST_AGENTS: "1.0",
    DISABLE_AGENTS: "1.0",
    DELETE_AGENTS: "1.0",
    SERVER_INFO: "1.0",
    ADD_HEALTH_MESSAGES: "1.0",
    CONSOLE_LOG: "2.0",
}


class GoCDError(Exception):
    """The GoCD server (or the bridge in front of it) could not be reached or refused a call."""


@dataclass(frozen=True)
class ServerInfo:
    server_id: str
    site_url: str | None
    secure_site_url: str | None


class GoCDServer(Protocol):
    """What the pool and executors need from GoCD."""

    def list_agents(self) -> list[Agent]: ...

    def disable_agents(self, agent_ids: Iterable[str]) -> None: ...

    def delete_agents(self, agent_ids: Iterable[str]) -> None: ...

    def server_info(self) -> ServerInfo: ...

    def set_health_messages(self, messages: list[dict[str, str]]) -> None: ...

    def console_log(self, job: dict[str, Any], text: str) -> None: ...


class GoCDServerSource(Protocol):
    def for_callback(self, header_url: str | None) -> GoCDServer:
        """The server of a request, from its X-GoCD-Callback-URL header (None: the latest or default)."""


class ServerTransport(Protocol):
    def submit(self, api: str, version: str, body: str) -> tuple[int, str]:
        """GoCD's answer (status, body) to one server call; raises GoCDError when there is none."""


class GoCDClient:
    """GoCDServer over a transport. Thread-safe when the transport is."""

    def __init__(self, transport: ServerTransport) -> None:
        self.transport = transport

    def _call(self, api: str, body: Any | None = None) -> Any:
        payload = "" if body is None else json.dumps(body)
        status, text = self.transport.submit(api, API_VERSIONS[api], payload)
        if status != 200:
            # GoCD answers with a short reason; it carries no secret of ours, but keep it short.
            reason = text[:200].strip()
            raise GoCDError(f"GoCD answered {status} to {api}: {reason or 'no reason given'}")
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:
            raise GoCDError(f"GoCD's answer to {api} is not JSON") from None

    def list_agents(self) -> list[Agent]:
        data = self._call(LIST_AGENTS)
        if not isinstance(data, list):
            raise GoCDError("GoCD's list-agents answer is not a list")
        return [
            Agent(
                agent_id=str(item.get("agent_id")),
                agent_state=str(item.get("agent_state", "Unknown")),
                build_state=str(item.get("build_state", "Unknown")),
                config_state=str(item.get("config_state", "Unknown")),
            )
            for item in data
            if isinstance(item, dict) and item.get("agent_id")
        ]

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        ids = [{"agent_id": agent_id} for agent_id in agent_ids]
        if ids:
            self._call(DISABLE_AGENTS, ids)

    def delete_agents(self, agent_ids: Iterable[str]) -> None:
        ids = [{"agent_id": agent_id} for agent_id in agent_ids]
        if ids:
            self._call(DELETE_AGENTS, ids)

    def server_info(self) -> ServerInfo:
        data = self._call(SERVER_INFO)
        if not isinstance(data, dict) or not data.get("server_id"):
            raise GoCDError("GoCD's server-info answer has no server_id")
        return ServerInfo(str(data["server_id"]), data.get("site_url"), data.get("secure_site_url"))

    def set_health_messages(self, messages: list[dict[str, str]]) -> None:
        self._call(ADD_HEALTH_MESSAGES, messages)

    def console_log(self, job: dict[str, Any], text: str) -> None:
        body = {
            "pipeline_name": job["pipeline_name"],
            "pipeline_counter": job["pipeline_counter"],
            "stage_name": job["stage_name"],
            "stage_counter": job["stage_counter"],
            "job_name": job["job_name"],
            "text": text,
        }
        self._call(CONSOLE_LOG, body)


class BridgeTransport:
    """The bridge's callback endpoint over HTTP. Thread-safe (urllib3's pool is)."""

    def __init__(
        self, callback_url: str, token: SharedToken, http: urllib3.PoolManager, timeout_s: float = 10.0
    ):
        self.callback_url = callback_url.rstrip("/")
        self._token = token
        self._http = http
        self._timeout = urllib3.Timeout(connect=min(3.0, timeout_s), read=timeout_s)

    def submit(self, api: str, version: str, body: str) -> tuple[int, str]:
        try:
            response = self._http.request(
                "POST",
                f"{self.callback_url}/gocd/server/{api}",
                body=body.encode(),
                headers={
                    "Authorization": f"Bearer {self._token.current()}",
                    "X-GoCD-API-Version": version,
                    "Content-Type": "application/json",
                },
                timeout=self._timeout,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as error:
            raise GoCDError(
                f"the GoCD server could not be reached at {self.callback_url} ({error})"
            ) from None
        return response.status, response.data.decode("utf-8", "replace")


class GoCDServers:
    """One client per callback URL (the bridge names it in every request), sharing one connection pool.
    `_lock` guards `_clients` and `_last_url`."""

    def __init__(
        self, token: str | SharedToken, default_callback_url: str | None, timeout_s: float = 10.0
    ) -> None:
        self._token = shared(token)
        self._default = default_callback_url
        self._timeout = timeout_s
        self._http = urllib3.PoolManager(num_pools=4, maxsize=8)
        self._clients: dict[str, GoCDClient] = {}
        self._lock = threading.Lock()
        self._last_url: str | None = default_callback_url

    def for_callback(self, header_url: str | None) -> GoCDServer:
        with self._lock:
            url = header_url or self._last_url or self._default
            if not url:
                raise GoCDError(
                    "no callback URL: the request had no X-GoCD-Callback-URL header and "
                    "GOCD_ELASTIC_AGENT_CALLBACK_URL is not set"
                )
            if header_url:
                self._last_url = header_url
            client = self._clients.get(url)
            if client is None:
                transport = BridgeTransport(url, self._token, self._http, self._timeout)
                client = self._clients[url] = GoCDClient(transport)
            return client
