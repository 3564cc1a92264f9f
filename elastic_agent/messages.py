"""GoCD request bodies parsed in one place into typed objects.

Every problem becomes a BadRequest whose message a person can act on; nothing here echoes a value that
might be a secret (property values are never quoted back).
"""

from __future__ import annotations

import functools
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


def _plain_properties(value: object) -> Properties | None:
    """A copy of a properties map whose values are all strings; None for anything else (nulls, numbers,
    a wrong type), which `_properties` then converts or explains."""
    if type(value) is not dict or not all(type(item) is str for item in value.values()):
        return None
    return dict(value)


_AGENT_STATE_KEYS = ("agent_state", "build_state", "config_state")


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

    @classmethod
    def well_formed(cls, data: object) -> JobIdentifier | None:
        """The identifier when every field has exactly GoCD's type, else None (then `parse` explains)."""
        if type(data) is not dict:
            return None
        pipeline, stage, name = data.get("pipeline_name"), data.get("stage_name"), data.get("job_name")
        counter, job_id = data.get("pipeline_counter"), data.get("job_id")
        stage_counter, label = data.get("stage_counter"), data.get("pipeline_label")
        if not (type(pipeline) is type(stage) is type(name) is str and type(counter) is type(job_id) is int):
            return None
        if type(stage_counter) is not str or not stage_counter.isdecimal() or not stage_counter.isascii():
            return None
        if label is not None and type(label) is not str:
            return None
        return cls(pipeline, label or "", counter, stage, str(int(stage_counter)), name, job_id)

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
        return _parse_should_assign_work(text)

    @classmethod
    def parse_uncached(cls, text: str) -> ShouldAssignWorkRequest:
        body = Body.parse(text, "should-assign-work")
        return cls.well_formed(body.data) or cls.checked(body)

    @classmethod
    def checked(cls, body: Body) -> ShouldAssignWorkRequest:
        """Field by field, converting what GoCD may send loosely and explaining what is wrong."""
        return cls(
            agent=AgentMetadata.parse(body.object("agent")),
            environment=body.optional_string("environment") or None,
            elastic_profile=body.properties("elastic_agent_profile_properties"),
            cluster_profile=body.properties("cluster_profile_properties"),
            job=JobIdentifier.parse(body.object("job_identifier")),
        )

    @classmethod
    def well_formed(cls, data: Mapping[str, Any]) -> ShouldAssignWorkRequest | None:
        """The request, when every field has exactly the type GoCD sends; else None, and `checked`
        converts or explains. Every idle agent asks about every waiting job at each poll,
        so this is the plugin's most frequent request; the checked path costs several times more."""
        agent, job = data.get("agent"), data.get("job_identifier")
        elastic = _plain_properties(data.get("elastic_agent_profile_properties"))
        cluster = _plain_properties(data.get("cluster_profile_properties"))
        environment = data.get("environment")
        if type(agent) is not dict or elastic is None or cluster is None:
            return None
        if environment is not None and type(environment) is not str:
            return None
        identifier = JobIdentifier.well_formed(job)
        agent_id, states = agent.get("agent_id"), _AGENT_STATE_KEYS
        if identifier is None or type(agent_id) is not str:
            return None
        if not all(type(agent.get(key)) is str and agent[key] for key in states):
            return None
        metadata = AgentMetadata(agent_id, agent["agent_state"], agent["build_state"], agent["config_state"])
        return cls(metadata, environment or None, elastic, cluster, identifier)

    def __repr__(self) -> str:
        return f"ShouldAssignWorkRequest(agent={self.agent.agent_id!r}, job_id={self.job.job_id})"


# An idle agent asks about the same waiting job at every poll, so most should-assign-work bodies repeat
# one seen seconds earlier (two in three in the simulator's standard trace). The request is immutable and
# nothing mutates its property maps, so the same object can answer every repeat. Bodies that fail to
# parse raise and are not cached.
_parse_should_assign_work = functools.lru_cache(maxsize=4096)(ShouldAssignWorkRequest.parse_uncached)


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
