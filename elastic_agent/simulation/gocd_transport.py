"""How the simulated GoCD server reaches the plugin.

The model only knows `PluginTransport.send(request_name, body) -> (code, body)`, the shape of GoCD's
`GoPlugin.handle()`. Over HTTP it goes through the bridge contract (docs/architecture.md), exactly as the
bridge jar would; in process (virtual-time simulation) a plain function answers instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import requests
from requests.adapters import HTTPAdapter

from elastic_agent import __version__
from elastic_agent.gocd.versions import BRIDGE_VERSION_HEADER

EXTENSION_VERSION = "5.0"
# GoCD's side of the request names (the plugin's side is executors.dispatch.PREFIX).
REQUEST_PREFIX = "cd.go.elastic-agent."
# The bridge answers with a non-200 code and a plain sentence when the backend cannot be reached; this
# transport stands in for the bridge, so it does the same instead of raising into the model.
BACKEND_UNREACHABLE_STATUS = 502


class PluginTransport(Protocol):
    def send(self, request_name: str, body: str) -> tuple[int, str]:
        """Deliver one GoCD request (full name, e.g. `cd.go.elastic-agent.create-agent`) and return the
        plugin's response code and body."""


class HttpPluginTransport:
    """Speaks the bridge contract to a running backend: `POST <backend>/gocd/plugin/<request-name>`."""

    def __init__(
        self,
        backend_url: str,
        token: str,
        callback_url: str,
        *,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 30.0,
        pool_size: int = 16,
        bridge_version: str | None = __version__,
    ) -> None:
        """`bridge_version`: the jar's version this transport says it is (the jar of this build's, as
        the image pairs them); None sends none, as a jar older than the header does."""
        self._backend_url = backend_url.rstrip("/")
        self._timeout = (connect_timeout_s, read_timeout_s)
        self._session = requests.Session()
        # GoCD calls handle() from many threads at once (create-agent pool, ping, agent polls); a pool as
        # large as that concurrency keeps connections reused instead of reopened per request.
        adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update(
            {
                "Authorization": f"Bearer {token}",
                "X-GoCD-Extension-Version": EXTENSION_VERSION,
                "X-GoCD-Callback-URL": callback_url,
                "Content-Type": "application/json",
            }
        )
        if bridge_version is not None:
            self._session.headers[BRIDGE_VERSION_HEADER] = bridge_version

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        url = f"{self._backend_url}/gocd/plugin/{request_name}"
        try:
            response = self._session.post(url, data=body.encode("utf-8"), timeout=self._timeout)
        except requests.RequestException as error:
            # Name only the failure class: the request body may hold resolved secrets, and some
            # exception messages echo parts of the request.
            return BACKEND_UNREACHABLE_STATUS, f"backend unreachable: {type(error).__name__}"
        return response.status_code, response.text

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> HttpPluginTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# ---- the bodies GoCD sends (docs/architecture.md, "Requests"), built from plain values -----------------
# Key order follows GoCD's. GoCD serialises with Gson, which drops null members: a job of no environment
# carries no `environment` key at all.


def encode(body: object) -> str:
    """Compact JSON, as Gson writes it."""
    return json.dumps(body, separators=(",", ":"))


def create_agent_body(
    auto_register_key: str,
    elastic_profile_properties: Mapping[str, str],
    cluster_profile_properties: Mapping[str, str],
    environment: str | None,
    job_identifier: Mapping[str, Any],
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "auto_register_key": auto_register_key,
        "elastic_agent_profile_properties": dict(elastic_profile_properties),
        "cluster_profile_properties": dict(cluster_profile_properties),
    }
    if environment is not None:
        body["environment"] = environment
    body["job_identifier"] = dict(job_identifier)
    return body


def should_assign_work_body(
    agent_status: Mapping[str, str],
    environment: str | None,
    elastic_profile_properties: Mapping[str, str],
    cluster_profile_properties: Mapping[str, str],
    job_identifier: Mapping[str, Any],
) -> dict[str, Any]:
    body: dict[str, Any] = {"agent": dict(agent_status)}
    if environment is not None:
        body["environment"] = environment
    body["elastic_agent_profile_properties"] = dict(elastic_profile_properties)
    body["cluster_profile_properties"] = dict(cluster_profile_properties)
    body["job_identifier"] = dict(job_identifier)
    return body


def should_assign_work_job_members(
    environment: str | None,
    elastic_profile_properties: Mapping[str, str],
    cluster_profile_properties: Mapping[str, str],
    job_identifier: Mapping[str, Any],
) -> str:
    """The encoded members of a should-assign-work body that depend only on the job. Every idle agent is
    asked about every waiting job at each poll, so the model encodes this part once per job."""
    body = should_assign_work_body({}, environment, elastic_profile_properties, cluster_profile_properties,
                                   job_identifier)  # fmt: skip
    del body["agent"]
    return encode(body)[1:-1]


def should_assign_work_text(encoded_agent_status: str, job_members: str) -> str:
    """The same text as `encode(should_assign_work_body(...))`, from the encoded agent status and the
    job's pre-encoded members."""
    return f'{{"agent":{encoded_agent_status},{job_members}}}'


def job_completion_body(
    elastic_agent_id: str,
    elastic_profile_properties: Mapping[str, str],
    cluster_profile_properties: Mapping[str, str],
    job_identifier: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "elastic_agent_id": elastic_agent_id,
        "elastic_agent_profile_properties": dict(elastic_profile_properties),
        "cluster_profile_properties": dict(cluster_profile_properties),
        "job_identifier": dict(job_identifier),
    }


def server_ping_body(cluster_profiles: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    # Singular `all_cluster_profile_properties` here; plugin-status-report says "profiles"
    # (docs/architecture.md, "Requests").
    return {"all_cluster_profile_properties": [dict(profile) for profile in cluster_profiles]}
