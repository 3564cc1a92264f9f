"""Every GoCD request body, parsed in one place into typed objects (docs/architecture.md,
"Requests").

Executors call `<Request>.parse(text)` and work on the result; a body that does not fit raises
BadRequest with a sentence (body.py). Nothing here echoes a value that might be a secret, and no
request's repr() shows a registration key or a property. The cluster profile a request carries is parsed
once per distinct set of properties (`cluster_profile`), in a cache keyed by a digest, never by the
properties themselves (they hold the security token).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, TypeVar

from elastic_agent.caching import DigestCache, digest, parts_digest
from elastic_agent.gocd.body import LONG_MAX, BadRequest, Body, Properties, plain_properties
from elastic_agent.kube.namespace import blank_namespace
from profiles.cluster import ClusterProfile

Value = TypeVar("Value")


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
            pipeline_counter=_count(body, "pipeline_counter"),
            stage_name=body.string("stage_name"),
            # GoCD sends stage_counter as a string; tolerate a number, it means the same.
            stage_counter=str(_count(body, "stage_counter")),
            job_name=body.string("job_name"),
            job_id=_count(body, "job_id"),
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
        if not (0 <= counter <= LONG_MAX and 0 <= job_id <= LONG_MAX):
            return None
        if type(stage_counter) is not str or not stage_counter.isdecimal() or not stage_counter.isascii():
            return None
        if len(stage_counter) > 19:
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


def _count(body: Body, key: str) -> int:
    """GoCD's counters and job ids count from 1; a negative one would also make an invalid pod label
    (the job id is one)."""
    value = body.integer(key)
    if value < 0:
        raise BadRequest(f"{body.where}: the field '{key}' must not be negative.")
    return value


@dataclass(frozen=True)
class Agent:
    """An elastic agent as GoCD describes it, in should-assign-work and in list-agents."""

    agent_id: str
    agent_state: str
    build_state: str
    config_state: str

    @classmethod
    def parse(cls, body: Body) -> Agent:
        return cls(
            agent_id=body.string("agent_id"),
            agent_state=body.optional_string("agent_state") or "Unknown",
            build_state=body.optional_string("build_state") or "Unknown",
            config_state=body.optional_string("config_state") or "Unknown",
        )

    @classmethod
    def well_formed(cls, data: object) -> Agent | None:
        """The agent when every field is a non-empty string, as GoCD sends it; else None."""
        if type(data) is not dict:
            return None
        agent_id, agent_state = data.get("agent_id"), data.get("agent_state")
        build_state, config_state = data.get("build_state"), data.get("config_state")
        # Spelt out rather than a loop over the keys: every should-assign-work reads one.
        if not (type(agent_id) is type(agent_state) is type(build_state) is type(config_state) is str):
            return None
        if not (agent_state and build_state and config_state):
            return None
        return cls(agent_id, agent_state, build_state, config_state)

    @property
    def building(self) -> bool:
        # A cancelling agent shows agent_state Building; build_state Cancelled means it is still busy.
        return self.agent_state == "Building" or self.build_state in ("Building", "Cancelled")


_clusters: DigestCache[ClusterProfile] = DigestCache(128)


def properties_key(props: Mapping[str, str]) -> bytes:
    """A digest of a properties map, in arrival order, unsorted: GoCD sends a profile's properties in the
    same order each time, and another order only costs one more cache entry."""
    return parts_digest(list(chain.from_iterable(props.items())))


def cluster_profile(props: Mapping[str, str], key: bytes | None = None) -> ClusterProfile:
    """The parsed cluster profile (raises ProfileError); `key` is `properties_key(props)` when known.
    Parsing validates URLs, durations and certificates, and every request carries a profile, so identical
    properties are parsed once. A blank namespace is the one the official plugin would take here
    (kube/namespace.py)."""
    return _clusters.get(
        key or properties_key(props),
        lambda: ClusterProfile.from_properties(dict(props), blank_namespace=blank_namespace().name),
    )


def spec_key(elastic: Mapping[str, str], environment: str | None, pipeline: str) -> bytes:
    """A digest of what a job's pod spec depends on besides the cluster profile (pool.job_spec): the
    elastic profile's properties (they may hold resolved secrets), the environment and the pipeline."""
    return parts_digest([*chain.from_iterable(elastic.items()), environment or "", pipeline])


