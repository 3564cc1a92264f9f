"""The cluster status page's registration keys: how long keys live and are used, how many this cluster
may use now, a refusal by GoCD that bounds them, and the profiles whose pods wanted ahead could not start
for want of a key.

An admin who sees a warm pool stay short, or Predict start fewer pods than it learned, needs to see that
the keys are the limit and what moves it (README.md, "Status pages and metrics"; docs/install.md, "A GoCD
server tuned for reuse"). Its own module so that the status page module keeps to what every page shows.
Numbers and names only: never a key.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.pool.broken_pods import clock_time
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.key_lifetime import PREDICT, REFUSAL_HELD_S, WARM_POOL, figures
from profiles.quantities import format_duration


@dataclass(frozen=True)
class LackingRow:
    profile: str  # the fingerprint's label form and environment
    warm_pool: int  # pods MinIdlePods (as in force) wanted and could not start
    predict: int
    since: str


@dataclass(frozen=True)
class KeysSummary:
    lifetime: str  # how long keys live as the pool goes by it, and whence
    used_for: str  # the oldest a banked key may be when it goes into a pod
    usable: int
    banked: int  # in the bank, for every cluster of the backend
    refusal: str  # "" without one
    refused_pods: int
    spent: str  # the latest refusal of a key spent before, while shown ("" without one)
    spent_pods: int
    lacking: tuple[LackingRow, ...]


def keys_summary(pool: ClusterPool, clock: Clock) -> KeysSummary:
    found = figures(pool.state)
    lifetime = f"{format_duration(found.configured_s)} (auto_register_key_expiry)"
    refusal = ""
    if found.refusal is not None:
        age = format_duration(round(found.refusal.key_age_s))
        configured = format_duration(found.configured_s)
        lifetime = f"less than {age}, as GoCD's refusal of a key that old shows"
        lifetime += f" (auto_register_key_expiry: {configured})"
        refusal = (
            f"GoCD refused the key of pod {found.refusal.pod} at {clock_time(found.refusal.at)}, {age} old "
            f"when the pod was created, and nothing showed it spent before, so it was taken as expired: the "
            f"GoCD server's gocd.ephemeral.auto.register.key.expiry.millis is shorter than "
            f"auto_register_key_expiry. No key that old is used until "
            f"{clock_time(found.refusal.at + REFUSAL_HELD_S)}, unless the profile changes or GoCD accepts "
            f"an older key."
        )
    spent = ""
    if found.spent is not None:
        spent = (
            f"GoCD refused the key of pod {found.spent.pod} at {clock_time(found.spent.at)}, taken as a key "
            f"spent before, not expired: {found.spent.cause}."
        )
    used_for = "none: keys expire before a pod registers"
    if found.window_s > 0:
        used_for = format_duration(found.window_s)
    rows = tuple(
        LackingRow(lacks.profile, lacks.pods.get(WARM_POOL, 0), lacks.pods.get(PREDICT, 0),
                   f"{clock_time(lacks.since)} ({format_duration(max(1, round(clock.now() - lacks.since)))})")
        for lacks in found.lacking
    )  # fmt: skip
    banked = len(pool.state.keys)
    return KeysSummary(lifetime, used_for, found.usable, banked, refusal, found.refused_pods, spent,
                       found.spent_pods, rows)  # fmt: skip
