"""Pods created outside create-agent: for jobs still waiting after a ping (an idle pod they counted on
was retired, evicted or failed), and the warm pool ahead of demand, with registration keys that
create-agent brought and no pod used."""

from __future__ import annotations

import logging
from typing import Any

from elastic_agent.job_spec import JobSpec
from elastic_agent.kube.port import ClusterError
from elastic_agent.messages import JobIdentifier
from elastic_agent.pool_state import PoolState

log = logging.getLogger(__name__)


class WarmPool(PoolState):
    def serve_waiting_jobs(self) -> list[str]:
        """Create pods while a fingerprint's waiting jobs outnumber its booting and idle pods, with the
        unused keys of those jobs' create-agent calls, so that a job never waits for GoCD's 2-minute re-send
        because a pod it counted on went away."""
        created: list[str] = []
        for fingerprint in list(self._waiting):
            spec = self._recipes.get(fingerprint)
            while spec is not None:
                with self.lock:
                    view = self._indexed()
                    demand, supply = self._demand(fingerprint, view)
                    jobs = [e for e in self._waiting.get(fingerprint, {}).values() if e.key is not None]
                    if demand <= supply or not jobs or self._blocked_by_caps(view):
                        break
                    entry = max(jobs, key=lambda e: e.last_seen)  # the newest key lives longest
                    key, entry.key = entry.key, None
                    token: Any = ("waiting", entry.job.job_id)
                    self._creating[token] = fingerprint
                name = self._create_reserved(token, entry.job, spec, key or "")
                if name is None:
                    break
                created.append(name)
        for name in created:
            self.narrator.decision(f"created pod {name}: jobs of its profile were still waiting")
        return created

    def top_up_warm_pool(self) -> list[str]:
        """Create pods ahead of demand with kept registration keys until each fingerprint with
        MinIdlePods has that many idle or booting pods."""
        created: list[str] = []
        for fingerprint, spec in list(self._recipes.items()):
            while spec.min_idle_pods:
                with self.lock:
                    view = self._indexed()
                    _, ready = self._demand(fingerprint, view)
                    waiting = len(self._waiting.get(fingerprint, {}))
                    if ready - waiting >= spec.min_idle_pods or self._blocked_by_caps(view):
                        break
                    key = self.keys.take()
                    if key is None:
                        break
                    self._warm_tokens += 1
                    token = ("warm", self._warm_tokens)
                    self._creating[token] = fingerprint
                name = self._create_reserved(token, None, spec, key)
                if name is None:
                    break
                created.append(name)
        for name in created:
            self.narrator.decision(f"created pod {name} ahead of demand: MinIdlePods of its profile")
        return created

    def _create_reserved(self, token: Any, job: JobIdentifier | None, spec: JobSpec, key: str) -> str | None:
        """Create the pod reserved under `token` in `_creating`, then drop the reservation."""
        try:
            return self._create(job, spec, key, self.clock.now(), token)
        except ClusterError as error:
            log.warning("could not create a pod outside create-agent: %s", error)
            return None
        finally:
            with self.lock:
                self._creating.pop(token, None)
                self._creating_names.pop(token, None)
