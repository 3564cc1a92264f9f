"""How old a registration key may be when it goes into one of a pool's pods, and what GoCD's refusal of
one taught; and the pods a pool wanted ahead of demand but could not start for want of a key.

The cluster profile says how long GoCD's keys live (`auto_register_key_expiry`, which must equal the
server's `gocd.ephemeral.auto.register.key.expiry.millis`). A banked key goes into a pod only while it has
the pool's `auto_register_timeout` of that lifetime left, since the pod may take that long to register:
`window_s`. A setting longer than the server's shows as a refusal in an agent's log (key_refusals.py).
The refused key's age when its pod was created is then taken as the lifetime the server really has (its
keys live less than that), for as long as the cluster profile stays the one it was found under: no key
that old goes into a pod, neither from the bank nor from a waiting job, until the profile changes (the
first server-ping with another profile forgets it), or the backend restarts.

What a decision wanted and could not start for want of a key (`KeyShortages`) is kept per source (the
warm pool, with what MinIdlePods and ReuseSchedule ask; Predict) and fingerprint: a decision that
considers a fingerprint and lacks nothing for it ends its shortage, and a shortage no decision has
renewed for `LACK_SHOWN_S` goes (Predict decides about a fingerprint only while one of its stages is
near, which a ping may not see). The status page, /metrics and GoCD's health messages show what is
lacking so, and since when.

The refusal state is the pool's (its lock guards it); the shortages have a lock of their own, since
pages and metrics read them without the pool's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elastic_agent.pool.fingerprints import HeldKey
from profiles.cluster import ClusterProfile
from profiles.fingerprint import label_form

if TYPE_CHECKING:
    from elastic_agent.pool.state import PoolState

LACK_SHOWN_S = 600.0
WARM_POOL = "warm_pool"  # MinIdlePods, as in force now (a ReuseSchedule's period may set it)
PREDICT = "predict"


@dataclass(frozen=True)
class Refusal:
    """A pod whose agent GoCD refused for an unknown or expired key, `key_age_s` old when the pod was
    created, found at `at` while the pool's profile was `settings`."""

    pod: str
    at: float
    key_age_s: float
    settings: ClusterProfile


class KeyLifetime:
    """One pool's: its lock guards it."""

    def __init__(self) -> None:
        self._refusal: Refusal | None = None
        self.refused_pods = 0  # every pod whose key GoCD refused, whatever the cause (for /metrics)

    def refusal(self, settings: ClusterProfile) -> Refusal | None:
        """The refusal that bounds keys under `settings`, if any."""
        refusal = self._refusal
        return refusal if refusal is not None and refusal.settings == settings else None

    def lifetime_s(self, settings: ClusterProfile) -> float:
        """How long keys live, as far as the pool knows: the profile's, or less after a refusal."""
        refusal = self.refusal(settings)
        lifetime = settings.auto_register_key_expiry
        return lifetime if refusal is None else min(lifetime, refusal.key_age_s)

    def window_s(self, settings: ClusterProfile) -> float:
        """The oldest a banked key may be when it goes into a pod (negative: none may)."""
        return self.lifetime_s(settings) - settings.auto_register_timeout

    def refused(self, refusal: Refusal | None) -> None:
        """A pod's key was refused; `refusal` None when that says nothing of the lifetime (the key was
        issued before GoCD last started, or its pod does not say when it was issued). Under the same
        profile the youngest refused key sets the bound."""
        self.refused_pods += 1
        if refusal is None:
            return
        known = self.refusal(refusal.settings)
        if known is None or refusal.key_age_s < known.key_age_s:
            self._refusal = refusal

    def forget_unless(self, settings: ClusterProfile) -> None:
        """The profile changed since the refusal: what it taught was about the old one."""
        if self._refusal is not None and self._refusal.settings != settings:
            self._refusal = None


def window_s(state: PoolState) -> float:
    with state.lock:
        return state.key_lifetime.window_s(state.settings)