class _WithCluster:
    """For requests that carry one cluster profile's properties. Parsed once per request object, which
    for should-assign-work answers every repeat of its body."""

    cluster_profile: Properties

    @property
    def cluster(self) -> ClusterProfile:
        return _memo(self, "cluster", lambda: cluster_profile(self.cluster_profile))


def _memo(request: object, name: str, make: Callable[[], Value]) -> Value:
    """A value computed once per (frozen) request object. functools.cached_property would do, but in
    Python 3.11 it takes a lock at every first access, which should-assign-work would pay for on every
    new body (the lock is gone in 3.12)."""
    memo = request.__dict__
    try:
        value: Value = memo[name]
    except KeyError:
        value = memo[name] = make()
    return value


@dataclass(frozen=True)
class CreateAgentRequest(_WithCluster):
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
class ShouldAssignWorkRequest(_WithCluster):
    agent: Agent
    environment: str | None
    elastic_profile: Properties
    cluster_profile: Properties
    job: JobIdentifier
    # Derived once, when the body is first parsed: every repeat of the body is answered by this object,
    # and a plain attribute costs the hot path least.
    spec_key: bytes = field(init=False, repr=False, compare=False)
    cluster_key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The profile maps become equal ones shared with earlier requests (see _shared_properties).
        assign = object.__setattr__
        cluster_key = properties_key(self.cluster_profile)
        assign(self, "cluster_key", cluster_key)
        assign(self, "cluster_profile", _shared_properties.get(cluster_key, lambda: self.cluster_profile))
        elastic = self.elastic_profile
        assign(self, "elastic_profile", _shared_properties.get(properties_key(elastic), lambda: elastic))
        assign(self, "spec_key", spec_key(self.elastic_profile, self.environment, self.job.pipeline_name))

    @property
    def cluster(self) -> ClusterProfile:
        return _memo(self, "cluster", lambda: cluster_profile(self.cluster_profile, self.cluster_key))

    def asked_by(self, agent: Agent) -> ShouldAssignWorkRequest:
        """The same job's request from another agent (or the same agent in another state), with the keys
        derived from the job's part and its parsed cluster profile carried over rather than derived
        again: every idle agent asks about every waiting job at each poll."""
        request = object.__new__(ShouldAssignWorkRequest)
        request.__dict__.update(self.__dict__)
        object.__setattr__(request, "agent", agent)
        return request

    @classmethod
    def parse(cls, text: str) -> ShouldAssignWorkRequest:
        # An idle agent asks about the same waiting job at every poll, so most bodies repeat one seen
        # seconds earlier (two in three in the simulator's standard trace). The request is immutable, so
        # the same object answers every repeat. Bodies that fail to parse raise and are not cached.
        return _should_assign_work.get(digest(text), lambda: cls.parse_uncached(text))

    @classmethod
    def parse_uncached(cls, text: str) -> ShouldAssignWorkRequest:
        body = Body.parse(text, "should-assign-work")
        return cls.well_formed(body.data) or cls.checked(body)

    @classmethod
    def checked(cls, body: Body) -> ShouldAssignWorkRequest:
        """Field by field, converting what GoCD may send loosely and explaining what is wrong."""
        return cls(
            agent=Agent.parse(body.object("agent")),
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
        elastic = plain_properties(data.get("elastic_agent_profile_properties"))
        cluster = plain_properties(data.get("cluster_profile_properties"))
        environment = data.get("environment")
        if type(agent) is not dict or elastic is None or cluster is None:
            return None
        if environment is not None and type(environment) is not str:
            return None
        identifier = JobIdentifier.well_formed(job)
        if identifier is None:
            return None
        status = Agent.well_formed(agent)
        if status is None:
            return None
        return cls(status, environment or None, elastic, cluster, identifier)

    def __repr__(self) -> str:
        return f"ShouldAssignWorkRequest(agent={self.agent.agent_id!r}, job_id={self.job.job_id})"


_should_assign_work: DigestCache[ShouldAssignWorkRequest] = DigestCache(4096)
# The profile maps of cached should-assign-work requests: a few distinct maps, asked about in thousands of
# bodies. Without sharing, each cached request would keep its own copy (dicts and strings, a cluster
# profile's CA certificate among them), allocated among the request's short-lived garbage, so that
# long-lived blocks end up scattered over the C allocator's heaps (the soak measured it: RESULTS.md
# section 8).
# Keyed by digest like every cache here; the maps are never changed.
_shared_properties: DigestCache[Properties] = DigestCache(256)


def cache_sizes() -> dict[str, int]:
    """Entries in the process-wide parse caches (/metrics shows them, the soak watches them)."""
    return {
        "parsed_cluster_profiles": len(_clusters),
        "parsed_should_assign_work": len(_should_assign_work),
        "shared_profile_properties": len(_shared_properties),
    }


def cache_capacities() -> dict[str, int]:
    return {
        "parsed_cluster_profiles": _clusters.capacity,
        "parsed_should_assign_work": _should_assign_work.capacity,
        "shared_profile_properties": _shared_properties.capacity,
    }


@dataclass(frozen=True)
class JobCompletionRequest(_WithCluster):
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
class AgentStatusReportRequest(_WithCluster):
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


@dataclass(frozen=True)
class ClusterStatusReportRequest(_WithCluster):
    cluster_profile: Properties

    @classmethod
    def parse(cls, text: str) -> ClusterStatusReportRequest:
        body = Body.parse(text, "cluster-status-report")
        return cls(cluster_profile=body.properties("cluster_profile_properties"))


@dataclass(frozen=True)
class PluginStatusReportRequest:
    """The body lists the cluster profiles (`all_cluster_profiles_properties`, plural 'profiles'); the
    page shows the clusters this backend is connected to, so an empty body is accepted too."""

    cluster_profiles: list[Properties]

    @classmethod
    def parse(cls, text: str) -> PluginStatusReportRequest:
        if not text.strip():
            return cls([])
        body = Body.parse(text, "plugin-status-report")
        if body.data.get("all_cluster_profiles_properties") is None:
            return cls([])
        return cls(body.properties_list("all_cluster_profiles_properties"))


CHANGES = ("created", "updated", "deleted")


@dataclass(frozen=True)
class ClusterProfileChangedRequest:
    status: str

    @classmethod
    def parse(cls, text: str) -> ClusterProfileChangedRequest:
        body = Body.parse(text, "cluster-profile-changed")
        status = body.string("status")
        if status not in CHANGES:
            raise BadRequest("cluster-profile-changed: 'status' must be created, updated or deleted.")
        return cls(status)


@dataclass(frozen=True)
class ValidateProfileRequest:
    """validate-cluster-profile and validate-elastic-agent-profile: a flat object of the profile's
    values. Validation reports bad values itself (profiles.validation); only a body that is not an
    object is a bad request."""

    values: dict[str, Any]

    @classmethod
    def parse(cls, text: str, where: str) -> ValidateProfileRequest:
        return cls(dict(Body.parse(text, where).data))


@dataclass(frozen=True)
class MigrateConfigRequest:
    """The plugin's whole configuration. The server replaces it with the answer, so everything it holds
    is kept, also keys this plugin does not know."""

    data: dict[str, Any]

    @classmethod
    def parse(cls, text: str) -> MigrateConfigRequest:
        body = Body.parse(text, "migrate-config")
        settings = body.optional_object("plugin_settings")
        return cls(
            {
                **body.data,
                "plugin_settings": dict(settings.data) if settings is not None else {},
                "cluster_profiles": body.list_of_objects("cluster_profiles", default=[]),
                "elastic_agent_profiles": body.list_of_objects("elastic_agent_profiles", default=[]),
            }
        )

    @property
    def elastic_agent_profiles(self) -> list[dict[str, Any]]:
        profiles: list[dict[str, Any]] = self.data["elastic_agent_profiles"]
        return profiles
