"""server-ping's decision about broken pods, and the rule that keeps a held fingerprint from piling up.

Within one ping, every pod that broken.py finds broken is told to the jobs waiting for a pod of its
fingerprint (a console line with Kubernetes' reason and message), marked retiring with that reason
(the ping's retirement then deletes it, in the ordered way every retirement takes), and its fingerprint
is held (holds.py): one `HoldBack` per fingerprint per ping, however many of its pods broke, so that a
burst of pods failing together counts as one failure of the profile. A held fingerprint whose pod
registered since the hold began has recovered. An agent killed for memory under a job is told to that
job's console once (`broken.oom_killed`).

Decisions only (intents.py): the caller holds the pool's lock and commits the plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.kube.port import PodView
from elastic_agent.pool import labels, marks
from elastic_agent.pool.broken import Breakage, diagnose, oom_killed
from elastic_agent.pool.holds import Hold, wait_s
from elastic_agent.pool.index import RecordIndex
from elastic_agent.pool.intents import HoldBack, Intent, KeyAccepted, Mark, Plan, Recovered, Say
from elastic_agent.pool.key_lifetime import key_issued_at
from elastic_agent.pool.records import PodRecord
from elastic_agent.pool.state import PoolState
from profiles.quantities import format_duration


def ping_plan(state: PoolState, now: float) -> Plan:
    """Broken pods told, held back and marked retiring; OOM kills under jobs told."""
    view = state.indexed()
    port = state.port
    intents: list[Intent] = []
    held_now: set[str] = set()
    for record in list(view.by_name.values()):
        pod = port.get(record.name)
        if pod is None or state.deleted_by_us(record.name):
            continue
        intents += _oom(pod, record)
        breakage = diagnose(pod, record, now)
        if breakage is None:
            continue
        fingerprint = record.fingerprint or ""
        if fingerprint not in held_now:
            held_now.add(fingerprint)
            intents.append(HoldBack(fingerprint, record.name, breakage.text()))
        intents.append(marks.retiring(record.name, f"it is broken: {breakage.text()}"))
        text = _told(record.name, breakage, state.book.holds.get(fingerprint), now)
        intents += [Say(text, job) for job in _jobs_waiting_for(state, record, pod)]
    return Plan(tuple(intents))


def registered(state: PoolState, record: PodRecord, now: float) -> tuple[Intent, ...]:
    """The pod's agent registered (it polled for work, or GoCD lists it): the mark, the age of the key
    GoCD accepted (key_lifetime.py), and the end of its fingerprint's row of broken pods, if it has one
    (holds.py: a success resets it)."""
    intents: tuple[Intent, ...] = (marks.registered(record, now),)
    pod = state.port.get(record.name)
    issued = key_issued_at(pod.annotations) if pod is not None else None
    if issued is not None:  # the key's age is counted from its earliest issue: the least it can have been
        age = record.created_at - issued - state.key_lifetime.queue_allowance_s()
        intents += (KeyAccepted(record.name, max(0.0, age)),)
    hold = state.book.holds.get(record.fingerprint)
    if hold is not None:
        said = f"pod {record.name} of a held profile registered ({hold.pod} was broken): held no more"
        intents += (Recovered(hold.fingerprint), Say(said))
    return intents


def _told(pod: str, breakage: Breakage, before: Hold | None, now: float) -> str:
    failures = 1 if before is None else before.failures + 1
    wait = wait_s(failures)
    return (
        f"pod {pod} cannot start: Kubernetes says {breakage.text()}. The pod is deleted, and no more pods "
        f"of this profile are created before {clock_time(now + wait)} ({format_duration(round(wait))}, "
        f"broken pod {failures} in a row); then one is tried, or at once if the profile is changed"
    )


def _jobs_waiting_for(state: PoolState, record: PodRecord, pod: PodView) -> Iterator[JobIdentifier]:
    """The jobs the pod's failure keeps waiting: those waiting for its fingerprint (reuse) and the one
    it was created for, each once."""
    seen: set[int] = set()
    created_for = job_from(pod.annotations.get(labels.ANN_CREATED_FOR))
    waiting = [entry.job for entry in state.book.waiting(record.fingerprint or "")]
    for job in ([created_for] if created_for is not None else []) + waiting:
        if job.job_id not in seen:
            seen.add(job.job_id)
            yield job


def _oom(pod: PodView, record: PodRecord) -> list[Intent]:
    killed = oom_killed(pod, record)
    if killed is None:
        return []  # every ping asks this of every pod: the annotation is read only for a kill
    job = job_from(pod.annotations.get(labels.ANN_CURRENT_JOB))
    if job is None or job.job_id != record.current_job_id:
        return []
    code = f", exit code {killed.exit_code}" if killed.exit_code is not None else ""
    text = (
        f"container {killed.container} of pod {record.name} was killed for lack of memory while running "
        f"this job (Kubernetes says OOMKilled{code}): the elastic profile's MaxMemory (or the pod "
        f"template's memory limit) is too low for this job"
    )
    return [Say(text, job), Mark(record.name, {labels.ANN_OOM_TOLD: killed.told})]


def job_from(annotation: str | None) -> JobIdentifier | None:
    """The job a pod's job annotation names (JSON), or None."""
    if not annotation:
        return None
    try:
        return JobIdentifier.well_formed(json.loads(annotation))
    except ValueError:
        return None


def held_back(state: PoolState, fingerprint: str, view: RecordIndex, now: float) -> str | None:
    """Why no pod of the fingerprint may be created now (for the job's console), or None when one may."""
    if creatable(state, fingerprint, view, now) != 0:
        return None
    hold = state.book.holds.get(fingerprint)
    assert hold is not None  # `creatable` limits only held fingerprints
    if now < hold.next_try_at:
        when = f"its next try is at {clock_time(hold.next_try_at)}"
    else:
        when = "one is being tried"
    return f"waiting: pods of this profile are broken ({hold.reason}); {when}; GoCD will ask again"


def creatable(state: PoolState, fingerprint: str, view: RecordIndex, now: float) -> int | None:
    """How many pods of the fingerprint the hold lets be created now; None: no hold, no limit."""
    if state.book.holds.get(fingerprint) is None:
        return None
    trying = sum(1 for fp in state.in_flight(view) if fp == fingerprint)
    trying += sum(
        1
        for r in view.pending_registration()
        if r.fingerprint == fingerprint and not state.deleted_by_us(r.name)
    )
    return state.book.holds.allowed(fingerprint, now, trying)


def clock_time(epoch: float) -> str:
    """A time of day as GoCD's pages show times to an admin: UTC, to the second."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")
