"""GoCD request bodies parsed in one place into typed objects.

Every problem becomes a BadRequest whose message a person can act on; nothing here echoes a value that
might be a secret (property values are never quoted back).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class BadRequest(Exception):
    """The request body is not what GoCD's elastic-agent protocol 5.0 says it must be."""


Properties = dict[str, str]


class Body:
    """A JSON object with typed accessors that explain what is wrong."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    @classmethod
    def parse(cls, text: str, where: str) -> Body:
        if not text or not text.strip():
            raise BadRequest(f"{where}: the request body is empty; a JSON object was expected.")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise BadRequest(
                f"{where}: the request body is not valid JSON ({error.msg} at line {error.lineno}, "
                f"column {error.colno})."
            ) from None
        except ValueError:
            raise BadRequest(f"{where}: the request body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise BadRequest(f"{where}: the request body must be a JSON object, not {_kind(data)}.")
        return cls(data, where)

    def _missing(self, key: str) -> BadRequest:
        return BadRequest(f"{self.where}: the field '{key}' is missing.")

    def _wrong(self, key: str, expected: str, value: Any) -> BadRequest:
        return BadRequest(f"{self.where}: the field '{key}' must be {expected}, not {_kind(value)}.")

    def string(self, key: str) -> str:
        if key not in self.data or self.data[key] is None:
            raise self._missing(key)
        value = self.data[key]
        if not isinstance(value, str):
            raise self._wrong(key, "a string", value)
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(key, "a string", value)
        return value

    def object(self, key: str) -> Body:
        if key not in self.data or self.data[key] is None:
            raise self._missing(key)
        value = self.data[key]
        if not isinstance(value, dict):
            raise self._wrong(key, "an object", value)
        return Body(value, f"{self.where}, '{key}'")

    def optional_object(self, key: str) -> Body | None:
        return None if self.data.get(key) is None else self.object(key)

    def properties(self, key: str) -> Properties:
        """A map of profile properties: string keys; values strings or null (null is dropped)."""
        return _properties(self.object(key).data, f"{self.where}, '{key}'")

    def properties_list(self, key: str) -> list[Properties]:
        if key not in self.data or self.data[key] is None:
            raise self._missing(key)
        value = self.data[key]
        if not isinstance(value, list):
            raise self._wrong(key, "a list of objects", value)
        result = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise BadRequest(
                    f"{self.where}: item {index} of '{key}' must be an object, not {_kind(item)}."
                )
            result.append(_properties(item, f"{self.where}, '{key}' item {index}"))
        return result


def _properties(data: Mapping[str, Any], where: str) -> Properties:
    result: Properties = {}
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise BadRequest(f"{where}: the value of '{key}' must be a string, not {_kind(value)}.")
        result[str(key)] = value if isinstance(value, str) else str(value)
    return result


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass(frozen=True)
class JobIdentifier:
    pipeline_name: str
    pipeline_label: str
    pipeline_counter: int
    stage_name: str
    stage_counter: str
    job_name: str
    job_id: int

    @classmethod
    def parse(cls, body: Body) -> JobIdentifier:
        return cls(
            pipeline_name=body.string("pipeline_name"),
            pipeline_label=body.optional_string("pipeline_label") or "",
            pipeline_counter=_integer(body, "pipeline_counter"),
            stage_name=body.string("stage_name"),
            # GoCD sends stage_counter as a string; tolerate a number, it means the same.
            stage_counter=str(_integer(body, "stage_counter")),
            job_name=body.string("job_name"),
            job_id=_integer(body, "job_id"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline_name": self.pipeline_name,
            "pipeline_label": self.pipeline_label,
            "pipeline_counter": self.pipeline_counter,
            "stage_name": self.stage_name,
            "stage_counter": self.stage_counter,
            "job_name": self.job_name,
            "job_id": self.job_id,
        }

    @property
    def label(self) -> str:
        """How GoCD names a job run: pipeline/counter/stage/counter/job."""
        return (
            f"{self.pipeline_name}/{self.pipeline_counter}/{self.stage_name}/"
            f"{self.stage_counter}/{self.job_name}"
        )


def _integer(body: Body, key: str) -> int:
    if key not in body.data or body.data[key] is None:
        raise body._missing(key)
    value = body.data[key]
    if isinstance(value, bool):
        raise body._wrong(key, "a whole number", value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise body._wrong(key, "a whole number", value)


@dataclass(frozen=True)
class AgentMetadata:
    agent_id: str
    agent_state: str
    build_state: str
    config_state: str

    @classmethod
    def parse(cls, body: Body) -> AgentMetadata:
        return cls(
            agent_id=body.string("agent_id"),
            agent_state=body.optional_string("agent_state") or "Unknown",
            build_state=body.optional_string("build_state") or "Unknown",
            config_state=body.optional_string("config_state") or "Unknown",
        )

    @property
    def building(self) -> bool:
        return self.agent_state == "Building" or self.build_state in ("Building", "Cancelled")


@dataclass(frozen=True)
class CreateAgentRequest:
    auto_register_key: str
    elastic_profile: Properties
    cluster_profile: Properties
    environment: str | None
    job: JobIdentifier

    @classmethod
    def parse(cls, text: str) -> CreateAgentRequest:
        body = Body.parse(text, "create-agent")
        return cls(
            auto_register_key=body.string("auto_register_key"),
            elastic_profile=body.properties("elastic_agent_profile_properties"),
            cluster_profile=body.properties("cluster_profile_properties"),
            environment=body.optional_string("environment") or None,
            job=JobIdentifier.parse(body.object("job_identifier")),
        )

    def __repr__(self) -> str:  # never show the key or properties (they may be secrets)
        return f"CreateAgentRequest(job={self.job.label!r}, job_id={self.job.job_id})"


@dataclass(frozen=True)
class ShouldAssignWorkRequest:
    agent: AgentMetadata
    environment: str | None
    elastic_profile: Properties
    cluster_profile: Properties
    job: JobIdentifier

    @classmethod
    def parse(cls, text: str) -> ShouldAssignWorkRequest:
        body = Body.parse(text, "should-assign-work")
        return cls(
            agent=AgentMetadata.parse(body.object("agent")),
            environment=body.optional_string("environment") or None,
            elastic_profile=body.properties("elastic_agent_profile_properties"),
            cluster_profile=body.properties("cluster_profile_properties"),
            job=JobIdentifier.parse(body.object("job_identifier")),
        )

    def __repr__(self) -> str:
        return f"ShouldAssignWorkRequest(agent={self.agent.agent_id!r}, job_id={self.job.job_id})"


@dataclass(frozen=True)
class JobCompletionRequest:
    agent_id: str
    elastic_profile: Properties
    cluster_profile: Properties
    job: JobIdentifier

    @classmethod
    def parse(cls, text: str) -> JobCompletionRequest:
        body = Body.parse(text, "job-completion")
        return cls(
            agent_id=body.string("elastic_agent_id"),
            elastic_profile=body.properties("elastic_agent_profile_properties"),
            cluster_profile=body.properties("cluster_profile_properties"),
            job=JobIdentifier.parse(body.object("job_identifier")),
        )

    def __repr__(self) -> str:
        return f"JobCompletionRequest(agent={self.agent_id!r}, job_id={self.job.job_id})"


@dataclass(frozen=True)
class ServerPingRequest:
    cluster_profiles: list[Properties]

    @classmethod
    def parse(cls, text: str) -> ServerPingRequest:
        body = Body.parse(text, "server-ping")
        return cls(cluster_profiles=body.properties_list("all_cluster_profile_properties"))


@dataclass(frozen=True)
class AgentStatusReportRequest:
    cluster_profile: Properties
    agent_id: str | None
    job: JobIdentifier | None

    @classmethod
    def parse(cls, text: str) -> AgentStatusReportRequest:
        body = Body.parse(text, "agent-status-report")
        job_body = body.optional_object("job_identifier")
        agent_id = body.optional_string("elastic_agent_id")
        if agent_id is None and job_body is None:
            raise BadRequest("agent-status-report: give 'elastic_agent_id' or 'job_identifier'.")
        return cls(
            cluster_profile=body.properties("cluster_profile_properties"),
            agent_id=agent_id,
            job=JobIdentifier.parse(job_body) if job_body else None,
        )
