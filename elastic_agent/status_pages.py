"""HTML status reports shown inside GoCD. Rendered with Jinja2 (autoescaped); they show states, jobs,
events and log lines, never a pod's environment (it holds the registration key) or profile secrets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from elastic_agent.clock import Clock
from elastic_agent.kube.port import ClusterError
from elastic_agent.pool import ClusterPool
from elastic_agent.records import PodRecord

_templates = Environment(
    loader=PackageLoader("elastic_agent", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h {seconds % 3600 // 60}m"


@dataclass(frozen=True)
class PodRow:
    name: str
    state: str
    state_for: str
    age: str
    phase: str
    jobs_run: int
    job: str
    environment: str
    reason: str


def _job_text(pool: ClusterPool, record: PodRecord) -> str:
    pod = pool.port.get(record.name)
    if pod is None:
        return ""
    for key in ("reuse.gocd.org/current-job", "reuse.gocd.org/last-job", "reuse.gocd.org/created-for"):
        raw = pod.annotations.get(key)
        if raw:
            try:
                job = json.loads(raw)
                return (
                    f"{job['pipeline_name']}/{job['pipeline_counter']}/{job['stage_name']}/"
                    f"{job['stage_counter']}/{job['job_name']}"
                )
            except (ValueError, KeyError, TypeError):
                return ""
    return ""


def pod_rows(pool: ClusterPool, clock: Clock) -> list[PodRow]:
    now = clock.now()
    rows = [
        PodRow(
            name=record.name,
            state=record.state.value,
            state_for=_age(now - record.state_since),
            age=_age(now - record.created_at),
            phase=record.phase + (" (deleting)" if record.deleting else ""),
            jobs_run=record.jobs_run,
            job=_job_text(pool, record),
            environment=record.environment or "",
            reason=record.retire_reason or record.reason or "",
        )
        for record in pool.records()
    ]
    return sorted(rows, key=lambda row: (row.state, row.name))


def cluster_summary(pool: ClusterPool, clock: Clock) -> dict[str, Any]:
    rows = pod_rows(pool, clock)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    return {
        "url": pool.settings.kubernetes_cluster_url or "in-cluster",
        "namespace": pool.settings.namespace,
        "synced": pool.port.wait_synced(0),
        "rows": rows,
        "counts": counts,
        "settings": {
            "pending_pods_count": pool.settings.pending_pods_count,
            "max_pods": pool.settings.max_pods or "no limit",
            "auto_register_timeout": _age(pool.settings.auto_register_timeout),
        },
    }


def render_plugin_status(pools: list[ClusterPool], health: list[dict[str, str]], clock: Clock) -> str:
    return _templates.get_template("plugin_status.html").render(
        clusters=[cluster_summary(pool, clock) for pool in pools], health=health
    )


def render_cluster_status(pool: ClusterPool | None, clock: Clock) -> str:
    return _templates.get_template("cluster_status.html").render(
        cluster=cluster_summary(pool, clock) if pool else None
    )


def render_agent_status(
    pool: ClusterPool | None, agent_id: str | None, job_id: int | None, clock: Clock
) -> str:
    record = None
    if pool is not None:
        if agent_id:
            record = pool.record(agent_id)
        elif job_id is not None:
            record = next(
                (r for r in pool.records() if job_id in (r.current_job_id, r.created_for_job_id)), None
            )
    if pool is None or record is None:
        return _templates.get_template("agent_status.html").render(
            pod=None, wanted=agent_id or f"job {job_id}"
        )
    row = next((r for r in pod_rows(pool, clock) if r.name == record.name), None)
    events: list[dict[str, Any]] = []
    log_text = ""
    problem = None
    try:
        events = pool.port.pod_events(record.name)
        log_text = pool.port.pod_log(record.name, tail_lines=100)
    except ClusterError as error:
        problem = str(error)
    view = pool.port.get(record.name)
    return _templates.get_template("agent_status.html").render(
        pod=row,
        labels=sorted((view.labels if view else {}).items()),
        node=view.node_name if view else None,
        events=events,
        log_text=log_text,
        problem=problem,
        wanted=record.name,
    )
