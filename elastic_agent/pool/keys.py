"""The warm pool's bank: registration keys that create-agent brought for jobs that another pod served.

A key is single-use and expires 30 minutes after GoCD issued it (a server may be configured shorter),
so the newest key is used first and keys older than `max_age_s` are dropped. A key comes here only
from a waiting job's entry (pool/fingerprints.py), which lets go of it as it comes, so that no key is in
the bank and in a job's entry at once (docs/architecture.md, "Where registration keys live"). Keys live
in memory only and are never logged or shown.
"""

from __future__ import annotations

import bisect
import threading

from elastic_agent.clock import Clock


class RegistrationKeys:
    def __init__(self, clock: Clock, max_age_s: float = 25 * 60.0, capacity: int = 64) -> None:
        self._clock = clock
        self.max_age_s = max_age_s
        self._capacity = capacity
        # (when create-agent brought it, key), oldest first: keys come from waiting jobs in any order.
        self._keys: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def offer(self, key: str, since: float) -> None:
        """Bank `key`, which create-agent brought at `since` (clock seconds); the oldest goes when full."""
        with self._lock:
            if any(existing == key for _, existing in self._keys):
                return
            bisect.insort(self._keys, (since, key))
            del self._keys[: max(0, len(self._keys) - self._capacity)]

    def take(self) -> str | None:
        """The newest key still young enough; it is removed (a key registers one agent)."""
        with self._lock:
            self._drop_old()
            return self._keys.pop()[1] if self._keys else None

    def __len__(self) -> int:
        with self._lock:
            self._drop_old()
            return len(self._keys)

    @property
    def capacity(self) -> int:
        return self._capacity

    def _drop_old(self) -> None:
        limit = self._clock.now() - self.max_age_s
        young = bisect.bisect_left(self._keys, (limit, ""))
        del self._keys[:young]

    def __repr__(self) -> str:
        return f"RegistrationKeys({len(self._keys)} kept)"
