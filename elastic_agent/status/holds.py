"""The status page's rows for profiles held because their pods are broken (pool/holds.py).

An admin who sees jobs wait and no pod come needs the reason where the pods are listed: which profile
(its fingerprint's label form: requests carry no profile name), Kubernetes' reason and message for its
latest broken pod, how many broke in a row, and when the next pod is tried. Its own module so that the
status page module keeps to what every page shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.pool.broken_pods import clock_time
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.redaction import redact
from profiles.fingerprint import label_form
from profiles.quantities import format_duration


@dataclass(frozen=True)
class HeldRow:
    profile: str  # the fingerprint's label form
    reason: str
    pod: str
    failures: int
    next_try: str  # "12:00:30 UTC (in 25s)", or "now: one pod is tried"


def held_rows(pool: ClusterPool, clock: Clock) -> list[HeldRow]:
    now = clock.now()
    rows = []
    for hold in pool.holds():
        wait = hold.next_try_at - now
        when = f"{clock_time(hold.next_try_at)} (in {format_duration(max(1, round(wait)))})"
        rows.append(HeldRow(label_form(hold.fingerprint), redact(hold.reason), hold.pod, hold.failures,
                            when if wait > 0 else "now: one pod is tried at a time"))  # fmt: skip
    return rows
