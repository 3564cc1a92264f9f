"""The decisions of the three requests in an agent's life: create-agent, should-assign-work and
job-completion (the reuse rules of docs/architecture.md, "Reuse, precisely").

Each function reads the pool's state, with the pool's lock held by the caller, and returns what to do
(`intents.Plan`); it changes nothing. `ClusterPool` commits the plan under the same lock and carries
out the rest after it.
"""

from __future__ import annotations

from elastic_agent.clock import Clock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import marks
from elastic_agent.pool.broken_pods import held_back, registered
from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.intents import (
    NOTHING,
    Assign,
    Create,
    Intent,
    Mark,
    Plan,
    Release,
    Reserve,
    Retire,
    Say,
    Supersede,
    Wait,
)
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.key_lifetime import issued_at
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.pool.state import PoolState
from profiles.quantities import format_duration

MAKING_ROOM = "making room under max_pods for another profile's waiting job"
WAITING_FOR_THE_LIST = (
    "waiting: the pods of namespace {namespace} are still being listed, and no pod is created before they "
    "are (one of them may be free); GoCD will ask again"
)


def create_agent(state: PoolState, job: JobIdentifier, spec: JobSpec, key: str, now: float) -> Plan:
    """Join the job to the waiting jobs of its fingerprint and create a pod only while those outnumber
    the fingerprint's booting and idle pods (reuse), or exactly one pod per job id (no reuse); within
    pending_pods_count and max_pods, where an idle pod of another fingerprint gives way; none while the
    fingerprint is held for broken pods, but its one try (broken_pods.creatable)."""
    view = state.indexed()
    running = next((r for r in view.running(job.job_id) if state.alive(r)), None)
    if running is not None:
        return Plan(message=f"the job already runs on pod {running.name}")
    intents: list[Intent] = []
    if spec.reuse:
        intents.append(Wait(job, spec, key))
        waiting = state.book.waiting_count(spec.fingerprint)
        waiting += 0 if state.book.is_waiting(spec.fingerprint, job.job_id) else 1
        ready = [r for r in view.ready(spec.fingerprint) if state.alive(r)]  # asked for: not superseded
        supply = len(ready) + sum(1 for fp in state.in_flight(view) if fp == spec.fingerprint)
        if waiting <= supply:
            idle = sum(1 for r in ready if r.state == PodState.IDLE)
            booting = supply - idle
            text = (
                f"no new pod needed: {waiting} job{'s' if waiting != 1 else ''} waiting, {idle} idle and "
                f"{booting} booting pod{'s' if booting != 1 else ''} of this profile"
            )
            return Plan(tuple(intents), text)
    else:
        mine = next((r for r in view.created_for(job.job_id) if state.alive(r)), None)
        if mine is not None:
            return Plan(message=f"pod {mine.name} was already created for this job")
        if state.is_creating(job.job_id):
            return Plan(message="a pod for this job is being created")
    held = held_back(state, spec.fingerprint, view, now)
    if held is not None:  # its pods are broken: no pile-up (holds.py)
        return Plan(tuple(intents), held)
    settings = state.settings
    pending = state.pending(view)
    if pending >= settings.pending_pods_count:
        text = (
            f"waiting: {pending} pods have not registered yet, the limit (pending_pods_count) is "
            f"{settings.pending_pods_count}; GoCD will ask again"
        )
        return Plan(tuple(intents), text)
    if state.room(view) == 0:  # max_pods: the pending limit was checked above
        victim = _make_room_for(spec, state, view)
        if victim is None:
            text = (
                f"waiting: all {settings.max_pods} pods allowed by max_pods are in use; GoCD will ask again"
            )
            return Plan(tuple(intents), text)
        intents += [marks.retiring(victim.name, MAKING_ROOM), Retire(((victim.name, MAKING_ROOM),))]
    if spec.reuse:
        said = f"created pod {{pod}}: {_count(waiting, 'job')} waiting, {_count(supply + 1, 'pod')} booting"
    else:
        said = f"created pod {{pod}} in namespace {settings.namespace} for this job"
    intents += [
        Reserve(job.job_id, spec.fingerprint),
        Create(job.job_id, job, spec, key, said, for_request=True, key_since=issued_at(state, now)),
    ]
    return Plan(tuple(intents))


def wait_for_the_list(job: JobIdentifier, spec: JobSpec, key: str, namespace: str) -> Plan:
    """create-agent before the pool's first pod list: nothing is created against a cache that may lack
    the free pods (client-go's informers gate work on `HasSynced` the same way). A reuse job waits,
    with its key, and gets a pod once the list has arrived if none of those it lists can take it;
    without reuse the job's pod comes at GoCD's next create-agent."""
    text = WAITING_FOR_THE_LIST.format(namespace=namespace)
    return Plan((Wait(job, spec, key),) if spec.reuse else (), text)


def _make_room_for(spec: JobSpec, state: PoolState, view: RecordIndex) -> PodRecord | None:
    """At max_pods, the longest-idle pod of another fingerprint gives way, so a cap never starves a
    profile."""
    others = [
        r for r in state.alive_records(view) if r.state == PodState.IDLE and r.fingerprint != spec.fingerprint
    ]
    return min(others, key=lambda r: r.state_since) if others else None


