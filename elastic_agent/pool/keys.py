"""The warm pool's bank: registration keys that create-agent brought for jobs that another pod served.

A key is single-use and expires when the GoCD server's `gocd.ephemeral.auto.register.key.expiry.millis`
has passed since it issued it (gocd/gocd's `EphemeralAutoRegisterKeyService`, a cache built with
`expireAfterWrite` of that many milliseconds; 30 minutes unless set). The cluster profile says what that
lifetime is (`auto_register_key_expiry`). The agent presents its key only when it registers, which the
pool lets come up to `auto_register_timeout` after it creates the pod, so a pod gets a key only while the
key has that much of its lifetime left: otherwise a slow boot (an image pulled for minutes) ends in a
registration that GoCD refuses for good. Each pool asks with its own limit (`take`, `usable`:
pool/key_lifetime.py says how old a key it may use); the bank keeps keys as long as some pool may use
them (`keep_for`) and hands out the oldest it may first: every key it may hand out still has the time a
pod needs to register, so the oldest usable key serves as well as the newest, and the newer ones stay
usable for longer (keys at 0 and 10 minutes, pods wanted at 11 and 25 minutes: newest first serves one,
oldest first both).

Its size follows how long keys are kept: `KEYS_PER_HOUR` for each hour, so that with a long lifetime
the keys of a quiet evening are still there in the morning, up to a day's worth (`MAX_KEPT_S`), and at
least `MIN_CAPACITY`. Its memory is bounded by that and by `MAX_KEY_CHARS` (GoCD's keys are UUIDs, 36
characters; a longer one, or one not in ASCII, is not banked), and shown in /metrics (`memory_bytes`,
`memory_limit_bytes`).

GoCD keeps its keys in memory only: a restart of the server forgets every key it issued, so when the
plugin is loaded again (its migrate-config, sent at every load) every banked key is dropped
(`server_started`). A key comes here only from a waiting job's entry (pool/fingerprints.py), which lets go
of it as it comes, so that no key is in the bank and in a job's entry at once (docs/architecture.md,
"Where registration keys live"). Keys live in memory only and are never logged or shown.

The bank is kept ordered by issue time, with a set of the keys it holds beside the list, so that
offering a key (a re-sent one is banked once) and taking the oldest usable one are a bisection and a set
look-up, never a pass over the bank: a full bank holds thousands of keys, and create-agent offers one
for nearly every job that reuse serves.
"""

from __future__ import annotations

import bisect
import math
import sys
import threading

from elastic_agent.clock import Clock
from elastic_agent.pool.fingerprints import HeldKey

# How long GoCD's auto-register keys are valid after they are issued unless the server is told otherwise
# (gocd/gocd SystemEnvironment.EPHEMERAL_AUTO_REGISTER_KEY_EXPIRY_IN_MILLIS, 30 minutes).
KEY_LIFETIME_S = 30 * 60.0
KEYS_PER_HOUR = 192  # 64 for the 20 minutes GoCD's default lifetime leaves with the default 10m to register
MIN_CAPACITY = 64
MAX_KEPT_S = 24 * 3600.0  # past a day of keys, the oldest go first: they would expire first
MAX_KEY_CHARS = 128
# The bytes one entry takes at most: its key (an ASCII str), the float and the tuple, and the list's slot.
_ENTRY_BYTES = sys.getsizeof("k" * MAX_KEY_CHARS) + sys.getsizeof(0.0) + sys.getsizeof((0.0, "")) + 8


def capacity_for(max_age_s: float) -> int:
    """How many keys the bank holds when it keeps them `max_age_s`."""
    hours = min(max(0.0, max_age_s), MAX_KEPT_S) / 3600.0
    return max(MIN_CAPACITY, math.ceil(hours * KEYS_PER_HOUR))


