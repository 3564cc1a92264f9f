"""The agent status report: one pod, asked for from an agent's page (by its elastic agent id, the pod's
name) or from a job's page (by the job's id, no agent id): the same view either way.

It shows what the official plugin's report shows (gocd/kubernetes-elastic-agents,
`AgentStatusReportExecutor`, `model/reports/agent/KubernetesElasticAgent.java`,
`agent-status-report.template.ftlh`): the pod's details, every container, the pod's events, every
container's log and the pod's YAML (pod.py, which hides what may be secret); then what only
this plugin knows: the jobs the pod ran, why it is kept or goes (keep.py), and its reuse
fingerprint. Each read from the API stands alone (the RBAC may grant one and not another, a container
may have no log yet): what fails is said in a line, and the rest is shown. The pod itself is read
afresh (`ClusterPort.read_pod`); should that fail, the page falls back on the watched cache, as it does
at once during an outage, when every read would only wait for its timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.kube.port import ClusterError
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.decisions import ordinal
from elastic_agent.pool.job_history import recent_jobs
from elastic_agent.pool.records import PodRecord, job_id_of
from elastic_agent.redaction import hide, request_values
from elastic_agent.status.keep import keeping
from elastic_agent.status.pages import age, cluster_url, row_of, templates, timestamp
from elastic_agent.status.pod import ENV_RULE, pod_details, pod_yaml
from profiles.fields import CLUSTER_FIELDS
from profiles.fingerprint import label_form
from profiles.quantities import format_duration

LOG_LINES = 100


@dataclass(frozen=True)
class ContainerLog:
    container: str
    text: str
    problem: str = ""


def _pod_for_job(pool: ClusterPool, job_id: int) -> tuple[PodRecord | None, str]:
    """The pod that runs, ran or was started for a job, and how it relates to it."""
    records = pool.records()
    for record in records:
        if record.current_job_id == job_id:
            return record, "runs this job"
    for record in records:
        view = pool.port.get(record.name)
        last = job_id_of(view.annotations.get(labels.ANN_LAST_JOB)) if view is not None else None
        if last == job_id or any(entry[0] == job_id for entry in recent_jobs(record.recent_jobs)):
            return record, "ran this job"
    for record in records:
        if record.created_for_job_id == job_id:
            return record, "was started for this job"
    return None, ""


def secure_values(pool: ClusterPool) -> list[str]:
    """The values of the cluster profile's secure fields (its metadata's `secure`), as `hide` takes them:
    never shown, whatever text they turn up in."""
    settings = pool.settings
    return request_values([getattr(settings, f.key, None) or "" for f in CLUSTER_FIELDS if f.secure])


def _events(pool: ClusterPool, name: str, now: float, secure: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {
            "type": event.get("type") or "Normal", "reason": event.get("reason") or "",
            "message": hide(str(event.get("message") or ""), secure), "count": event.get("count") or 1,
            "first": timestamp(event["first_seen"]) if event.get("first_seen") else "",
            "ago": age(now - event["last_seen"]) + " ago" if event.get("last_seen") else "",
            "container": _container_of(str(event.get("field_path") or "")),
            "last_seen": event.get("last_seen") or 0.0,
        }
        for event in pool.port.pod_events(name)
    ]  # fmt: skip


def _container_of(field_path: str) -> str:
    """`spec.containers{agent}` → `agent` (the kubelet's GenerateContainerRef); other paths as given."""
    head, brace, rest = field_path.partition("{")
    return rest.rstrip("}") if brace and head.startswith("spec.") else field_path


def _logs(
    pool: ClusterPool, name: str, containers: Sequence[str], secure: Sequence[str]
) -> list[ContainerLog]:
    logs = []
    for container in containers:
        try:  # the agent's own output could echo a registration key or a token
            text = hide(pool.port.pod_log(name, tail_lines=LOG_LINES, container=container), secure)
            logs.append(ContainerLog(container, text.rstrip("\n")))
        except ClusterError as error:
            problem = f"The log of container {container} could not be read: {hide(str(error), secure)}"
            logs.append(ContainerLog(container, "", problem))
    return logs


def _read(
    pool: ClusterPool, name: str, now: float, secure: Sequence[str], problems: list[str]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The pod afresh and its events, each read on its own; what fails is added to `problems`."""
    obj: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    try:
        obj = pool.port.read_pod(name)
        if obj is None:
            problems.append("The pod is gone from the cluster since the plugin last saw it.")
    except ClusterError as error:
        said = hide(str(error), secure)
        problems.append(f"The pod could not be read afresh (shown as last watched): {said}")
    try:
        events = _events(pool, name, now, secure)
    except ClusterError as error:
        problems.append(f"Events could not be read: {hide(str(error), secure)}")
    return obj, events


def _reuse(pool: ClusterPool, record: PodRecord, now: float) -> dict[str, Any]:
    """What only this plugin knows of the pod: its jobs, why it stays or goes, its fingerprint."""
    knobs = record.knobs(now, pool.settings.idle_timeout)
    same = [r.name for r in pool.records() if r.fingerprint == record.fingerprint and r.name != record.name]
    return {
        "jobs": list(reversed(recent_jobs(record.recent_jobs))),
        "keeping": keeping(record, pool.settings, now),
        "fingerprint": record.fingerprint or "",
        "fingerprint_label": label_form(record.fingerprint) if record.fingerprint else "",
        "same_fingerprint": len(same) if record.reuse else 0,
        "knobs": f"IdleTimeout {format_duration(knobs.idle_timeout)}, MaxJobsPerPod "
        f"{knobs.max_jobs_per_pod or 'no limit'}, MinIdlePods {knobs.min_idle_pods}",
        "next_ordinal": ordinal(record.jobs_run + 1),
    }


def render_agent_status(
    pool: ClusterPool | None, agent_id: str | None, job_id: int | None, clock: Clock
) -> str:
    template = templates.get_template("agent_status.html")
    generated = timestamp(clock.now())
    if pool is None:
        return template.render(pod=None, cluster=None, agent_id=agent_id, job_id=job_id, generated=generated)
    record, relation = None, ""
    if agent_id:
        record = pool.record(agent_id)
    elif job_id is not None:
        record, relation = _pod_for_job(pool, job_id)
    cluster = {"url": cluster_url(pool.settings.kubernetes_cluster_url), "namespace": pool.settings.namespace}
    if record is None:
        return template.render(
            pod=None, cluster=cluster, agent_id=agent_id, job_id=job_id, generated=generated
        )
    now, secure = clock.now(), secure_values(pool)
    view = pool.port.get(record.name)
    row = row_of(record, view, now)
    problems: list[str] = []
    obj: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    outage = pool.port.outage.problem()
    if outage is not None:  # each read would wait for its timeout: show what the watch last saw
        problems.append(f"Shown as last watched, without events or logs: {hide(str(outage), secure)}.")
    else:
        obj, events = _read(pool, record.name, now, secure, problems)
    details = pod_details(obj, secure) if obj is not None else None
    names = [c.name for c in details.containers] if details else list(view.containers if view else ())
    failed_ago = None
    if row.state == "failed":  # the Warning event of the failure (Evicted, Error, ...) tells when
        times = [e["last_seen"] for e in events
                 if e["type"] == "Warning" and e["reason"] == record.reason and e["last_seen"]]  # fmt: skip
        failed_ago = age(now - max(times)) if times else None
    return template.render(
        pod=row, relation=relation, job_id=job_id, cluster=cluster, details=details,
        labels=sorted((view.labels if view else {}).items()), events=events,
        logs=_logs(pool, record.name, names, secure) if names and outage is None else [], log_lines=LOG_LINES,
        yaml_text=pod_yaml(obj, secure) if obj is not None else "", env_rule=ENV_RULE,
        reuse=_reuse(pool, record, now), problems=problems, failed_ago=failed_ago, generated=generated,
    )  # fmt: skip
