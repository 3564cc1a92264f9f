"""The backend's long-lived parts wired together: one pool per cluster, the GoCD clients, health.

Requests carry profile properties, not profile ids, so a cluster is found by where it is: its URL and
namespace. The GoCD server id (needed in every pod's labels) is asked once and kept, with the site URLs
a blank go_server_url stands for (gocd/known_server.py); after that a pool is connected without
waiting on the network (its pod list comes in the background: cluster_pool.py).

Locking: `_lock` guards `_pools`, `_credentials` and `_replaced`; it is never held while a cluster is
connected or GoCD is asked, and never taken inside a pool's lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from elastic_agent.background import Background, BackgroundFactory, WorkerThread
from elastic_agent.clock import Clock
from elastic_agent.forecast.forecaster import Forecaster
from elastic_agent.gocd.health import HealthReporter
from elastic_agent.gocd.known_server import KnownServer
from elastic_agent.gocd.messages import cache_capacities, cache_sizes
from elastic_agent.gocd.narrator import Narrator, ThreadedNarrator
from elastic_agent.gocd.server import GoCDServer, GoCDServerSource
from elastic_agent.gocd.versions import HEALTH_KEY as VERSION_HEALTH_KEY
from elastic_agent.gocd.versions import BridgeVersions
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool import gone
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.job_spec import JobSpec, JobSpecs
from elastic_agent.pool.key_lifetime import window_s as key_window_s
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity, cluster_label
from elastic_agent.pool.remote_file import RemoteFileFetcher
from elastic_agent.pool.writer import AnnotationWriter, WriterFactory
from profiles.cluster import ClusterProfile
from profiles.fingerprint import label_form

log = logging.getLogger(__name__)

ClusterFactory = Callable[[ClusterProfile, PodIdentity, Clock], ClusterPort]
REPLACED_KEPT = 8  # credential digests a pool remembers having left (only digests: no secret is kept)


@dataclass
class Backend:
    clock: Clock
    gocd_servers: GoCDServerSource
    cluster_factory: ClusterFactory
    remote_files: RemoteFileFetcher
    health: HealthReporter = field(default_factory=HealthReporter)
    narrator: Narrator = field(default_factory=ThreadedNarrator)
    versions: BridgeVersions = field(default_factory=BridgeVersions)  # the jar's, from its requests
    writer_factory: WriterFactory = AnnotationWriter
    background_factory: BackgroundFactory = WorkerThread
    sync_wait_s: float = 10.0  # how long create-agent waits for a pool's first pod list
    keys: RegistrationKeys = field(init=False)
    background: Background = field(init=False)  # the backend's own queue: connecting pools
    job_specs: JobSpecs = field(init=False)
    forecast: Forecaster = field(init=False)  # Predict: the learned pipeline shapes (forecast/)
    _pools: dict[str, ClusterPool] = field(default_factory=dict)
    _credentials: dict[str, str] = field(default_factory=dict)  # pool key -> digest of those in use
    _replaced: dict[str, deque[str]] = field(default_factory=dict)  # pool key -> digests it has left
    server: KnownServer = field(default_factory=KnownServer)  # GoCD's server id and site URLs
    _template_problems: set[str] = field(default_factory=set)  # health keys; the ping's thread only
    _schedule_warnings: set[str] = field(default_factory=set)  # health keys; the ping's thread only
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.keys = RegistrationKeys(self.clock)
        self.background = self.background_factory("backend-worker")
        self.job_specs = JobSpecs(self.clock, self.remote_files.fetch)
        self.forecast = Forecaster(self.clock)

    def spec(
        self,
        elastic: Mapping[str, str],
        cluster: ClusterProfile,
        environment: str | None,
        pipeline: str,
        key: bytes | None = None,
        *,
        wait: bool = True,
        gocd: GoCDServer | None = None,
    ) -> JobSpec:
        """`gocd`: asked for its site URLs when the profile's go_server_url is blank and they are not
        known yet; None (the requests that never wait) raises ServerUrlUnknown instead."""
        server_url = self.server.pods_url(cluster, gocd if wait else None)
        return self.job_specs.spec(
            elastic, cluster, environment, pipeline, key, wait=wait, server_url=server_url
        )

    def server_id(self, gocd: GoCDServer) -> str:
        known = self.server.server_id()
        if known is not None:
            return known
        self.server.get(gocd)  # outside any lock: a slow GoCD must not hold up other requests
        server_id = self.server.server_id()
        assert server_id is not None, "asked just now"
        return server_id

    def pool(self, profile: ClusterProfile, gocd: GoCDServer, *, current: bool = False) -> ClusterPool:
        """The pool of the profile's cluster, connected on first use (which asks GoCD for its server id
        once per process); new settings and new credentials are taken over by the pool that exists,
        with its state. The pool's first pod list may still be on its way.

        `current`: the profile is the one GoCD's configuration holds now (server-ping). The other
        requests carry the profile their job was scheduled with, which may be older: their credentials
        replace the pool's only if the pool never used them before (`_existing`)."""
        pool = self._existing(profile, current)
        if pool is not None:
            return pool
        return self._connect(profile, self.server_id(gocd))

    def pool_at_once(
        self,
        profile: ClusterProfile,
        gocd: GoCDServer,
        then: Callable[[ClusterPool], object] | None = None,
    ) -> ClusterPool | None:
        """`pool`, for the requests that never wait on the network: None when the pool would need GoCD's
        server id first (the first request of the process); it is then connected in the background,
        and `then(pool)` is called there."""
        pool = self._existing(profile, current=False)
        if pool is not None:
            return pool
        server_id = self.server.server_id()
        if server_id is not None:
            return self._connect(profile, server_id)

        def connect() -> None:
            pool = self.pool(profile, gocd)
            if then is not None:
                then(pool)

        self.background.submit("connecting a cluster after asking GoCD for its server id", connect)
        return None

    def _existing(self, profile: ClusterProfile, current: bool) -> ClusterPool | None:
        key = cluster_label(profile.cluster_key)
        credentials = profile.credentials_digest
        with self._lock:
            pool = self._pools.get(key)
            # GoCD sends a job's requests with the profiles it was scheduled with and server-ping with
            # today's: after an edit both come, interleaved, for as long as old jobs wait or run. Going
            # back to credentials the pool has left would reconnect at every such request (and to a
            # token that may be revoked); only the ping may bring back old ones.
            reconnect = (
                pool is not None
                and self._credentials.get(key) != credentials
                and (current or credentials not in self._replaced.get(key, ()))
            )
        if pool is None:
            return None
        if pool.settings_object is not profile:  # nearly always the same object: profiles are cached
            pool.update_settings(profile)
            self.size_key_bank()
        if reconnect:
            # Taken as the pool's credentials only once a port is made of them: credentials that cannot
            # be used are tried (and reported) again at the next request, not forgotten after one.
            pool.replace_port(self.cluster_factory(profile, pool.identity, self.clock))
            with self._lock:
                replaced = self._replaced.setdefault(key, deque(maxlen=REPLACED_KEPT))
                left = self._credentials.get(key)
                if left is not None and left != credentials:
                    replaced.append(left)
                with contextlib.suppress(ValueError):
                    replaced.remove(credentials)
                self._credentials[key] = credentials
        return pool

    def _connect(self, profile: ClusterProfile, server_id: str) -> ClusterPool:
        key = cluster_label(profile.cluster_key)
        identity = PodIdentity(server_id=server_id, cluster=key)
        port = self.cluster_factory(profile, identity, self.clock)
        pool = ClusterPool(
            port,
            identity,
            profile,
            self.clock,
            self.narrator,
            self.keys,
            self.writer_factory,
            self.background_factory(f"pool-worker-{profile.namespace}"),
            self.sync_wait_s,
        )
        with self._lock:
            existing = self._pools.get(key)
            if existing is not None:  # another request connected it meanwhile
                port.stop()
                return existing
            self._pools[key] = pool
            self._credentials[key] = profile.credentials_digest
        self.size_key_bank()
        pool.start()
        return pool

    def pools(self) -> list[ClusterPool]:
        with self._lock:
            return list(self._pools.values())

    def drop_pool(self, pool: ClusterPool) -> None:
        """Forget a pool whose cluster profile is gone and whose pods are all gone (server-ping)."""
        key = pool.identity.cluster  # the pool's key in `_pools` (cluster_label of its cluster key)
        with self._lock:
            if self._pools.get(key) is pool:
                del self._pools[key]
                self._credentials.pop(key, None)
                self._replaced.pop(key, None)
        self.size_key_bank()
        pool.stop(deadline=0.0)  # nothing is left to write
        log.info(
            "stopped watching namespace %s: its cluster profile is gone, and so are its pods",
            pool.settings.namespace,
        )

    def server_started(self) -> int:
        """GoCD loaded the plugin (migrate-config), so it has just started: the banked keys go (how many),
        and every pool forgets what refusals and registrations taught of the keys' lifetime."""
        dropped = self.keys.server_started()
        for pool in self.pools():
            with pool.state.lock:
                pool.state.key_lifetime.server_started()
        return dropped

    def size_key_bank(self) -> None:
        """Banked keys are kept as long as some pool may put one into a pod (key_lifetime.window_s)."""
        windows = [key_window_s(pool.state) for pool in self.pools()]
        if windows:
            self.keys.keep_for(max(windows))

    def known_pool(self, profile: ClusterProfile) -> ClusterPool | None:
        with self._lock:
            return self._pools.get(cluster_label(profile.cluster_key))

    def sizes(self) -> dict[str, int]:
        """How many entries each long-lived structure holds, summed over the pools: what a backend that
        runs for months must keep bounded (/metrics, and the soak benchmark, read it)."""
        sizes: dict[str, int] = {"pools": 0, "pods_watched": 0, "records": 0, "early_completions": 0}
        for pool in self.pools():
            sizes["pools"] += 1
            sizes["pods_watched"] += len(pool.port.pods())
            sizes["records"] += len(pool.records())
            sizes["early_completions"] += pool.early_completions
            for name, count in pool.port.retained().items():
                sizes[name] = sizes.get(name, 0) + count
            for name, count in pool.state.sizes().items():
                sizes[name] = sizes.get(name, 0) + count
        sizes["job_specs"] = len(self.job_specs)
        sizes["banked_keys"] = len(self.keys)
        if isinstance(self.narrator, ThreadedNarrator):
            sizes["console_lines_queued"] = self.narrator.backlog()
        return {**sizes, **cache_sizes()}

    def size_limits(self) -> dict[str, int]:
        """The structures of `sizes` that have a fixed capacity, and that capacity (the rest are bounded by
        what they track: pods, waiting jobs, fingerprints)."""
        limits = {"job_specs": JobSpecs.MAX_ENTRIES, "banked_keys": self.keys.capacity}
        for pool in self.pools():  # summed like the entries: each pool's port has its own
            for name, capacity in pool.port.retained_limits().items():
                limits[name] = limits.get(name, 0) + capacity
            limits["gone_recently"] = limits.get("gone_recently", 0) + gone.MAX_NAMES
        if isinstance(self.narrator, ThreadedNarrator):
            limits["console_lines_queued"] = ThreadedNarrator.CAPACITY
        return {**limits, **cache_capacities()}

    def change_marks(self) -> dict[ClusterPool, int]:
        """Each pool's change mark, taken before GoCD's agent list is asked for (ClusterPool.reconcile)."""
        return {pool: pool.change_mark() for pool in self.pools()}

    def stop(self, deadline: float) -> None:
        """Write what the pools have queued and the console lines said, until `deadline`
        (time.monotonic()), then stop watching."""
        self.background.stop(deadline)
        for pool in self.pools():
            pool.stop(deadline)
        self.narrator.stop(deadline)

    def report_cluster_problem(
        self, profile: ClusterProfile, message: str, what: str = "watch", streak: object = None
    ) -> bool:
        """`what`: "watch" (listing and watching pods, checked at every ping) or "create" (creating pods,
        cleared only when a pod is created again). With a `streak`, a repeat keeps the first message;
        True when the problem is new."""
        return self.health.problem(f"cluster:{what}:{profile.cluster_key}", message, streak=streak)

    def report_cluster_ok(self, profile: ClusterProfile, what: str = "watch") -> bool:
        """True when there was a problem of that kind (it is gone now)."""
        return self.health.resolved(f"cluster:{what}:{profile.cluster_key}")

    def next_period_change(self) -> float | None:
        """When some ReuseSchedule's period may start or end next, or a predicted stage comes within its
        lead time (clock seconds); None without either."""
        changes = [change for pool in self.pools() if (change := pool.next_period_change()) is not None]
        predicted = self.forecast.next_due()
        if predicted is not None:
            changes.append(predicted)
        return min(changes) if changes else None

    def quiet_until(self) -> float:
        """When a server-ping may next do something if no request, watch event or call comes first
        (pool/quiet.py; clock seconds, infinity for never): the simulation skips the pings before it."""
        times = [pool.quiet_until() for pool in self.pools()]
        times.append(self.forecast.quiet_until())
        return min(times)

    def on_period_change(self) -> None:
        """A period may have started: fill the warm pools it asks for at once, from the banked keys,
        rather than at the next server-ping. (A period's end needs nothing now: the reaper applies the
        values in force at every ping.) A predicted stage may be near: start its pods."""
        for pool in self.pools():
            pool.top_up_warm_pool()
            self.forecast.act(pool)

    def prediction_totals(self) -> dict[str, int]:
        """Predict's score over every pipeline (forecaster.OUTCOMES), pods gone since the last act counted."""
        for pool in self.pools():
            self.forecast.note_gone(pool)
        return self.forecast.totals()

    def report_template_problems(self) -> None:
        """Remote pod templates that cannot be refreshed (their last good copy is used meanwhile)."""
        current = self.remote_files.problems()
        for shown, (message, since) in current.items():
            self.health.problem(f"template:{shown}", message, "warning", streak=since)
        for shown in self._template_problems - set(current):
            self.health.resolved(f"template:{shown}")
        self._template_problems = set(current)

    def report_schedule_warnings(self) -> None:
        """A warning per profile in use whose ReuseSchedule has an entry that changes nothing or brings a
        plain value back (profiles/schedule_warnings.py): valid, so the save was not refused, but likely
        not what was meant."""
        current: dict[str, str] = {}
        for pool in self.pools():
            for fingerprint, spec in pool.schedules():
                warnings = spec.schedule_warnings()
                if warnings:
                    shown = label_form(fingerprint)
                    current[f"schedule:{shown}"] = (
                        f"The ReuseSchedule of the elastic profile whose pods are {shown} "
                        f"({spec.environment or 'no environment'}): {'; '.join(warnings)}."
                    )
        for key, message in current.items():
            self.health.problem(key, message, "warning")
        for key in self._schedule_warnings - set(current):
            self.health.resolved(key)
        self._schedule_warnings = set(current)

    def report_versions(self) -> None:
        """A warning while the jar's version (as its last request said it) is not the backend's."""
        versions = self.versions.current()
        problem = versions.problem if versions is not None else None
        if problem is None:
            self.health.resolved(VERSION_HEALTH_KEY)
        else:
            self.health.problem(VERSION_HEALTH_KEY, problem, "warning")

    def publish_health(self, gocd: GoCDServer) -> None:
        self.health.publish(gocd)
