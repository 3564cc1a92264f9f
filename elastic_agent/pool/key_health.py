"""GoCD's health messages about registration keys, per cluster profile, renewed at every server-ping.

- An error while a refusal bounds the keys (pool/key_lifetime.py): GoCD refused a pod's key as unknown
  or expired, younger than the cluster profile says keys live. It names the profile's
  `auto_register_key_expiry` and the server's `gocd.ephemeral.auto.register.key.expiry.millis`, which
  must be equal, and goes once the profile changes.
- A warning per elastic profile (its fingerprint: requests carry no profile name) while the pods its
  warm pool (MinIdlePods, as a ReuseSchedule sets it now) or Predict want ahead cannot start for want of a
  key, saying what brings keys and what keeps them longer.

Texts only: the pool's figures come from `key_lifetime.figures`; no key is ever in them.
"""

from __future__ import annotations

from elastic_agent.gocd.health import HealthReporter
from elastic_agent.pool.broken_pods import clock_time
from elastic_agent.pool.key_lifetime import (
    REFUSAL_HELD_S,
    SOURCE_WORDS,
    KeyFigures,
    Lacking,
    Refusal,
    Spent,
    figures,
)
from elastic_agent.pool.state import PoolState
from profiles.cluster import ClusterProfile
from profiles.quantities import format_duration

PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"
SETTING = "auto_register_key_expiry"
GUIDE = 'docs/install.md, "A GoCD server tuned for reuse"'


def refused_key(cluster: ClusterProfile) -> str:
    return f"keys:refused:{cluster.cluster_key}"


def spent_key(cluster: ClusterProfile) -> str:
    return f"keys:spent:{cluster.cluster_key}"


def lacking_key(cluster: ClusterProfile, fingerprint: str = "") -> str:
    return f"keys:lacking:{cluster.cluster_key}:{fingerprint}"


def report(health: HealthReporter, cluster: ClusterProfile, where: str, state: PoolState) -> None:
    """`where`: the cluster as the other messages name it (its URL and namespace)."""
    found = figures(state)
    if found.refusal is None:
        health.resolved(refused_key(cluster))
    else:
        health.problem(refused_key(cluster), refused_message(where, found, found.refusal))
    if found.spent is None:
        health.resolved(spent_key(cluster))
    else:
        health.problem(spent_key(cluster), spent_message(where, found.spent), "warning")
    shown = set()
    for lacking in found.lacking:
        key = lacking_key(cluster, lacking.fingerprint)
        shown.add(key)
        health.problem(key, lacking_message(where, cluster, found, lacking), "warning")
    for key in health.keys(lacking_key(cluster)) - shown:
        health.resolved(key)


def refused_message(where: str, found: KeyFigures, refusal: Refusal) -> str:
    age, configured = format_duration(round(refusal.key_age_s)), format_duration(found.configured_s)
    return (
        f"{where}: GoCD refused the registration of pod {refusal.pod} at {clock_time(refusal.at)}: its "
        f"registration key was unknown or expired, though it was only {age} old when the pod was created "
        f"and the cluster profile's {SETTING} says GoCD's keys live {configured}. GoCD's keys live as long "
        f"as the server's system property {PROPERTY} says (30 minutes unless set): set {SETTING} to the "
        f"server's value, or give the server -D{PROPERTY}={round(found.configured_s * 1000)} and restart "
        f"it ({GUIDE}). Until {clock_time(refusal.at + REFUSAL_HELD_S)}, unless the cluster profile changes "
        f"or GoCD accepts an older key, no key {age} old or older goes into a pod, and the keys banked "
        f"before the refused one were dropped. (A restart of GoCD forgets every key too; this plugin drops "
        f"its banked keys whenever GoCD loads it.)"
    )


def spent_message(where: str, spent: Spent) -> str:
    return (
        f"{where}: GoCD refused the registration of pod {spent.pod} at {clock_time(spent.at)}: "
        f"{spent.cause}. "
        f"GoCD revokes a registration key before it checks the agent, so every later try reads \"is "
        f"either not provided or expired\" however young the key: this is not about the key lifetime "
        f"settings, and no key is taken to be expired for it. The pod was deleted and, once, replaced with "
        f"a banked key where one could be used (the job's console and the plugin's log say which)."
    )


def lacking_message(where: str, cluster: ClusterProfile, found: KeyFigures, lacking: Lacking) -> str:
    wanted = sum(lacking.pods.values())
    sources = ", ".join(f"{SOURCE_WORDS[source]}: {pods}" for source, pods in sorted(lacking.pods.items()))
    lifetime = format_duration(found.lifetime_s)
    if found.refusal is not None:
        lifetime += " (as GoCD's refusal of a key showed: see the error message)"
    register = format_duration(cluster.auto_register_timeout)
    if found.window_s <= 0:
        usable = f"none can be used: keys live {lifetime}, and a pod is given {register} to register"
    else:
        usable = (
            f"keys live {lifetime}, and one goes into a pod only while it has auto_register_timeout "
            f"({register}) of that left: for {format_duration(found.window_s)} after GoCD issued it"
        )
    return (
        f"{where}: {wanted} pod{'s' if wanted != 1 else ''} of the elastic profile whose pods are "
        f"{lacking.profile}, wanted ahead of demand ({sources}), could not start for want of a "
        f"registration key (since {clock_time(lacking.since)}, the latest at {clock_time(lacking.seen)}). "
        f"GoCD hands out one key per create-agent, and this plugin keeps those that reuse leaves unused; "
        f"{usable}. The next jobs of this cluster's reusing profiles bring more. To keep keys longer, give "
        f"the GoCD server a longer {PROPERTY} and this cluster profile the same {SETTING} ({GUIDE}), or "
        f"shorten auto_register_timeout."
    )
