"""The backend's long-lived parts wired together: one pool per cluster, the GoCD clients, health.

Requests carry profile properties, not profile ids, so a cluster is found by where it is: its URL and
namespace. The GoCD server id (needed in every pod's labels) is asked once and kept.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from elastic_agent.clock import Clock
from elastic_agent.gocd import GoCDError, GoCDServer, GoCDServers
from elastic_agent.health import HealthReporter
from elastic_agent.job_spec import JobSpec, JobSpecs
from elastic_agent.kube.port import ClusterPort
from elastic_agent.narrator import Narrator
from elastic_agent.pods import PodIdentity, cluster_label
from elastic_agent.pool import ClusterPool
from elastic_agent.registration_keys import RegistrationKeys
from elastic_agent.remote_file import RemoteFileFetcher
from profiles.cluster import ClusterProfile

log = logging.getLogger(__name__)

ClusterFactory = Callable[[ClusterProfile, PodIdentity, Clock], ClusterPort]


@dataclass
class Backend:
    clock: Clock
    gocd_servers: GoCDServers
    cluster_factory: ClusterFactory
    remote_files: RemoteFileFetcher
    health: HealthReporter = field(default_factory=HealthReporter)
    narrator: Narrator = field(default_factory=Narrator)
    keys: RegistrationKeys | None = None
    job_specs: JobSpecs | None = None
    sync_timeout_s: float = 10.0
    _pools: dict[str, ClusterPool] = field(default_factory=dict)
    _credentials: dict[str, str] = field(default_factory=dict)
    _server_id: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.keys is None:
            self.keys = RegistrationKeys(self.clock)
        if self.job_specs is None:
            self.job_specs = JobSpecs(self.clock, self.remote_files.fetch)

    def spec(
        self, elastic: Mapping[str, str], cluster: ClusterProfile, environment: str | None, pipeline: str
    ) -> JobSpec:
        assert self.job_specs is not None
        return self.job_specs.spec(elastic, cluster, environment, pipeline)

    def server_id(self, gocd: GoCDServer) -> str:
        if self._server_id is None:
            info = gocd.server_info()
            with self._lock:
                self._server_id = info.server_id
        return self._server_id

    def pool(self, profile: ClusterProfile, gocd: GoCDServer) -> ClusterPool:
        """The pool of the profile's cluster, connected and synced on first use."""
        key = cluster_label(profile.cluster_key)
        credentials = _fingerprint_credentials(profile)
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None and self._credentials.get(key) != credentials:
                # New token or CA for the same cluster: reconnect with them.
                pool.stop()
                pool = None
            if pool is not None:
                pool.settings = profile
                return pool
        identity = PodIdentity(server_id=self.server_id(gocd), cluster=key)
        port = self.cluster_factory(profile, identity, self.clock)
        pool = ClusterPool(port, identity, profile, self.clock, self.narrator, self.keys)
        with self._lock:
            existing = self._pools.get(key)
            if existing is not None and self._credentials.get(key) == credentials:
                return existing
            self._pools[key] = pool
            self._credentials[key] = credentials
        pool.start()
        if not port.wait_synced(self.sync_timeout_s):
            log.warning("the pods of cluster %s are not listed yet; going on", key)
        return pool

    def pools(self) -> list[ClusterPool]:
        with self._lock:
            return list(self._pools.values())

    def known_pool(self, profile: ClusterProfile) -> ClusterPool | None:
        with self._lock:
            return self._pools.get(cluster_label(profile.cluster_key))

    def stop(self) -> None:
        for pool in self.pools():
            pool.stop()
        self.narrator.stop()

    def report_cluster_problem(self, profile: ClusterProfile, message: str, what: str = "watch") -> None:
        """`what`: "watch" (listing and watching pods, checked at every ping) or "create" (creating pods,
        cleared only when a pod is created again)."""
        self.health.problem(f"cluster:{what}:{profile.cluster_key}", message)

    def report_cluster_ok(self, profile: ClusterProfile, what: str = "watch") -> None:
        self.health.resolved(f"cluster:{what}:{profile.cluster_key}")

    def publish_health(self, gocd: GoCDServer) -> None:
        self.health.publish(gocd)


def _fingerprint_credentials(profile: ClusterProfile) -> str:
    """A digest of the secrets, so a change is noticed without keeping a second copy of them."""
    return _digest(f"{profile.security_token or ''}\x00{profile.kubernetes_cluster_ca_cert or ''}")


@functools.lru_cache(maxsize=64)
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def cluster_profile(properties: Mapping[str, str]) -> ClusterProfile:
    """The parsed cluster profile; every request carries one, and parsing validates URLs, durations and
    certificates, so identical properties are parsed once. Keyed in arrival order, unsorted: GoCD sends
    a profile's properties in the same order each time, and another order only costs one more parse."""
    return _parse_cluster(tuple(properties.items()))


@functools.lru_cache(maxsize=128)
def _parse_cluster(items: tuple[tuple[str, str], ...]) -> ClusterProfile:
    return ClusterProfile.from_properties(dict(items))


__all__ = ["Backend", "ClusterFactory", "GoCDError"]
