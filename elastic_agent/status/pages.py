"""HTML status reports shown inside GoCD: the plugin's and a cluster's pages, and what every page shows
of a pod (its row). Rendered with Jinja2 (autoescaped); no page shows a registration key or a profile
secret. The agent page is agent.py's, the cluster page's nodes nodes.py's.

GoCD places each view inside its own page, so every template renders one `<div>` with its styles scoped
to it. Rows carry `data-pod` and `data-state` attributes so tests (and curious admins) can find them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, select_autoescape

from elastic_agent import __version__
from elastic_agent.clock import Clock
from elastic_agent.forecast.rows import PredictionRow
from elastic_agent.gocd.versions import Versions
from elastic_agent.kube.port import PodView
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.key_lifetime import usable_keys
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.redaction import redact
from elastic_agent.status.holds import HeldRow, held_rows
from elastic_agent.status.keys import KeysSummary, keys_summary
from elastic_agent.status.nodes import node_section
from elastic_agent.status.per_profile import ProfileCounts, profile_counts
from elastic_agent.status.savings import savings
from elastic_agent.status.words import counted, noun
from profiles.fingerprint import label_form
from profiles.quantities import format_duration
from profiles.values import safe_url

templates = Environment(
    loader=PackageLoader("elastic_agent.status", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["counted"] = counted
templates.filters["noun"] = noun

# The order states are counted and listed in; "failed" is shown for a failed or evicted pod that the
# next server ping has not retired yet.
STATES = ("booting", "idle", "busy", "retiring", "failed")
LOG_LINES = 100


def age(seconds: float) -> str:
    """A short elapsed time: 45s, 12m, 3h 5m, 2d 4h."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"


def _duration(seconds: float | None) -> str:
    """A setting's duration the way profiles write it (30s, 10m, 1h30m), or that it has no limit."""
    return format_duration(seconds) if seconds else "no limit"


def timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def cluster_url(url: str | None) -> str:
    """The cluster URL without user info or query (safe_url)."""
    return safe_url(url) if url else "in-cluster (the backend's service account)"


def job_text(raw: str | None) -> str | None:
    """A job annotation (JSON identifier) as GoCD names the run: pipeline/counter/stage/counter/job."""
    if not raw:
        return None
    try:
        job = json.loads(raw)
        return (
            f"{job['pipeline_name']}/{job['pipeline_counter']}/{job['stage_name']}/"
            f"{job['stage_counter']}/{job['job_name']}"
        )
    except (ValueError, KeyError, TypeError):
        return None


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


@dataclass(frozen=True)
class PodRow:
    name: str
    state: str  # one of STATES, as shown
    pool_state: str  # the state the pool keeps on the pod
    state_for: str
    age: str
    phase: str
    jobs_run: int
    job: str  # pipeline/counter/stage/counter/job, or ""
    job_relation: str  # "running", "was running", "last", "started for", or ""
    environment: str
    note: str
    node: str = ""
    registered: bool = False
    reuse: bool = False
    created: str = ""
    state_since: str = ""
    profile: str = ""  # the fingerprint's label form: pods with the same one are interchangeable


def row_of(record: PodRecord, view: PodView | None, now: float) -> PodRow:
    annotations = view.annotations if view is not None else {}
    current = job_text(annotations.get(labels.ANN_CURRENT_JOB))
    last = job_text(annotations.get(labels.ANN_LAST_JOB))
    created_for = job_text(annotations.get(labels.ANN_CREATED_FOR))
    failed = record.failed and record.state != PodState.RETIRING
    if record.current_job_id is not None:
        # The annotation may not be written back yet right after an assignment: the id is known.
        job = current or f"job id {record.current_job_id}"
        relation = "was running" if failed else "running"
    elif last:
        job, relation = last, "last"
    elif created_for:
        job, relation = created_for, "started for"
    else:
        job, relation = "", ""
    notes = []
    if record.failed:
        why = record.reason or record.phase
        message = view.message if view is not None else None
        notes.append(f"{why}: {message}" if message else why)
    if record.retire_reason and record.state == PodState.RETIRING:
        notes.append(f"Retiring: {record.retire_reason}")
    if failed:
        notes.append("The next server ping removes it")
    if record.deleting:
        notes.append("Being deleted")
    phase = record.phase + (f" ({record.reason})" if record.reason and record.reason != record.phase else "")
    return PodRow(
        name=record.name,
        state="failed" if failed else record.state.value,
        pool_state=record.state.value,
        # When a pod failed is not kept on it; the time in the pool's last state would mislead.
        state_for="" if failed else age(now - record.state_since),
        age=age(now - record.created_at),
        phase=phase,
        jobs_run=record.jobs_run,
        job=job,
        job_relation=relation,
        environment=record.environment or "",
        note=redact(" ".join(_sentence(note) for note in notes)),
        node=(view.node_name if view is not None else None) or "",
        registered=record.registered,
        reuse=record.reuse,
        created=timestamp(record.created_at),
        state_since=timestamp(record.state_since),
        profile=label_form(record.fingerprint) if record.fingerprint else "",
    )


def pod_rows(pool: ClusterPool, clock: Clock) -> list[PodRow]:
    now = clock.now()
    rows = [row_of(record, pool.port.get(record.name), now) for record in pool.records()]
    # Grouped by state in lifecycle order; the longest in its state first.
    return sorted(rows, key=lambda row: (STATES.index(row.state), row.state_since, row.name))


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    meaning: str


