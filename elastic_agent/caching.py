"""A bounded cache keyed by a digest of its key text.

Request bodies and profile properties carry secrets in plain text (security tokens, resolved
`{{SECRET:...}}` values, registration keys). Parsing them again for every request costs too much on the
hot path, yet a cache keyed by the text would keep every secret it ever saw as a key, long after a
rotation. Keyed by SHA-256, the cache holds only what the current requests need (its values), and
forgets the oldest entries first. functools.lru_cache cannot do this: it keys by its arguments.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Value = TypeVar("Value")


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def parts_digest(parts: Sequence[str]) -> bytes:
    """The digest of a sequence of texts, unambiguous whatever characters they hold. Joined with NUL
    when no part holds one (the common case, and several times cheaper than any escaping); else as
    netstrings (`<length>:<text>,`). The two forms are hashed in separate domains, so they never meet."""
    text = "\x00".join(parts)
    if text.count("\x00") == len(parts) - 1:
        return digest("j" + text)
    return digest("n" + "".join([f"{len(part)}:{part}," for part in parts]))


class DigestCache(Generic[Value]):
    """Oldest entries go first. A hit is one dict lookup, without a lock (a dict's get is atomic): the
    cache answers should-assign-work, the plugin's most frequent request. Misses take the lock."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        # Ordered by insertion; OrderedDict because evicting the oldest entry of a plain dict again and
        # again walks over the slots the evictions left behind.
        self._entries: OrderedDict[bytes, Value] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes, make: Callable[[], Value]) -> Value:
        """The value for `key` (a digest), made by `make()` on a miss; what `make` raises is not cached."""
        value = self._entries.get(key)
        if value is not None:
            return value
        value = make()
        with self._lock:
            entries = self._entries
            entries[key] = value
            while len(entries) > self._capacity:
                entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def capacity(self) -> int:
        return self._capacity
