"""server-ping for one cluster: bring pods in line with GoCD's list of agents and retire what must go.

GoCD's Building/Idle is the truth: it repairs states that a lost job-completion or a restart left
wrong. Pods go when idle past their idle timeout (keeping MinIdlePods), when their profile changed, when
their agent never registered, when they failed or were evicted, or when their agent is gone. A busy pod
is never retired: the decision is taken under the pool's lock, against should-assign-work.
"""

from __future__ import annotations

from collections.abc import Mapping

from elastic_agent import labels
from elastic_agent.gocd import Agent, GoCDServer
from elastic_agent.pool import ClusterPool
from elastic_agent.pool_state import ASSIGNMENT_GRACE_S, NO_JOB_LABELS, _duration
from elastic_agent.records import PodRecord, PodState


def reconcile(pool: ClusterPool, agents: Mapping[str, Agent], gocd: GoCDServer) -> list[str]:
    """One ping's work; returns what was done, one line per action."""
    now = pool.clock.now()
    pool.forget_deleted()
    done: list[str] = []
    to_retire: list[tuple[str, str]] = []
    with pool.lock:
        records = [r for r in pool.records() if not r.deleting]
        for record in records:
            agent = agents.get(record.name)
            if agent is not None:
                pool.mark_registered(record)
            repaired = _repair(pool, record, agent, now)
            if repaired:
                done.append(repaired)
                record = pool.record(record.name) or record  # decide on the repaired state
            reason = _reason_to_retire(pool, record, agent, now)
            if reason and pool.claim_for_retirement(record.name, reason, even_if_busy=record.failed):
                to_retire.append((record.name, reason))
        to_retire += _idle_too_long(pool, [pool.record(r.name) or r for r in records], now)
    if to_retire:
        deleted = pool.retire(to_retire, "server-ping", gocd)
        reasons = dict(to_retire)
        done += [f"retired pod {name}: {reasons[name]}" for name in deleted]
    done += [f"created pod {name} for waiting jobs" for name in pool.serve_waiting_jobs()]
    done += [f"created warm pod {name}" for name in pool.top_up_warm_pool()]
    pool.requeue_unwritten()
    return done


def _repair(pool: ClusterPool, record: PodRecord, agent: Agent | None, now: float) -> str | None:
    if agent is None or record.state == PodState.RETIRING or record.failed:
        return None
    if agent.building and record.state != PodState.BUSY:
        pool.change(
            record.name, {labels.ANN_STATE: PodState.BUSY.value, labels.ANN_STATE_SINCE: f"{now:.3f}"}
        )
        return f"pod {record.name} is building according to GoCD: marked busy"
    grace_over = now - pool.assigned_at(record.name, record.state_since) > ASSIGNMENT_GRACE_S
    if not agent.building and record.state == PodState.BUSY and grace_over:
        # The lost job-completion's job still ran here: count it, or MaxJobsPerPod would be exceeded
        # (and a one-job pod, idle with its job done, is retired below).
        ran = {labels.ANN_JOBS_RUN: str(record.jobs_run + 1)}
        pool.change(record.name, pool.idle_changes(now) | ran, NO_JOB_LABELS)
        pool.forget_assignment(record.name, record.current_job_id)
        return f"pod {record.name} is idle according to GoCD (a job-completion was lost): marked idle"
    return None


def _reason_to_retire(pool: ClusterPool, record: PodRecord, agent: Agent | None, now: float) -> str | None:
    settings = pool.settings
    if record.state == PodState.RETIRING:
        return record.retire_reason or "it was retiring"
    if record.failed:
        if record.reason == "Evicted" and record.state == PodState.IDLE:
            return "it was evicted while idle"
        return f"the pod failed ({record.reason or record.phase})"
    if agent is None:
        if record.registered:
            return "its agent is no longer registered with GoCD"
        if now - record.created_at > settings.auto_register_timeout:
            return f"its agent did not register within {_duration(settings.auto_register_timeout)}"
        return None
    if agent.building:
        return None
    if not record.reuse:
        if record.state == PodState.IDLE and record.jobs_run:
            return "its job finished (no job-completion was received) and the profile runs one job per pod"
        if record.state == PodState.IDLE and now - record.state_since > settings.idle_timeout:
            return f"its job never came to it within {_duration(settings.idle_timeout)} (cancelled?)"
        return None
    if record.state == PodState.IDLE:
        if not record.can_take_more_jobs():
            return f"it ran {record.jobs_run} jobs (MaxJobsPerPod)"
        if record.fingerprint in pool.superseded:
            return "its profile changed since it was created"
        if settings.max_pod_lifetime and now - record.created_at >= settings.max_pod_lifetime:
            return f"it is older than max_pod_lifetime ({_duration(settings.max_pod_lifetime)})"
    return None


def _idle_too_long(pool: ClusterPool, records: list[PodRecord], now: float) -> list[tuple[str, str]]:
    """Idle pods past their idle timeout, oldest first, keeping MinIdlePods idle pods per fingerprint."""
    by_fingerprint: dict[str, list[PodRecord]] = {}
    for record in records:
        if record.reuse and record.state == PodState.IDLE and pool.alive(record):
            by_fingerprint.setdefault(record.fingerprint or "", []).append(record)
    chosen: list[tuple[str, str]] = []
    for group in by_fingerprint.values():
        idle = sorted(group, key=lambda r: r.state_since)
        keep = max(r.min_idle for r in idle)
        timeout_of = {
            r.name: r.idle_timeout if r.idle_timeout is not None else pool.settings.idle_timeout for r in idle
        }
        expired = [r for r in idle if now - r.state_since > timeout_of[r.name]]
        removable = max(0, len(idle) - keep)
        for record in expired[:removable]:
            idle_for = _duration(round(now - record.state_since))
            reason = f"idle {idle_for} (idle timeout {_duration(timeout_of[record.name])})"
            if pool.claim_for_retirement(record.name, reason):
                chosen.append((record.name, reason))
    return chosen
