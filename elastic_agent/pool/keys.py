"""Registration keys that create-agent brought but no new pod needed, kept for the warm pool.

A key is single-use and expires 30 minutes after GoCD issued it (a server may be configured shorter),
so the newest key is used first and keys older than `max_age_s` are dropped. Keys live in memory only
and are never logged or shown.
"""

from __future__ import annotations

import threading
from collections import deque

from elastic_agent.clock import Clock


class RegistrationKeys:
    def __init__(self, clock: Clock, max_age_s: float = 25 * 60.0, capacity: int = 64) -> None:
        self._clock = clock
        self.max_age_s = max_age_s
        self._keys: deque[tuple[float, str]] = deque(maxlen=capacity)  # newest on the right
        self._lock = threading.Lock()

    def offer(self, key: str) -> None:
        with self._lock:
            if any(existing == key for _, existing in self._keys):
                return
            self._keys.append((self._clock.now(), key))

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
        return self._keys.maxlen or 0

    def _drop_old(self) -> None:
        limit = self._clock.now() - self.max_age_s
        while self._keys and self._keys[0][0] < limit:
            self._keys.popleft()

    def __repr__(self) -> str:
        return f"RegistrationKeys({len(self._keys)} kept)"
