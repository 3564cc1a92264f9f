"""The warm pool's bank: registration keys that create-agent brought for jobs that another pod served.

A key is single-use and expires 30 minutes after GoCD issued it (a server may be configured shorter),
so the newest key is used first and keys older than `max_age_s` are dropped. The agent presents its key
only when it registers, which the pool lets come up to `auto_register_timeout` after it creates the pod,
so a pod gets a key only if the key outlives that wait: otherwise a slow boot (an image pulled for
minutes) ends in a registration that GoCD refuses for good. A key comes here only from a waiting job's
entry (pool/fingerprints.py), which lets go of it as it comes, so that no key is in the bank and in a
job's entry at once (docs/architecture.md, "Where registration keys live"). Keys live in memory only and
are never logged or shown.
"""

from __future__ import annotations

import bisect
import threading

from elastic_agent.clock import Clock

# How long GoCD's auto-register keys are valid after they are issued (gocd/gocd's
# EphemeralAutoRegisterKeyService).
KEY_LIFETIME_S = 30 * 60.0


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

    def take(self, register_within_s: float = 0.0) -> str | None:
        """The newest key still young enough, and still valid `register_within_s` from now (the time the
        pod it goes into is given to register); it is removed (a key registers one agent)."""
        with self._lock:
            self._drop_old()
            if not self._keys or self._keys[-1][0] < self._oldest_usable(register_within_s):
                return None
            return self._keys.pop()[1]

    def usable(self, register_within_s: float = 0.0) -> int:
        """How many keys `take(register_within_s)` would give, one after another."""
        with self._lock:
            self._drop_old()
            return len(self._keys) - bisect.bisect_left(
                self._keys, (self._oldest_usable(register_within_s), "")
            )

    def _oldest_usable(self, register_within_s: float) -> float:
        """The earliest `since` of a key that GoCD still accepts once `register_within_s` has passed."""
        return self._clock.now() - min(self.max_age_s, KEY_LIFETIME_S - register_within_s)

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