def _settings(pool: ClusterPool) -> list[Setting]:
    s = pool.settings
    return [
        Setting("idle_timeout", _duration(s.idle_timeout), "an idle pod is removed after this long"),
        Setting("max_pods", str(s.max_pods) if s.max_pods else "no limit", "pods of this cluster profile"),
        Setting(
            "max_pod_lifetime", _duration(s.max_pod_lifetime), "a pod retires after its job past this age"
        ),
        Setting(
            "pending_pods_count", str(s.pending_pods_count), "pods that may wait for registration at once"
        ),
        Setting("auto_register_timeout", _duration(s.auto_register_timeout), "a pod must register within"),
        Setting("auto_register_key_expiry", _duration(s.auto_register_key_expiry), "GoCD's keys live"),
        Setting("cluster_request_timeout", _duration(s.cluster_request_timeout), "per Kubernetes API call"),
        Setting(
            "go_server_url",
            s.go_server_url or "blank: GoCD's secure site URL",
            "the agents register with",
        ),
        Setting(
            "security_token",
            "set (not shown)" if s.security_token else "not set",
            "credentials for the Kubernetes API",
        ),
    ]


@dataclass(frozen=True)
class ScheduleRow:
    """One fingerprint with a ReuseSchedule: the period in force, when that changes, and the warm pool
    it asks for against what exists and the registration keys banked to make more."""

    profile: str  # the fingerprint's label form and environment: profiles have no name in requests
    in_force: str
    values: str
    changes: str
    wanted: int
    ready: int  # idle or booting pods beyond the waiting jobs: what MinIdlePods counts
    keys: int
    warnings: tuple[str, ...] = ()  # entries that change nothing or bring a plain value back


def _knob_text(min_idle: int, idle_timeout: float, max_jobs: int | None) -> str:
    limit = str(max_jobs) if max_jobs else "no limit"
    return f"MinIdlePods {min_idle}, IdleTimeout {_duration(idle_timeout)}, MaxJobsPerPod {limit}"


def schedule_rows(pool: ClusterPool, clock: Clock) -> list[ScheduleRow]:
    now = clock.now()
    keys = usable_keys(pool.state)  # those its pods may use: an older one would expire before registering
    rows = []
    for fingerprint, spec in pool.schedules():
        schedule = spec.schedule
        if schedule is None:
            continue
        entry = schedule.in_force(now)
        knobs = spec.knobs(now)
        change = schedule.transition(now)
        if change is None:
            changes = "not within two days"
        else:
            at, after = change
            to = after.describe() if after is not None else "the plain values"
            changes = f"{timestamp(at)} (in {age(at - now)}), to {to}"
        waiting, ready = pool.demand_of(fingerprint)
        rows.append(ScheduleRow(
            profile=f"{label_form(fingerprint)} ({spec.environment or 'no environment'})",
            in_force=entry.describe() if entry is not None else "no period: the plain values",
            values=_knob_text(knobs.min_idle_pods, knobs.idle_timeout, knobs.max_jobs_per_pod),
            changes=changes, wanted=knobs.min_idle_pods, ready=ready - waiting, keys=keys,
            warnings=spec.schedule_warnings(),
        ))  # fmt: skip
    return rows


@dataclass
class ClusterSummary:
    url: str
    namespace: str
    label: str
    synced: bool
    rows: list[PodRow]
    counts: dict[str, int]
    settings: list[Setting] = field(default_factory=list)
    waiting: int = 0  # jobs known to wait for a pod of a reuse-enabled profile
    schedules: list[ScheduleRow] = field(default_factory=list)
    held: list[HeldRow] = field(default_factory=list)  # profiles whose pods are broken
    keys: KeysSummary | None = None  # registration keys: how long, how many, who lacks them
    profiles: list[ProfileCounts] = field(default_factory=list)  # pods per profile and state

    @property
    def total(self) -> int:
        return len(self.rows)


def cluster_summary(pool: ClusterPool, clock: Clock) -> ClusterSummary:
    rows = pod_rows(pool, clock)
    counts = dict.fromkeys(STATES, 0)
    for row in rows:
        counts[row.state] += 1
    waiting = pool.waiting_jobs()
    return ClusterSummary(
        url=cluster_url(pool.settings.kubernetes_cluster_url),
        namespace=pool.settings.namespace,
        label=f"{labels.LABEL_CLUSTER}={pool.identity.cluster}",
        synced=pool.port.wait_synced(0),
        rows=rows,
        counts=counts,
        settings=_settings(pool),
        waiting=sum(waiting.values()),
        schedules=schedule_rows(pool, clock),
        held=held_rows(pool, clock),
        keys=keys_summary(pool, clock),
        profiles=profile_counts(((row.profile, row.reuse, row.state) for row in rows), waiting, STATES),
    )


def render_plugin_status(
    pools: list[ClusterPool],
    health: list[dict[str, str]],
    clock: Clock,
    versions: Versions | None = None,
    predictions: Sequence[PredictionRow] = (),
) -> str:
    """`versions`: the jar's (as its last request said it) and the backend's; shown first, with the
    sentence of their difference, if any, at the very top. `predictions`: Predict's rows, last."""
    return templates.get_template("plugin_status.html").render(
        versions=versions or Versions(None, __version__),
        version_known=versions is not None,
        clusters=[cluster_summary(pool, clock) for pool in pools],
        health=[{"type": m.get("type", "error"), "message": redact(m.get("message", ""))} for m in health],
        generated=timestamp(clock.now()),
        predictions=predictions,
    )


def render_cluster_status(pool: ClusterPool | None, clock: Clock) -> str:
    """The pods from memory, the nodes from the API (nodes.py: one line when they cannot be)."""
    cluster = cluster_summary(pool, clock) if pool else None
    nodes = node_section(pool.port, (row.node for row in cluster.rows)) if pool and cluster else None
    return templates.get_template("cluster_status.html").render(
        cluster=cluster,
        nodes=nodes,
        saved=savings(pool, clock) if pool else None,
        generated=timestamp(clock.now()),
    )
