"""The simulated GoCD server's auto-register keys: one fresh single-use key per create-agent.

gocd/gocd's `EphemeralAutoRegisterKeyService` issues a key for each create-agent (`autoRegisterKey`),
keeps it in memory for `gocd.ephemeral.auto.register.key.expiry.millis` (`key_ttl_s`), and spends it when
an agent registers with it (`validateAndRevoke`, one `ConcurrentMap.remove` that only one caller can win):
a key unknown, spent or expired refuses the registration (gocd_registration.py has GoCD's words). A restart
of the server forgets every key. Keys come from a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import random

from elastic_agent.simulation.gocd_records import RegistrationKey, ServerCore
from elastic_agent.simulation.gocd_registration import EXPIRED_KEY, SPENT_KEY, UNKNOWN_KEY


class RegistrationKeys:
    def __init__(self, core: ServerCore) -> None:
        """The keys come from `seed` (read once) and live `key_ttl_s` (read at each issue)."""
        self._lock = core.lock
        self._rng = random.Random(core.config.seed)
        self._config = core.config
        self._keys: dict[str, RegistrationKey] = {}

    def issue(self, job_id: int, now: float) -> str:
        """A fresh key for a create-agent of the job; it expires `key_ttl_s` after issue."""
        with self._lock:
            key = f"{self._rng.getrandbits(128):032x}"
            self._keys[key] = RegistrationKey(key, job_id, now, now + self._config.key_ttl_s)
        return key

    def validate_and_revoke(self, key: str, agent_id: str, now: float) -> str | None:
        """Why the key cannot register an agent (unknown, spent or expired), or None: then it is spent
        by `agent_id`, whatever else the registration is refused for."""
        registration_key = self._keys.get(key)
        if registration_key is None:
            return UNKNOWN_KEY
        if registration_key.used_by is not None:
            return SPENT_KEY
        if now >= registration_key.expires_at:
            return EXPIRED_KEY
        registration_key.used_by, registration_key.used_at = agent_id, now  # revoked: whatever follows
        return None

    def get(self, key: str) -> RegistrationKey | None:
        with self._lock:
            return self._keys.get(key)

    def issued_for(self, job_id: int) -> list[str]:
        """The keys the job's create-agent calls carried, in the order they were issued."""
        with self._lock:
            issued = sorted(self._keys.values(), key=lambda k: k.issued_at)
            return [k.key for k in issued if k.job_id == job_id]

    def forget(self) -> None:
        """What a restart of GoCD does: the keys are kept in memory only, so every one is unknown after."""
        with self._lock:
            self._keys.clear()
