"""How old a registration key may be when it goes into one of a pool's pods, and what GoCD's refusal of
one taught; and the pods a pool wanted ahead of demand but could not start for want of a key.

The cluster profile says how long GoCD's keys live (`auto_register_key_expiry`, which must equal the
server's `gocd.ephemeral.auto.register.key.expiry.millis`). A banked key goes into a pod only while it has
the pool's `auto_register_timeout` of that lifetime left, since the pod may take that long to register:
`window_s`. A key's age counts from when GoCD issued it, at the earliest: a create-agent may have
waited in GoCD's queue (`queue_allowance_s`).

A setting longer than the server's shows as a refusal in an agent's log (key_refusals.py), but so does
a key GoCD spent on a registration it refused for another cause: GoCD revokes a key before it checks
the agent. A refusal is read as expiry only when nothing shows the key spent (key_refusals.judge): the
refused key's age when its pod was created is then taken as the lifetime the server really has, for
`REFUSAL_HELD_S` at most, while the cluster profile stays the one it was found under, and until GoCD
accepts a key as old (`registered`: the oldest key accepted, `confirmed_s`, also shows a younger refused
key spent) or loads the plugin again (`server_started`). Meanwhile no key that old goes into a pod,
neither from the bank nor from a waiting job.

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

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elastic_agent.pool.fingerprints import HeldKey
from elastic_agent.pool.labels import ANN_KEY_ISSUED_AT
from profiles.cluster import ClusterProfile
from profiles.fingerprint import label_form

if TYPE_CHECKING:
    from elastic_agent.pool.state import PoolState

log = logging.getLogger(__name__)

LACK_SHOWN_S = 600.0
# A refusal read as expiry bounds the keys this long at most: a misreading costs an hour of warm pods,
# a true one a refused pod an hour while the settings stay wrong (the health message says which to fix).
REFUSAL_HELD_S = 3600.0
DEFAULT_RESEND_S = 120.0  # GoCD's default jobStarvationTimeout (its <elastic jobStarvationTimeout>)
QUEUE_TTL_MARGIN_S = 10.0  # GoCD posts create-agent with the threshold less this as time-to-live
WARM_POOL = "warm_pool"  # MinIdlePods, as in force now (a ReuseSchedule's period may set it)
PREDICT = "predict"
SOURCE_WORDS = {WARM_POOL: "MinIdlePods in force", PREDICT: "Predict"}


@dataclass(frozen=True)
class Refusal:
    """A pod whose key GoCD refused as unknown or expired, taken as proof that GoCD's keys live less than
    `key_age_s` (the key's age when its pod was created), found at `at` while the pool's profile was
    `settings`."""

    pod: str
    at: float
    key_age_s: float
    settings: ClusterProfile


@dataclass(frozen=True)
class Spent:
    """A pod whose key GoCD had revoked before it refused the agent (key_refusals.py): `cause` is why, in
    words, with GoCD's answer where its log has it. It says nothing of how long keys live."""

    pod: str
    at: float
    cause: str


class KeyLifetime:
    """One pool's: its lock guards it.

    A refusal read as expiry bounds the keys for `REFUSAL_HELD_S` at most, and only while nothing
    contradicts it: the key of a pod whose agent registered, older than the bound, undoes it (GoCD
    accepted a key that old). The oldest key GoCD accepted is kept (`confirmed_s`): a refused key
    younger than it cannot have expired, so it was spent."""

    def __init__(self) -> None:
        self._refusal: Refusal | None = None
        self._confirmed: tuple[ClusterProfile, float] | None = None  # (settings, oldest key accepted)
        self.spent: Spent | None = None  # the latest refusal of a spent key, while it is shown
        self.refused_pods = 0  # every pod whose key GoCD refused, whatever the cause (for /metrics)
        self.spent_pods = 0  # of those, the pods whose key had been spent (for /metrics)
        self._shortest_resend_s: float | None = None  # between two create-agents of one waiting job

    def refusal(self, settings: ClusterProfile, now: float) -> Refusal | None:
        """The refusal that bounds keys under `settings` at `now`, if any."""
        refusal = self._refusal
        if refusal is None or refusal.settings != settings or now - refusal.at >= REFUSAL_HELD_S:
            return None
        return refusal

    def confirmed_s(self, settings: ClusterProfile) -> float:
        """The oldest key (its age when its pod was created) that GoCD accepted under `settings`: keys
        live at least that long."""
        confirmed = self._confirmed
        return confirmed[1] if confirmed is not None and confirmed[0] == settings else 0.0

    def lifetime_s(self, settings: ClusterProfile, now: float) -> float:
        """How long keys live, as far as the pool knows: the profile's, or less after a refusal."""
        refusal = self.refusal(settings, now)
        lifetime = settings.auto_register_key_expiry
        return lifetime if refusal is None else min(lifetime, refusal.key_age_s)

    def window_s(self, settings: ClusterProfile, now: float) -> float:
        """The oldest a banked key may be when it goes into a pod (negative: none may)."""
        return self.lifetime_s(settings, now) - settings.auto_register_timeout

    def queue_allowance_s(self) -> float:
        """How long a create-agent may have waited in GoCD's queue after GoCD issued its key: the
        queue's time-to-live, the starvation threshold less 10 s (gocd/gocd
        `ElasticAgentPluginService.createAgentsFor`, `messageTimeToLive`). GoCD's request carries no
        time of its own (`ElasticAgentExtensionConverterV5.createAgentRequestBody`), so the worst is
        assumed: GoCD's default threshold, or a longer one that the re-sends showed."""
        shortest = self._shortest_resend_s
        threshold = DEFAULT_RESEND_S if shortest is None else max(DEFAULT_RESEND_S, shortest)
        return threshold - QUEUE_TTL_MARGIN_S

    def resent(self, gap_s: float) -> None:
        """A waiting job's create-agent came again, with a new key, `gap_s` after the one before: GoCD's
        threshold is about the shortest such gap (a re-send lost in the queue doubles a gap, never
        halves one). One shorter than the default is not taken: it only makes the allowance generous."""
        if self._shortest_resend_s is None or gap_s < self._shortest_resend_s:
            self._shortest_resend_s = gap_s

    def registered(self, age_s: float, settings: ClusterProfile) -> None:
        """GoCD accepted a key at least `age_s` old (its age when its pod was created, less what GoCD's
        queue may have added): keys live that long at least, so a refusal that said less is undone."""
        if age_s > self.confirmed_s(settings):
            self._confirmed = (settings, age_s)
        refusal = self._refusal
        if refusal is not None and refusal.settings == settings and age_s >= refusal.key_age_s:
            self._refusal = None

    def refused(self, refusal: Refusal | None, spent: Spent | None = None) -> None:
        """A pod's key was refused: as expired (`refusal`), as spent (`spent`), or, both None, for a reason
        that says nothing of the lifetime (the key was issued before GoCD last started, or its pod does
        not say when it was issued). Under the same profile the youngest refused key sets the bound."""
        self.refused_pods += 1
        if spent is not None:
            self.spent_pods += 1
            self.spent = spent
        if refusal is None:
            return
        known = self.refusal(refusal.settings, refusal.at)
        if known is None or refusal.key_age_s < known.key_age_s:
            self._refusal = refusal

    def shown_spent(self, now: float) -> Spent | None:
        """The latest spent key's refusal while it is recent enough to be shown."""
        spent = self.spent
        return spent if spent is not None and now - spent.at < LACK_SHOWN_S else None

    def forget_unless(self, settings: ClusterProfile) -> None:
        """The profile changed since the refusal: what it taught was about the old one."""
        if self._refusal is not None and self._refusal.settings != settings:
            self._refusal = None
        if self._confirmed is not None and self._confirmed[0] != settings:
            self._confirmed = None

    def server_started(self) -> None:
        """GoCD started again (it loaded the plugin): its key lifetime may be another now."""
        self._refusal, self._confirmed, self.spent = None, None, None


def window_s(state: PoolState) -> float:
    with state.lock:
        return state.key_lifetime.window_s(state.settings, state.clock.now())


def usable_keys(state: PoolState) -> int:
    """How many banked keys this pool may put into pods now."""
    return state.keys.usable(window_s(state))


def take_key(state: PoolState) -> HeldKey | None:
    """The oldest banked key this pool may still put into a pod, taken out of the bank."""
    return state.keys.take(window_s(state))


def issued_at(state: PoolState, now: float) -> float:
    """When GoCD issued the key of a create-agent that arrives at `now`, at the earliest."""
    return now - state.key_lifetime.queue_allowance_s()


def key_issued_at(annotations: Mapping[str, str]) -> float | None:
    """When GoCD issued a pod's key at the earliest, as the pod says (labels.ANN_KEY_ISSUED_AT)."""
    try:
        text = annotations.get(ANN_KEY_ISSUED_AT)
        return float(text) if text else None
    except ValueError:
        return None


def job_key_usable(state: PoolState, since: float, now: float) -> bool:
    """Whether a waiting job's own key, issued at `since`, is younger than any GoCD refused."""
    with state.lock:
        refusal = state.key_lifetime.refusal(state.settings, now)
    return refusal is None or now - since < refusal.key_age_s


@dataclass(frozen=True)
class Shortage:
    fingerprint: str
    source: str  # WARM_POOL or PREDICT
    pods: int  # wanted by the latest decision of the source that lacked keys, not started for want of one
    since: float  # since when the source's decisions have lacked keys for the fingerprint
    seen: float  # the latest decision that lacked them


class KeyShortages:
    """Pods wanted ahead and not started for want of a key. A shortage that starts (none was shown for
    its source and fingerprint) is logged once: the next line comes only after it ended, by a decision
    that lacked nothing or by `LACK_SHOWN_S` without one that lacked keys (a quiet spell)."""

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
                self._forget(now)
                before = self._short.get(key)
                since = before.since if before is not None else now
                self._short[key] = Shortage(fingerprint, source, pods, since, now)
                if before is None:
                    log.warning(
                        "%d pod%s of the elastic profile whose pods are %s, wanted ahead of demand (%s), "
                        "cannot start for want of a registration key: the cluster status page and GoCD's "
                        "health messages say what brings keys", pods, "s" if pods != 1 else "",
                        label_form(fingerprint), SOURCE_WORDS.get(source, source),
                    )  # fmt: skip
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
    spent: Spent | None = None  # the latest refusal of a spent key, while shown
    spent_pods: int = 0


def figures(state: PoolState) -> KeyFigures:
    with state.lock:
        settings, lifetime, now = state.settings, state.key_lifetime, state.clock.now()
        refusal, window = lifetime.refusal(settings, now), lifetime.window_s(settings, now)
        grouped: dict[str, list[Shortage]] = {}
        for short in state.shortages.current(now):
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
        return KeyFigures(settings.auto_register_key_expiry, lifetime.lifetime_s(settings, now), window,
                          usable, refusal, lifetime.refused_pods, tuple(lacking), lifetime.shown_spent(now),
                          lifetime.spent_pods)  # fmt: skip
