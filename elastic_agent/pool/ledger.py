"""What reuse did, per fingerprint, for the cluster status report's "what it saved": jobs served, pods
started, how long jobs waited from their first create-agent to the pod's `true`, and how long pods sat
idle, over the last 24 hours and 7 days.

Kept in memory, on the injected clock, and bounded whatever the uptime (a backend runs for months): one
bucket per fingerprint and hour for `DAYS` days (older buckets go as new hours come), at most
`MAX_FINGERPRINTS` fingerprints (the one quiet longest goes first), and at most `MAX_ASKED` jobs between
their create-agent and their assignment (the oldest goes: a job cancelled before any pod took it never
gets its `true`). Waits are counted in logarithmic bins (`BIN_RATIO` apart), so the p95 is the upper edge
of its bin: at most 10 % above the true value, never below it; the mean is exact.

What a restart loses: everything here. The new backend starts with empty figures; a job whose
create-agent the old one heard and whose assignment the new one makes counts as served without a wait;
a pod that was idle across the restart counts its idle time from when the new backend first read it.
The pods' own annotations (jobs run, state) are what survives, and `advise` on a trace of GoCD's own
history (`python -m elastic_agent trace`) is the record that does not depend on this process.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

HOUR_S = 3600.0
DAYS = 7
HOURS = DAYS * 24
MAX_FINGERPRINTS = 200
MAX_ASKED = 20_000
BIN_FLOOR_S = 0.1  # waits up to this are one bin
BIN_RATIO = 1.1


def _bin(wait_s: float) -> int:
    return 0 if wait_s <= BIN_FLOOR_S else math.ceil(math.log(wait_s / BIN_FLOOR_S, BIN_RATIO))


def _upper_edge(index: int) -> float:
    return BIN_FLOOR_S * BIN_RATIO**index


@dataclass
class _Hour:
    served: int = 0
    started: int = 0
    waits: int = 0
    wait_sum_s: float = 0.0
    wait_max_s: float = 0.0
    bins: dict[int, int] = field(default_factory=dict)
    idle_s: float = 0.0


@dataclass(frozen=True)
class Figures:
    """One fingerprint over one span."""

    served: int
    started: int
    waits: int  # jobs whose create-agent and assignment were both seen
    mean_wait_s: float | None
    p95_wait_s: float | None
    idle_s: float

    @property
    def jobs_per_pod(self) -> float | None:
        return self.served / self.started if self.started else None


class ReuseLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: OrderedDict[int, float] = OrderedDict()  # job id -> its first create-agent
        self._hours: dict[str, dict[int, _Hour]] = {}  # fingerprint -> hour number -> what happened

    def _hour(self, fingerprint: str, at: float) -> _Hour:
        number = int(at // HOUR_S)
        hours = self._hours.get(fingerprint)
        if hours is None:
            if len(self._hours) >= MAX_FINGERPRINTS:
                quietest = min(self._hours, key=lambda fp: max(self._hours[fp], default=0))
                del self._hours[quietest]
            hours = self._hours[fingerprint] = {}
        bucket = hours.get(number)
        if bucket is None:
            for old in [n for n in hours if n <= number - HOURS]:
                del hours[old]
            bucket = hours[number] = _Hour()
        return bucket

    def asked(self, job_id: int, now: float) -> None:
        """A create-agent for the job: its wait starts at the first (GoCD re-sends them)."""
        with self._lock:
            if job_id not in self._asked:
                self._asked[job_id] = now
                while len(self._asked) > MAX_ASKED:
                    self._asked.popitem(last=False)

    def served(self, job_id: int, fingerprint: str, now: float) -> None:
        """A pod said `true` to the job."""
        with self._lock:
            bucket = self._hour(fingerprint, now)
            bucket.served += 1
            since = self._asked.pop(job_id, None)
            if since is not None:
                wait = max(0.0, now - since)
                bucket.waits += 1
                bucket.wait_sum_s += wait
                bucket.wait_max_s = max(bucket.wait_max_s, wait)
                index = _bin(wait)
                bucket.bins[index] = bucket.bins.get(index, 0) + 1

    def started(self, fingerprint: str, now: float) -> None:
        with self._lock:
            self._hour(fingerprint, now).started += 1

    def idled(self, fingerprint: str, since: float, until: float) -> None:
        """A pod of the fingerprint was idle from `since` to `until`, split over the hours it spans."""
        with self._lock:
            since = max(since, until - HOURS * HOUR_S)
            while since < until:
                end = min(until, (since // HOUR_S + 1) * HOUR_S)
                self._hour(fingerprint, since).idle_s += end - since
                since = end

    def figures(
        self, now: float, span_s: float, idle_now: Iterable[tuple[str, float]] = ()
    ) -> dict[str, Figures]:
        """Per fingerprint, the hours that overlap the last `span_s` seconds; `idle_now`: (fingerprint,
        idle since) of the pods idle at `now`, whose idle time so far counts too."""
        first = int((now - span_s) // HOUR_S)
        open_idle: dict[str, float] = {}
        for fingerprint, since in idle_now:
            so_far = max(0.0, now - max(since, now - span_s))
            open_idle[fingerprint] = open_idle.get(fingerprint, 0.0) + so_far
        with self._lock:
            found = {}
            for fingerprint in self._hours.keys() | open_idle.keys():
                hours = [h for n, h in self._hours.get(fingerprint, {}).items() if n >= first]
                found[fingerprint] = _summed(hours, open_idle.get(fingerprint, 0.0))
        return {fp: f for fp, f in found.items() if f.served or f.started or f.idle_s}

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {
                "ledger_jobs_asked": len(self._asked),
                "ledger_fingerprints": len(self._hours),
                "ledger_hours": sum(len(hours) for hours in self._hours.values()),
            }


def _summed(hours: list[_Hour], idle_s: float) -> Figures:
    waits = sum(h.waits for h in hours)
    bins: dict[int, int] = {}
    for hour in hours:
        for index, count in hour.bins.items():
            bins[index] = bins.get(index, 0) + count
    p95 = None
    if waits:
        rank, seen = math.ceil(0.95 * waits), 0
        for index in sorted(bins):
            seen += bins[index]
            if seen >= rank:
                p95 = min(_upper_edge(index), max(h.wait_max_s for h in hours))
                break
    return Figures(
        served=sum(h.served for h in hours),
        started=sum(h.started for h in hours),
        waits=waits,
        mean_wait_s=sum(h.wait_sum_s for h in hours) / waits if waits else None,
        p95_wait_s=p95,
        idle_s=idle_s + sum(h.idle_s for h in hours),
    )