class RegistrationKeys:
    def __init__(self, clock: Clock, max_age_s: float = 25 * 60.0, capacity: int = MIN_CAPACITY) -> None:
        self._clock = clock
        self.max_age_s = max_age_s  # until the backend says how long its pools may use keys (keep_for)
        self._capacity = capacity
        # (when create-agent brought it, key), oldest first: keys come from waiting jobs in any order.
        self._keys: list[tuple[float, str]] = []
        self._held: set[str] = set()  # the keys of `_keys`: a duplicate offer is found without a pass
        self.started_at: float | None = None  # when GoCD last loaded the plugin: it had just started
        self._lock = threading.Lock()

    def offer(self, key: str, since: float) -> None:
        """Bank `key`, which GoCD issued at `since` (clock seconds, at the earliest); the oldest goes when
        full."""
        if len(key) > MAX_KEY_CHARS or not key.isascii():
            return  # not one of GoCD's (a UUID): its memory would not be bounded
        with self._lock:
            if key in self._held:
                return
            bisect.insort(self._keys, (since, key))
            self._held.add(key)
            self._drop_old()
            self._drop_first(len(self._keys) - self._capacity)

    def take(self, max_age_s: float | None = None) -> HeldKey | None:
        """The oldest key no older than `max_age_s` (None: any the bank keeps); it is removed (a key
        registers one agent)."""
        with self._lock:
            self._drop_old()
            first = bisect.bisect_left(self._keys, (self._oldest(max_age_s), ""))
            if first == len(self._keys):
                return None
            since, key = self._keys.pop(first)
            self._held.discard(key)
            return HeldKey(key, since)

    def usable(self, max_age_s: float | None = None) -> int:
        """How many keys `take(max_age_s)` would give, one after another."""
        with self._lock:
            self._drop_old()
            return len(self._keys) - bisect.bisect_left(self._keys, (self._oldest(max_age_s), ""))

    def keep_for(self, max_age_s: float) -> None:
        """Keep keys up to `max_age_s` (the longest any pool may use one), with the capacity that follows."""
        with self._lock:
            self.max_age_s = max_age_s
            self._capacity = capacity_for(max_age_s)
            self._drop_old()
            self._drop_first(len(self._keys) - self._capacity)

    def drop_issued_until(self, since: float) -> int:
        """Drop every key create-agent brought at or before `since` (GoCD refused one as old): how many."""
        with self._lock:
            older = bisect.bisect_right(self._keys, (since, "\U0010ffff"))
            self._drop_first(older)
            return older

    def server_started(self) -> int:
        """GoCD loaded the plugin, so it has just started, and has forgotten every key issued before:
        they are dropped (how many)."""
        now = self._clock.now()
        with self._lock:
            self.started_at = now
            dropped = len(self._keys)
            self._keys.clear()
            self._held.clear()
            return dropped

    def _oldest(self, max_age_s: float | None) -> float:
        """The earliest `since` of a key that may be taken."""
        age = self.max_age_s if max_age_s is None else min(self.max_age_s, max_age_s)
        return self._clock.now() - age

    def __len__(self) -> int:
        with self._lock:
            self._drop_old()
            return len(self._keys)

    @property
    def capacity(self) -> int:
        return self._capacity

    def memory_bytes(self) -> int:
        """What the banked keys take in memory (their strings, times, tuples and the list)."""
        with self._lock:
            entries = sum(sys.getsizeof(key) + sys.getsizeof(since) + sys.getsizeof((since, key)) + 8
                          for since, key in self._keys)  # fmt: skip
            return sys.getsizeof([]) + entries

    def memory_limit_bytes(self) -> int:
        """The most `memory_bytes` can be: a full bank of the longest keys it takes."""
        return sys.getsizeof([]) + self._capacity * _ENTRY_BYTES

    def _drop_old(self) -> None:
        limit = self._clock.now() - self.max_age_s
        self._drop_first(bisect.bisect_left(self._keys, (limit, "")))

    def _drop_first(self, count: int) -> None:
        """Drop the `count` oldest keys (none when `count` is not positive), from the set too."""
        if count <= 0:
            return
        self._held.difference_update(key for _, key in self._keys[:count])
        del self._keys[:count]

    def __repr__(self) -> str:
        return f"RegistrationKeys({len(self._keys)} kept)"
