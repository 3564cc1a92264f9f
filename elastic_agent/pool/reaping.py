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

Each plan says when its decision is next due (`Plan.due`): the nearest time still ahead that it compared
`now` with (an assignment grace's end, an idle pod's expiry, its max_pod_lifetime, the end of the
auto_register_timeout, a ReuseSchedule's next period change). Each time is taken where it is compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from elastic_agent.gocd.server import Agent
from elastic_agent.pool import marks
from elastic_agent.pool.broken_pods import registered
from elastic_agent.pool.intents import Intent, Plan, Release, Retire, Say
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.pool.settled import QuietGroup, Staying, Told
from elastic_agent.pool.state import PoolState
from profiles.quantities import format_duration
from profiles.schedule import held_until

# After a `true` from should-assign-work GoCD may still list the agent as Idle for a moment.
ASSIGNMENT_GRACE_S = 30.0
DISABLED = "Disabled"  # an agent's config_state
ONE_JOB_PER_POD = "the profile runs one job per pod"


def what_gocd_says(state: PoolState, agents: Mapping[str, Agent], now: float, listed_at: int) -> Plan:
    """Registrations and repairs from GoCD's agent list, which was asked for at change mark
    `listed_at` (PoolState.change_mark): a pod changed here since keeps its newer state. A pod of which
    the list said nothing at an earlier ping, with the same record and agent since, is not judged again
    (settled.py)."""
    intents: list[Intent] = []
    due = math.inf
    settled, told = state.settled.told, {}
    for record in state.records():
        if record.deleting:
            continue
        name = record.name
        agent = agents.get(name)
        busy = record.state == PodState.BUSY and not record.failed
        assigned = state.assigned_at(name, record.state_since) if busy else None  # its grace's start
        known = settled.get(name)
        if (
            known is not None
            and known.record is record
            and known.agent == agent
            and known.assigned == assigned
            and known.since <= now
        ):
            told[name] = known
            continue
        quiet = True
        if agent is not None and not record.registered:
            intents += registered(state, record, now)  # a held profile's row of broken pods ends
            quiet = False
        if busy:
            # Due whatever this list says: the next one may show the agent idle (GoCD does for a moment
            # after a `true`), and a lost job-completion is repaired once the grace is over.
            over, ends = _grace(state, record, now)
            due = due if over else min(due, ends)
            quiet = quiet and over
        repair = _repair(state, record, agent, now)
        if not state.changed_since(name, listed_at):
            intents += repair
        if quiet and not repair:
            told[name] = Told(record, agent, assigned, now)
    state.settled.told = told
    return Plan(tuple(intents), due=due)


def _repair(state: PoolState, record: PodRecord, agent: Agent | None, now: float) -> tuple[Intent, ...]:
    if agent is None or record.state == PodState.RETIRING or record.failed:
        return ()
    if agent.building and record.state != PodState.BUSY:
        said = f"pod {record.name} is building according to GoCD: marked busy"
        return marks.busy_with_unknown_job(record.name, now), Say(said)
    if not agent.building and record.state == PodState.BUSY and _grace(state, record, now)[0]:
        said = f"pod {record.name} is idle according to GoCD (a job-completion was lost): marked idle"
        return marks.idle_after_lost_completion(record, now), Release(record.name), Say(said)
    return ()


def _grace(state: PoolState, record: PodRecord, now: float) -> tuple[bool, float]:
    """Whether the grace after the pod's latest `true` is over at `now`, and when it ends."""
    assigned = state.assigned_at(record.name, record.state_since)
    return now - assigned > ASSIGNMENT_GRACE_S, assigned + ASSIGNMENT_GRACE_S


def retirements(state: PoolState, agents: Mapping[str, Agent], now: float) -> Plan:
    """Every pod that must go, marked retiring (busy ones excepted, but for failed pods, whose job died
    with them), then one ordered retirement of them all."""
    intents: list[Intent] = []
    chosen: list[tuple[str, str]] = []
    due = math.inf
    records = [r for r in state.records() if not r.deleting and not state.deleted_by_us(r.name)]
    settings, settled, staying = state.settings, state.settled.staying, {}
    for record in records:
        name, agent = record.name, agents.get(record.name)
        superseded = state.book.is_superseded(record.fingerprint)
        known = settled.get(name)
        if (
            known is not None
            and known.record is record
            and known.agent == agent
            and known.settings is settings
            and known.superseded == superseded
            and known.since <= now < known.until
        ):
            staying[name] = known
            due = min(due, known.due)
            continue
        reason, when = _reason_to_retire(state, record, agent, now)
        due = min(due, when)
        if reason is None:
            until = held_until(when, now, record.schedule is not None)
            staying[name] = Staying(record, agent, settings, superseded, now, until, when)
        if reason is None or (record.state == PodState.BUSY and not record.failed):
            continue
        if record.state != PodState.RETIRING:
            intents.append(marks.retiring(record.name, reason))
        chosen.append((record.name, reason))
    taken = {name for name, _ in chosen}
    idle, when = _idle_too_long(state, [r for r in records if r.name not in taken], now)
    for record, reason in idle:
        intents.append(marks.retiring(record.name, reason))
        chosen.append((record.name, reason))
    state.settled.staying = staying
    if chosen:
        intents.append(Retire(tuple(chosen)))
    return Plan(tuple(intents), due=min(due, when))


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


Reason = tuple[str | None, float]  # why the pod must go (None: it stays), and when that is next due


def _reason_to_retire(state: PoolState, record: PodRecord, agent: Agent | None, now: float) -> Reason:
    settings = state.settings
    if record.state == PodState.RETIRING:
        return record.retire_reason or "it was retiring", math.inf
    if record.failed:
        if record.reason == "Evicted" and record.state == PodState.IDLE:
            return "it was evicted while idle", math.inf
        return f"the pod failed ({record.reason or record.phase})", math.inf
    if agent is None:
        if record.registered:
            return "its agent is no longer registered with GoCD", math.inf
        if now - record.created_at > settings.auto_register_timeout:
            timeout = format_duration(settings.auto_register_timeout)
            return f"its agent did not register within {timeout}", math.inf
        return None, record.created_at + settings.auto_register_timeout
    if agent.building:
        return None, math.inf
    if agent.config_state == DISABLED:
        # GoCD gives a disabled agent no work: its pod is no capacity, and counted as idle it would keep
        # the profile's next jobs from getting a pod (an operator disabled it, or a backend was killed
        # after disable-agents before the pod's retiring mark was written).
        return "its agent is disabled in GoCD", math.inf
    if not record.reuse:
        if record.state == PodState.IDLE and record.jobs_run:
            return f"its job finished (no job-completion was received) and {ONE_JOB_PER_POD}", math.inf
        if record.state != PodState.IDLE:
            return None, math.inf
        if now - record.state_since > settings.idle_timeout:
            timeout = format_duration(settings.idle_timeout)
            return f"its job never came to it within {timeout} (cancelled?)", math.inf
        return None, record.state_since + settings.idle_timeout
    if record.state != PodState.IDLE:
        return None, math.inf
    due = record.knobs_change(now)  # MaxJobsPerPod in force, which a period may raise as well as lower
    if not record.can_take_more_jobs(now):
        return f"it ran {record.jobs_run} jobs (MaxJobsPerPod)", due
    if state.book.is_superseded(record.fingerprint):
        return "its profile changed since it was created", math.inf
    lifetime = settings.max_pod_lifetime
    if lifetime and now - record.created_at >= lifetime:
        return f"it is older than max_pod_lifetime ({format_duration(lifetime)})", math.inf
    return None, min(due, record.created_at + lifetime) if lifetime else due


def _idle_too_long(
    state: PoolState, records: list[PodRecord], now: float
) -> tuple[list[tuple[PodRecord, str]], float]:
    """Idle pods past their idle timeout, oldest first, keeping MinIdlePods idle pods per fingerprint;
    and when that is next due (a pod's expiry, a schedule's period change)."""
    by_fingerprint: dict[str, list[PodRecord]] = {}
    for record in records:
        if record.reuse and record.state == PodState.IDLE and state.alive(record):
            by_fingerprint.setdefault(record.fingerprint or "", []).append(record)
    default = state.settings.idle_timeout
    chosen: list[tuple[PodRecord, str]] = []
    due = math.inf
    settled, quiet = state.settled.groups, {}
    for fingerprint, group in by_fingerprint.items():
        members = tuple(group)
        known = settled.get(fingerprint)
        if (
            known is not None
            and known.records == members
            and known.default_idle_timeout == default
            and known.since <= now < known.until
        ):
            quiet[fingerprint] = known
            due = min(due, known.due)
            continue
        group_due = math.inf
        idle = sorted(group, key=lambda r: r.state_since)
        knobs = {r.name: r.knobs(now, default) for r in idle}  # a schedule's period in force, if any
        keep = max(k.min_idle_pods for k in knobs.values())
        timeout_of = {name: k.idle_timeout for name, k in knobs.items()}
        expired = []
        for record in idle:
            group_due = min(group_due, record.knobs_change(now))
            if now - record.state_since > timeout_of[record.name]:
                expired.append(record)
            else:
                group_due = min(group_due, record.state_since + timeout_of[record.name])
        due = min(due, group_due)
        going = expired[: max(0, len(idle) - keep)]
        for record in going:
            idle_for = format_duration(round(now - record.state_since))
            chosen.append(
                (record, f"idle {idle_for} (idle timeout {format_duration(timeout_of[record.name])})")
            )
        if not going:
            scheduled = any(record.schedule is not None for record in idle)
            until = held_until(group_due, now, scheduled)
            quiet[fingerprint] = QuietGroup(members, default, group_due, now, until)
    state.settled.groups = quiet
    return chosen, due
