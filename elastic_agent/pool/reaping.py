"""server-ping's decisions for one cluster: bring pods in line with GoCD's list of agents, and choose
what must go.

GoCD's Building/Idle is the truth: it repairs states that a lost job-completion or a restart left
wrong, except where this backend changed the pod after the list was asked for (the list is older than
that change). Pods go when idle past their idle timeout (keeping MinIdlePods), when their profile
changed, when their agent never registered, when they failed or were evicted, or when their agent is
gone or disabled (GoCD gives it no work). A busy pod is never chosen: the choice is made under the pool's
lock, against should-assign-work.

A pool whose cluster profile is no longer in the ping retires all its pods (`orphaned`), busy ones
once their job is over.

Two passes, each a plan committed before the next reads the state: first what GoCD's list says
(registrations and repairs), then what retires, on the repaired states.
"""

from __future__ import annotations

from collections.abc import Mapping

from elastic_agent.gocd.server import Agent
from elastic_agent.pool import marks
from elastic_agent.pool.broken_pods import registered
from elastic_agent.pool.intents import Intent, Plan, Release, Retire, Say
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.pool.state import PoolState
from profiles.quantities import format_duration

# After a `true` from should-assign-work GoCD may still list the agent as Idle for a moment.
ASSIGNMENT_GRACE_S = 30.0
DISABLED = "Disabled"  # an agent's config_state


def what_gocd_says(state: PoolState, agents: Mapping[str, Agent], now: float, listed_at: int) -> Plan:
    """Registrations and repairs from GoCD's agent list, which was asked for at change mark
    `listed_at` (PoolState.change_mark): a pod changed here since keeps its newer state."""
    intents: list[Intent] = []
    for record in state.records():
        if record.deleting:
            continue
        agent = agents.get(record.name)
        if agent is not None and not record.registered:
            intents += registered(state, record, now)  # a held profile's row of broken pods ends
        if not state.changed_since(record.name, listed_at):
            intents += _repair(state, record, agent, now)
    return Plan(tuple(intents))


def _repair(state: PoolState, record: PodRecord, agent: Agent | None, now: float) -> tuple[Intent, ...]:
    if agent is None or record.state == PodState.RETIRING or record.failed:
        return ()
    if agent.building and record.state != PodState.BUSY:
        said = f"pod {record.name} is building according to GoCD: marked busy"
        return marks.busy_with_unknown_job(record.name, now), Say(said)
    grace_over = now - state.assigned_at(record.name, record.state_since) > ASSIGNMENT_GRACE_S
    if not agent.building and record.state == PodState.BUSY and grace_over:
        said = f"pod {record.name} is idle according to GoCD (a job-completion was lost): marked idle"
        return marks.idle_after_lost_completion(record, now), Release(record.name), Say(said)
    return ()


def retirements(state: PoolState, agents: Mapping[str, Agent], now: float) -> Plan:
    """Every pod that must go, marked retiring (busy ones excepted, but for failed pods, whose job died
    with them), then one ordered retirement of them all."""
    intents: list[Intent] = []
    chosen: list[tuple[str, str]] = []
    records = [r for r in state.records() if not r.deleting and not state.deleted_by_us(r.name)]
    for record in records:
        reason = _reason_to_retire(state, record, agents.get(record.name), now)
        if reason is None or (record.state == PodState.BUSY and not record.failed):
            continue
        if record.state != PodState.RETIRING:
            intents.append(marks.retiring(record.name, reason))
        chosen.append((record.name, reason))
    taken = {name for name, _ in chosen}
    for record, reason in _idle_too_long(state, [r for r in records if r.name not in taken], now):
        intents.append(marks.retiring(record.name, reason))
        chosen.append((record.name, reason))
    if chosen:
        intents.append(Retire(tuple(chosen)))
    return Plan(tuple(intents))


ORPHANED = "its cluster profile was deleted or now names another cluster or namespace"


def orphaned(state: PoolState) -> Plan:
    """The pool's cluster profile is gone from GoCD's ping (deleted, or edited to name another cluster):
    every pod goes, its agent with it, but a busy one, which goes once its job is over (GoCD's list
    repairs a lost job-completion first: `what_gocd_says`). The pool is dropped once it has no pod
    left (executors/server_ping.py)."""
    intents: list[Intent] = []
    chosen: list[tuple[str, str]] = []
    for record in state.records():
        if record.deleting or state.deleted_by_us(record.name):
            continue
        if record.state == PodState.BUSY and not record.failed:
            continue
        if record.state != PodState.RETIRING:
            intents.append(marks.retiring(record.name, ORPHANED))
        chosen.append((record.name, record.retire_reason or ORPHANED))
    if chosen:
        intents.append(Retire(tuple(chosen)))
    return Plan(tuple(intents))


def _reason_to_retire(state: PoolState, record: PodRecord, agent: Agent | None, now: float) -> str | None:
    settings = state.settings
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
            return f"its agent did not register within {format_duration(settings.auto_register_timeout)}"
        return None
    if agent.building:
        return None
    if agent.config_state == DISABLED:
        # GoCD gives a disabled agent no work: its pod is no capacity, and counted as idle it would keep
        # the profile's next jobs from getting a pod (an operator disabled it, or a backend was killed
        # after disable-agents before the pod's retiring mark was written).
        return "its agent is disabled in GoCD"
    if not record.reuse:
        if record.state == PodState.IDLE and record.jobs_run:
            return "its job finished (no job-completion was received) and the profile runs one job per pod"
        if record.state == PodState.IDLE and now - record.state_since > settings.idle_timeout:
            return f"its job never came to it within {format_duration(settings.idle_timeout)} (cancelled?)"
        return None
    if record.state == PodState.IDLE:
        if not record.can_take_more_jobs(now):
            return f"it ran {record.jobs_run} jobs (MaxJobsPerPod)"
        if state.book.is_superseded(record.fingerprint):
            return "its profile changed since it was created"
        if settings.max_pod_lifetime and now - record.created_at >= settings.max_pod_lifetime:
            return f"it is older than max_pod_lifetime ({format_duration(settings.max_pod_lifetime)})"
    return None


def _idle_too_long(state: PoolState, records: list[PodRecord], now: float) -> list[tuple[PodRecord, str]]:
    """Idle pods past their idle timeout, oldest first, keeping MinIdlePods idle pods per fingerprint."""
    by_fingerprint: dict[str, list[PodRecord]] = {}
    for record in records:
        if record.reuse and record.state == PodState.IDLE and state.alive(record):
            by_fingerprint.setdefault(record.fingerprint or "", []).append(record)
    default = state.settings.idle_timeout
    chosen: list[tuple[PodRecord, str]] = []
    for group in by_fingerprint.values():
        idle = sorted(group, key=lambda r: r.state_since)
        knobs = {r.name: r.knobs(now, default) for r in idle}  # a schedule's period in force, if any
        keep = max(k.min_idle_pods for k in knobs.values())
        timeout_of = {name: k.idle_timeout for name, k in knobs.items()}
        expired = [r for r in idle if now - r.state_since > timeout_of[r.name]]
        for record in expired[: max(0, len(idle) - keep)]:
            idle_for = format_duration(round(now - record.state_since))
            chosen.append(
                (record, f"idle {idle_for} (idle timeout {format_duration(timeout_of[record.name])})")
            )
    return chosen
