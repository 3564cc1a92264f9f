"""Pods this backend saw go: the evidence that lets server-ping remove an agent that has no pod.

An agent whose pod the cache does not show is not proof that the pod is gone: after a restart, the pods
of a cluster profile that was deleted meanwhile run on in a namespace no pool watches, and their agents
still build. So an agent is removed only when a pool saw its pod deleted (this memory) or when GoCD has
not heard from it for its contact timeout (LostContact; `executors/server_ping.py`). The memory is kept
for an hour, by then GoCD has long marked a vanished agent LostContact, and bounded in count, so a
backend that runs for months keeps nothing of every pod it ever saw.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from elastic_agent.clock import Clock

KEEP_S = 3600.0
MAX_NAMES = 4096


class RecentlyGone:
    """Names of pods the cache saw deleted, with when; not thread-safe (the pool's lock guards it)."""

    def __init__(self, clock: Clock, keep_s: float = KEEP_S, capacity: int = MAX_NAMES) -> None:
        self._clock = clock
        self._keep_s = keep_s
        self._capacity = capacity
        self._seen: OrderedDict[str, float] = OrderedDict()  # oldest first

    def saw(self, name: str) -> None:
        self._seen.pop(name, None)
        self._seen[name] = self._clock.now()
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)

    def names(self) -> set[str]:
        oldest = self._clock.now() - self._keep_s
        while self._seen and next(iter(self._seen.values())) < oldest:
            self._seen.popitem(last=False)
        return set(self._seen)

    def next_expiry(self) -> float:
        """When the oldest name is forgotten (clock seconds); infinity when none is kept."""
        oldest = next(iter(self._seen.values()), None)
        return math.inf if oldest is None else oldest + self._keep_s

    def __len__(self) -> int:
        return len(self._seen)