def should_assign_work(
    state: PoolState, agent_id: str, job: JobIdentifier, spec: JobSpec, clock: Clock
) -> tuple[bool, Plan]:
    """`true` when the pod may take this job; the pod is busy from that instant. A `false` changes
    nothing, except that a pod that asks has evidently registered. (The clock, not the time: most
    answers are `false` and need none, and this is the plugin's most frequent request.)"""
    record = state.record(agent_id)
    if record is None or not state.alive(record):
        return False, NOTHING
    # A pod that asks has registered; for a held profile that ends its row of broken pods (holds.py).
    registration = NOTHING if record.registered else Plan(registered(state, record, clock.now()))
    if record.state not in (PodState.BOOTING, PodState.IDLE):
        return False, registration
    if record.reuse and spec.reuse:
        fits = (
            record.fingerprint == spec.fingerprint
            and record.can_take_more_jobs(clock.now())
            and not state.book.is_superseded(record.fingerprint)
        )
    else:  # one pod per job: the pod takes only the job it was created for, once
        fits = not record.reuse and record.created_for_job_id == job.job_id and record.jobs_run == 0
    if not fits or state.given_to_another_pod(job.job_id, agent_id):
        return False, registration
    now = clock.now()
    if record.jobs_run:
        text = f"reused pod {agent_id}, its {ordinal(record.jobs_run + 1)} job"
    else:
        text = f"assigned to pod {agent_id}, its first job"
    assignment = (
        Assign(agent_id, job.job_id, spec.fingerprint),
        marks.busy(agent_id, job, now),
        Say(text, job),
    )
    return True, registration + Plan(assignment)


def job_completed(
    state: PoolState, agent_id: str, job: JobIdentifier, spec: JobSpec | None, now: float
) -> Plan:
    """The pod is idle again, or retires (one job per pod, MaxJobsPerPod, max_pod_lifetime, its profile
    was edited). A completion of a job the pod is not running (late, duplicate, or already repaired
    from GoCD's agent list) changes nothing. Without a `spec` (the job's remote pod template is not
    fetched yet) the pod's own annotations decide, and it cannot be found stale."""
    record = state.record(agent_id)
    if record is None:
        return Plan(message=f"agent {agent_id} is not a pod of this plugin in this cluster; nothing to do")
    if not _runs(record, job.job_id):
        return Plan(
            message=f"pod {agent_id} is not running job {job.label} ({record.state}); nothing changed"
        )
    jobs_run = record.jobs_run + 1
    intents: list[Intent] = [Release(agent_id)]
    if record.state == PodState.RETIRING:
        reason = record.retire_reason or "it was retiring"
    else:
        after = _retire_after_job(record, spec, jobs_run, now, state)
        if after is None:
            intents.append(marks.idle_after_job(record, job, jobs_run, spec, now))
            return Plan(tuple(intents), f"pod {agent_id} is idle after {_count(jobs_run, 'job')}")
        reason = after
        stale = spec is not None and spec.reuse and record.fingerprint != spec.fingerprint
        if record.reuse and record.fingerprint and stale:
            intents.append(Supersede(record.fingerprint))
    intents += [
        Mark(agent_id, marks.job_done(record, job, jobs_run)),
        marks.retiring(agent_id, reason),
        Retire(((agent_id, reason),), agents_idle=True),
    ]
    return Plan(tuple(intents), f"retired pod {agent_id}: {reason}")


def _runs(record: PodRecord, job_id: int) -> bool:
    """Whether the pod is running this job, as far as its state says."""
    if record.current_job_id is not None:
        return record.current_job_id == job_id and record.state in (PodState.BUSY, PodState.RETIRING)
    if record.state == PodState.BUSY:
        return True  # marked busy from GoCD's agent list: the job is not known, this is it
    # A restart lost the `true` before it reached the pod: a one-job pod's own job still ran there.
    return (
        not record.reuse
        and record.created_for_job_id == job_id
        and record.jobs_run == 0
        and record.state != PodState.RETIRING
    )


def _retire_after_job(
    record: PodRecord, spec: JobSpec | None, jobs_run: int, now: float, state: PoolState
) -> str | None:
    if not record.reuse or (spec is not None and not spec.reuse):
        return "its job finished and the profile runs one job per pod"
    if spec is not None and record.fingerprint != spec.fingerprint:
        return "its profile changed since it was created"
    if spec is not None:
        max_jobs = spec.knobs(now).max_jobs_per_pod
    else:
        max_jobs = record.knobs(now, state.settings.idle_timeout).max_jobs_per_pod
    if max_jobs and jobs_run >= max_jobs:
        return f"it ran {jobs_run} jobs (MaxJobsPerPod)"
    lifetime = state.settings.max_pod_lifetime
    if lifetime and now - record.created_at >= lifetime:
        return f"it is older than max_pod_lifetime ({format_duration(lifetime)})"
    return None


def ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
