"""Per-fingerprint holds: while a fingerprint's pods keep breaking, no more of them pile up.

A profile whose image does not exist makes every pod of it fail the same way; creating more would only
pile them up against `pending_pods_count`, starving the other profiles of the cluster. But one broken
pod alone says little: a node's hiccup, or a GoCD server restarting while the agent started, ends an
agent with a non-zero code once, and its job should not wait for nothing. So a fingerprint's broken
pods (pool/broken.py) are counted in a row, and:
- after the first, one pod is tried in its place at once (`wait_s(1)` is 0), that is as soon as a
  registration key is there for it (the broken pod had its job's, and a key goes into one pod at most:
  the replacement takes one that a waiting job of the fingerprint still holds, or that the job's next
  create-agent brings; a warm pool's pod, a banked one); pods of the fingerprint are created one at a
  time, none while another of them is being created or has not registered yet;
- from the second in a row, nothing of it is created before the hold's next try: 30 s after the
  failure, doubling with each further one up to 5 minutes (the kubelet's own back-off for image pulls
  and crash loops has the same shape: 10 s doubling to 5 minutes, pkg/kubelet/kubelet.go's
  `backOffPeriod` and `MaxContainerBackOff`); then again one pod at a time.
So a profile that cannot start never has more than one pod of it being tried, from the first failure on.

"In a row" ends with a success: a pod of the fingerprint whose agent registers (the backend sees it
poll for work, or GoCD lists it at a ping), whichever pod it is, created before the failure or after
(`succeeded`). A job assigned is a success only through that registration: a pod registered before
the failure that takes a job shows nothing about the pods started since (an image deleted from its
registry still runs in the containers started before). Time alone resets nothing; a changed profile
has a new fingerprint, which no hold covers: it is tried at once.

Holds live in memory only: a restarted backend counts each profile's broken pods from zero again.
Decisions only: the caller passes the time of its injected clock and keeps the object under the pool's
lock; the Applier commits changes from plan steps (intents.HoldBack, intents.Recovered).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from elastic_agent.pool.backoff import Backoff

SCHEDULE = Backoff(base_s=30.0, cap_s=300.0)  # from the second broken pod in a row
# A hold whose fingerprint no pod has and no waiting job asks for is kept this long after its next try:
# jobs of a profile without reuse wait in GoCD only (it sends create-agent again every two minutes).
KEEP_S = 3600.0


def wait_s(failures: int) -> float:
    """How long no pod of a fingerprint is created after its `failures`-th broken pod in a row: nothing
    after the first (its replacement is tried at once), then `SCHEDULE` from the second on."""
    return 0.0 if failures <= 1 else SCHEDULE.delay_s(failures - 1)


@dataclass(frozen=True)
class Hold:
    fingerprint: str
    failures: int  # broken pods in a row
    since: float  # when the first of them was found
    next_try_at: float  # when one pod may be tried: at once after the first failure (the failure's time)
    reason: str  # Kubernetes' reason and message for the latest (broken.Breakage.text)
    pod: str  # the latest broken pod


class Holds:
    """Per fingerprint, its row of broken pods; a fingerprint without one is not limited."""

    def __init__(self) -> None:
        self._holds: dict[str, Hold] = {}
        self.revision = 0  # bumped by each change (FingerprintBook.revision)

    def failed(self, fingerprint: str, pod: str, reason: str, now: float) -> Hold:
        before = self._holds.get(fingerprint)
        failures = 1 if before is None else before.failures + 1
        since = now if before is None else before.since
        hold = Hold(fingerprint, failures, since, now + wait_s(failures), reason, pod)
        self._holds[fingerprint] = hold
        self.revision += 1
        return hold

    def succeeded(self, fingerprint: str) -> Hold | None:
        """A pod of the fingerprint registered: the row ends, and with it the limit."""
        self.revision += 1
        return self._holds.pop(fingerprint, None)

    def get(self, fingerprint: str | None) -> Hold | None:
        return self._holds.get(fingerprint) if fingerprint is not None else None

    def allowed(self, fingerprint: str, now: float, trying: int) -> int | None:
        """How many more pods of the fingerprint may be created now: None for no limit (no broken pod in
        a row), 0 before the next try or while `trying` (pods of it being created or not registered
        yet) is one, else 1."""
        hold = self._holds.get(fingerprint)
        if hold is None:
            return None
        return 1 if now >= hold.next_try_at and trying == 0 else 0

    def next_try(self, fingerprint: str, now: float) -> float:
        """When `allowed` may next allow a pod it does not allow at `now`: the hold's next try while it is
        ahead; infinity otherwise (what else limits it, the pods trying, changes only with the state)."""
        hold = self._holds.get(fingerprint)
        return hold.next_try_at if hold is not None and now < hold.next_try_at else math.inf

    def held(self) -> list[Hold]:
        return list(self._holds.values())

    def forget_except(self, fingerprints: Collection[str], now: float) -> None:
        """Holds of fingerprints not in `fingerprints` (asked for, or with pods) go `KEEP_S` after their
        next try: what is kept is bounded by the profiles that broke within the hour."""
        for fingerprint, hold in list(self._holds.items()):
            if fingerprint not in fingerprints and now - hold.next_try_at > KEEP_S:
                del self._holds[fingerprint]
                self.revision += 1

    def __len__(self) -> int:
        return len(self._holds)
