"""Per-fingerprint holds: while a fingerprint's pods are broken, no more of them are created.

A profile whose image does not exist makes every pod of it fail the same way; creating more would only
pile them up against `pending_pods_count`, starving the other profiles of the cluster. So the first
broken pod (pool/broken.py) puts its fingerprint on hold: nothing of it is created before the hold's
next try, 30 s after the failure, doubling with each further failure up to 5 minutes (the kubelet's own
back-off for image pulls and crash loops has the same shape: 10 s doubling to 5 minutes,
pkg/kubelet/kubelet.go's `backOffPeriod` and `MaxContainerBackOff`). When the try is due, one pod at a
time is created; one that registers ends the hold (`succeeded`). A changed profile has a new
fingerprint, which no hold covers: it is tried at once.

Holds live in memory only: a restarted backend tries each profile again once, and holds it again at the
first breakage it sees. Decisions only: the caller passes the time of its injected clock and keeps the
object under the pool's lock; the Applier commits changes from plan steps (intents.HoldBack,
intents.Recovered).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from elastic_agent.pool.backoff import Backoff

SCHEDULE = Backoff(base_s=30.0, cap_s=300.0)
# A hold whose fingerprint no pod has and no waiting job asks for is kept this long after its next try:
# jobs of a profile without reuse wait in GoCD only (it sends create-agent again every two minutes).
KEEP_S = 3600.0


@dataclass(frozen=True)
class Hold:
    fingerprint: str
    failures: int  # broken pods in a row
    since: float  # when the first of them was found
    next_try_at: float
    reason: str  # Kubernetes' reason and message for the latest (broken.Breakage.text)
    pod: str  # the latest broken pod


class Holds:
    def __init__(self, schedule: Backoff = SCHEDULE) -> None:
        self._schedule = schedule
        self._holds: dict[str, Hold] = {}

    def failed(self, fingerprint: str, pod: str, reason: str, now: float) -> Hold:
        before = self._holds.get(fingerprint)
        failures = 1 if before is None else before.failures + 1
        since = now if before is None else before.since
        hold = Hold(fingerprint, failures, since, now + self._schedule.delay_s(failures), reason, pod)
        self._holds[fingerprint] = hold
        return hold

    def succeeded(self, fingerprint: str) -> Hold | None:
        return self._holds.pop(fingerprint, None)

    def get(self, fingerprint: str | None) -> Hold | None:
        return self._holds.get(fingerprint) if fingerprint is not None else None

    def allowed(self, fingerprint: str, now: float, trying: int) -> int | None:
        """How many more pods of the fingerprint may be created now: None for no limit (no hold), 0
        before the next try or while `trying` (pods of it being created or not registered yet) is one,
        else 1."""
        hold = self._holds.get(fingerprint)
        if hold is None:
            return None
        return 1 if now >= hold.next_try_at and trying == 0 else 0

    def held(self) -> list[Hold]:
        return list(self._holds.values())

    def forget_except(self, fingerprints: Collection[str], now: float) -> None:
        """Holds of fingerprints not in `fingerprints` (asked for, or with pods) go `KEEP_S` after their
        next try: what is kept is bounded by the profiles that broke within the hour."""
        for fingerprint, hold in list(self._holds.items()):
            if fingerprint not in fingerprints and now - hold.next_try_at > KEEP_S:
                del self._holds[fingerprint]

    def __len__(self) -> int:
        return len(self._holds)