def usable_keys(state: PoolState) -> int:
    """How many banked keys this pool may put into pods now."""
    return state.keys.usable(window_s(state))


def take_key(state: PoolState) -> HeldKey | None:
    """The newest banked key this pool may put into a pod, taken out of the bank."""
    return state.keys.take(window_s(state))


def job_key_usable(state: PoolState, since: float, now: float) -> bool:
    """Whether a waiting job's own key, brought at `since`, is younger than any GoCD refused."""
    with state.lock:
        refusal = state.key_lifetime.refusal(state.settings)
    return refusal is None or now - since < refusal.key_age_s


@dataclass(frozen=True)
class Shortage:
    fingerprint: str
    source: str  # WARM_POOL or PREDICT
    pods: int  # wanted by the latest decision of the source that lacked keys, not started for want of one
    since: float  # since when the source's decisions have lacked keys for the fingerprint
    seen: float  # the latest decision that lacked them


class KeyShortages:
    def __init__(self) -> None:
        self._short: dict[tuple[str, str], Shortage] = {}  # (source, fingerprint) -> shortage
        self._lock = threading.Lock()

    def note(self, source: str, counts: Mapping[str, int], now: float) -> None:
        """What a decision of `source` lacked for each fingerprint it considered (0: nothing)."""
        with self._lock:
            for fingerprint, pods in counts.items():
                key = (source, fingerprint)
                if pods <= 0:
                    self._short.pop(key, None)
                    continue
                before = self._short.get(key)
                since = before.since if before is not None else now
                self._short[key] = Shortage(fingerprint, source, pods, since, now)
            self._forget(now)

    def current(self, now: float) -> list[Shortage]:
        with self._lock:
            self._forget(now)
            return sorted(self._short.values(), key=lambda s: (s.fingerprint, s.source))

    def _forget(self, now: float) -> None:
        stale = [key for key, short in self._short.items() if short.seen < now - LACK_SHOWN_S]
        for key in stale:
            del self._short[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._short)


@dataclass(frozen=True)
class Lacking:
    """A profile's pods wanted ahead and not started for want of a key, as pages and messages show it."""

    fingerprint: str
    profile: str  # the fingerprint's label form and environment: requests carry no profile name
    pods: dict[str, int]  # source -> pods
    since: float
    seen: float  # the latest decision that lacked keys for it


@dataclass(frozen=True)
class KeyFigures:
    """One pool's keys, as the status page, the metrics and GoCD's health messages show them."""

    configured_s: float  # the cluster profile's auto_register_key_expiry
    lifetime_s: float  # what the pool goes by: less after a refusal
    window_s: float  # the oldest a banked key may be when it goes into a pod
    usable: int  # banked keys the pool may use now
    refusal: Refusal | None
    refused_pods: int
    lacking: tuple[Lacking, ...]


def figures(state: PoolState) -> KeyFigures:
    with state.lock:
        settings, lifetime = state.settings, state.key_lifetime
        refusal, window = lifetime.refusal(settings), lifetime.window_s(settings)
        grouped: dict[str, list[Shortage]] = {}
        for short in state.shortages.current(state.clock.now()):
            grouped.setdefault(short.fingerprint, []).append(short)
        lacking = []
        for fingerprint, shorts in grouped.items():
            spec = state.book.recipe(fingerprint)
            environment = (spec.environment if spec is not None else None) or "no environment"
            pods = {short.source: short.pods for short in shorts}
            since, seen = min(short.since for short in shorts), max(short.seen for short in shorts)
            profile = f"{label_form(fingerprint)} ({environment})"
            lacking.append(Lacking(fingerprint, profile, pods, since, seen))
        usable = state.keys.usable(window)
        return KeyFigures(settings.auto_register_key_expiry, lifetime.lifetime_s(settings), window, usable,
                          refusal, lifetime.refused_pods, tuple(lacking))  # fmt: skip
