"""The warm pool: pods created ahead of demand with registration keys nobody needed."""

from __future__ import annotations

import logging
from typing import Any

from elastic_agent.kube.port import ClusterError
from elastic_agent.pool_state import PoolState

log = logging.getLogger(__name__)


class WarmPool(PoolState):
    def top_up_warm_pool(self) -> list[str]:
        """Create pods ahead of demand with kept registration keys until each fingerprint with
        MinIdlePods has that many idle or booting pods."""
        created: list[str] = []
        for fingerprint, spec in list(self._recipes.items()):
            while spec.min_idle_pods:
                with self.lock:
                    records = [r for r in self.records() if self.alive(r)]
                    _, ready = self._demand(fingerprint, records)
                    waiting = len(self._waiting.get(fingerprint, {}))
                    if ready - waiting >= spec.min_idle_pods or self._blocked_by_caps(records):
                        break
                    key = self.keys.take()
                    if key is None:
                        break
                    self._warm_tokens += 1
                    token: Any = ("warm", self._warm_tokens)
                    self._creating[token] = fingerprint
                try:
                    created.append(self._create(None, spec, key, self.clock.now(), token))
                except ClusterError as error:
                    log.warning("could not create a warm pod: %s", error)
                    break
                finally:
                    with self.lock:
                        self._creating.pop(token, None)
                        self._creating_names.pop(token, None)
        for name in created:
            self.narrator.decision(f"created pod {name} ahead of demand: MinIdlePods of its profile")
        return created
