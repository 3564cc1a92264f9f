"""What a job needs from a pod, derived from the properties GoCD sends with every request.

Requests carry profile properties, not profile ids, so each request is turned into a JobSpec: the
rendered pod template, its reuse fingerprint and the reuse knobs. Rendering can mean parsing YAML or a
remote file, and should-assign-work must answer in well under a millisecond, so specs are cached by the
exact properties for a short time (remote templates may change behind the same URL); the parsed
elastic profiles they are built from are kept longer (a parse depends on nothing else). Both caches are
keyed by a digest of the properties (messages.spec_key, properties_key): they may hold resolved secrets.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from elastic_agent.caching import DigestCache
from elastic_agent.clock import Clock
from elastic_agent.gocd.known_server import ServerUrlUnknown
from elastic_agent.gocd.messages import properties_key, spec_key
from profiles.cluster import ClusterProfile
from profiles.elastic import ElasticProfile
from profiles.fingerprint import FingerprintInputs, fingerprint
from profiles.pod_template import render_pod_template
from profiles.schedule import Knobs, Schedule, change_after
from profiles.schedule_warnings import schedule_warnings


@dataclass(frozen=True)
class JobSpec:
    fingerprint: str
    template: Mapping[str, Any]
    reuse: bool
    max_jobs_per_pod: int | None
    idle_timeout: float  # the profile's IdleTimeout, else the cluster's idle_timeout
    min_idle_pods: int
    environment: str | None
    go_server_url: str  # what the pods register with: the profile's, or GoCD's when it is blank
    schedule: Schedule | None = None  # ReuseSchedule: the values above are its plain ones
    predict: bool = False  # Predict: start the next stage's pods ahead (elastic_agent/forecast)

    def knobs(self, now: float) -> Knobs:
        """MinIdlePods, IdleTimeout and MaxJobsPerPod in force at `now`."""
        plain = self._plain_knobs
        return plain if self.schedule is None else self.schedule.knobs(now, plain)

    def knobs_change(self, now: float) -> float:
        """When the values `knobs` gives at `now` may next change (its ReuseSchedule's next period change);
        infinity without a schedule."""
        return change_after(self.schedule, now)

    @functools.cached_property
    def _plain_knobs(self) -> Knobs:
        # Made once: the warm pool and the reaping rules ask at every ping.
        return Knobs(self.min_idle_pods, self.idle_timeout, self.max_jobs_per_pod)

    def schedule_warnings(self) -> tuple[str, ...]:
        """Entries of its ReuseSchedule that change nothing or bring a plain value back."""
        if self.schedule is None:
            return ()
        plain = Knobs(self.min_idle_pods, self.idle_timeout, self.max_jobs_per_pod)
        return schedule_warnings(self.schedule, plain)

    @property
    def wants_warm_pods(self) -> bool:
        """MinIdlePods now or in some period, or Predict: registration keys are worth banking."""
        return (
            self.min_idle_pods > 0
            or self.predict
            or (self.schedule is not None and self.schedule.wants_warm_pods)
        )


class FetchRemote(Protocol):
    def __call__(self, url: str, *, wait: bool = True) -> str:
        """A remote pod template's text (remote_file.RemoteFileFetcher.fetch)."""


class JobSpecs:
    TTL_S = 300.0
    MAX_ENTRIES = 512

    def __init__(self, clock: Clock, fetch_remote: FetchRemote) -> None:
        self._clock = clock
        self._fetch = fetch_remote
        self._cache: OrderedDict[tuple[bytes, str, str, float], tuple[float, JobSpec]] = OrderedDict()
        self._profiles: DigestCache[ElasticProfile] = DigestCache(self.MAX_ENTRIES)
        self._lock = threading.Lock()

    def spec(
        self,
        elastic_properties: Mapping[str, str],
        cluster: ClusterProfile,
        environment: str | None,
        pipeline: str,
        key: bytes | None = None,
        *,
        wait: bool = True,
        server_url: str | None = None,
    ) -> JobSpec:
        """`key`: messages.spec_key of the first three, when the request has it at hand already.
        `wait=False`: a remote pod template never fetched before is not waited for (RemoteFileError).
        `server_url`: the URL pods register with when it is not the profile's own (a blank
        go_server_url means GoCD's secure site URL, which the backend knows: site_urls.py). It goes into
        the fingerprint as it is, so a blank that means X and an X typed out make the same pods, and a
        changed site URL makes new ones."""
        url = server_url or cluster.go_server_url
        if not url:
            raise ServerUrlUnknown()
        request_key = key if key is not None else spec_key(elastic_properties, environment, pipeline)
        cache_key = (request_key, cluster.cluster_key, url, cluster.idle_timeout)
        now = self._clock.now()
        with self._lock:
            hit = self._cache.get(cache_key)
            if hit is not None and now - hit[0] < self.TTL_S:
                self._cache.move_to_end(cache_key)
                return hit[1]
        # Parsed once per set of properties, not once per spec and TTL_S.
        elastic = self._profiles.get(
            properties_key(elastic_properties), lambda: ElasticProfile.from_properties(elastic_properties)
        )
        spec = self._build(elastic, cluster, url, environment, pipeline, wait)
        with self._lock:
            self._cache[cache_key] = (now, spec)
            while len(self._cache) > self.MAX_ENTRIES:
                self._cache.popitem(last=False)
        return spec

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def _build(
        self, elastic: ElasticProfile, cluster: ClusterProfile, server_url: str, environment: str | None,
        pipeline: str, wait: bool,
    ) -> JobSpec:  # fmt: skip
        template = render_pod_template(elastic, lambda url: self._fetch(url, wait=wait))
        scope = pipeline if elastic.reuse_scope == "pipeline" else None
        inputs = FingerprintInputs(template, cluster.cluster_key, server_url, environment, scope)
        return JobSpec(
            fingerprint=fingerprint(inputs),
            template=template,
            reuse=elastic.reuse,
            max_jobs_per_pod=elastic.max_jobs_per_pod,
            idle_timeout=elastic.idle_timeout if elastic.idle_timeout is not None else cluster.idle_timeout,
            min_idle_pods=elastic.min_idle_pods if elastic.reuse else 0,
            environment=environment,
            go_server_url=server_url,
            schedule=elastic.reuse_schedule if elastic.reuse else None,
            predict=elastic.predict and elastic.reuse,
        )
