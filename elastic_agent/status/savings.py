"""The cluster report's "what it saved": from the pool's own records (pool/ledger.py), per profile, for
the last 24 hours and the last 7 days, the jobs served, the pods started, jobs per pod, the mean and p95
wait from GoCD's first create-agent to the pod's `true`, and the pod-hours pods sat idle; then the
commands that turn GoCD's own history into advice (`trace`, then `advise`).

Every job served beyond the pods started is a pod start (10 to 30 s: docs/pods.md) that reuse spared; the idle
pod-hours are what it cost. The figures cover what this backend saw since it started (ledger.py says
what a restart loses), and the page says so. A profile is its fingerprint's label form, as in every
other table of the pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.ledger import HOUR_S, Figures
from elastic_agent.pool.records import PodState
from profiles.fingerprint import label_form
from profiles.values import safe_url

SPANS = (("24h", 24 * HOUR_S), ("7d", 7 * 24 * HOUR_S))
PLACEHOLDER_URL = "https://YOUR-GOCD-SERVER/go"
NONE = "\N{EN DASH}"  # as the other tables show a missing value


@dataclass(frozen=True)
class SavingsRow:
    profile: str  # the fingerprint's label form
    span: str  # "24h" or "7d"
    served: int
    started: int
    per_pod: str  # jobs per pod, NONE without a pod started
    mean_wait: str
    p95_wait: str
    idle_hours: str
    idle: float  # pod-hours, for the noun after it


@dataclass(frozen=True)
class Savings:
    rows: list[SavingsRow]
    trace_command: str
    advise_command: str


def _seconds(value: float | None) -> str:
    if value is None:
        return NONE
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _row(fingerprint: str, span: str, figures: Figures) -> SavingsRow:
    per_pod = figures.jobs_per_pod
    idle = figures.idle_s / HOUR_S
    return SavingsRow(
        profile=label_form(fingerprint), span=span, served=figures.served, started=figures.started,
        per_pod=f"{per_pod:.1f}" if per_pod is not None else NONE,
        mean_wait=_seconds(figures.mean_wait_s), p95_wait=_seconds(figures.p95_wait_s),
        idle_hours=f"{idle:.1f}", idle=round(idle, 1),
    )  # fmt: skip


def savings(pool: ClusterPool, clock: Clock) -> Savings:
    now = clock.now()
    idle_now = [(r.fingerprint, r.state_since) for r in pool.records()
                if r.state == PodState.IDLE and r.fingerprint and not r.failed]  # fmt: skip
    by_span = {span: pool.applier.ledger.figures(now, seconds, idle_now) for span, seconds in SPANS}
    fingerprints = sorted(set(by_span["7d"]), key=lambda fp: (-by_span["7d"][fp].served, label_form(fp)))
    rows = [_row(fp, span, by_span[span][fp])
            for fp in fingerprints for span, _ in SPANS if fp in by_span[span]]  # fmt: skip
    url = pool.settings.go_server_url
    server = safe_url(url) if url else PLACEHOLDER_URL
    return Savings(
        rows=rows,
        trace_command=f"python -m elastic_agent trace --server {server} --token-file TOKEN-FILE --since 7d "
        "-o trace.jsonl",
        advise_command="python -m elastic_agent advise trace.jsonl",
    )
