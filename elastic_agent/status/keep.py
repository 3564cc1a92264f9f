"""Why a pod is kept, or why it goes: the agent status report's sentence of what only this plugin knows.

The official plugin deletes a pod after its job; here a pod may stay for further jobs, and an admin
looking at one wants to know how long and what ends it. The sentence follows the rules that decide it,
read from the same record and settings: job-completion's (pool/decisions.py `_retire_after_job`) for a
busy pod, server-ping's (pool/reaping.py `_reason_to_retire`, `_idle_too_long`) for the others. What
GoCD's agent list adds at a ping (an agent disabled, or gone) is not known here and not said.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.pool.broken_pods import clock_time
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.status.words import counted
from profiles.cluster import ClusterProfile
from profiles.quantities import format_duration
from profiles.schedule import Knobs


@dataclass(frozen=True)
class Keeping:
    verdict: str  # "kept" or "goes"
    why: str  # one or two sentences


def _until(at: float) -> str:
    return f"the first server ping after {clock_time(at)}"


def _after_its_job(record: PodRecord, knobs: Knobs, settings: ClusterProfile, now: float) -> str | None:
    """What job-completion will decide for a busy pod of a reusable profile, as far as the pod tells."""
    if knobs.max_jobs_per_pod and record.jobs_run + 1 >= knobs.max_jobs_per_pod:
        will = counted(record.jobs_run + 1, "job")
        return f"it will have run {will} (MaxJobsPerPod {knobs.max_jobs_per_pod})"
    lifetime = settings.max_pod_lifetime
    if lifetime and now - record.created_at >= lifetime:
        return f"it is older than max_pod_lifetime ({format_duration(lifetime)})"
    return None


def keeping(record: PodRecord, settings: ClusterProfile, now: float) -> Keeping:
    if record.deleting:
        return Keeping("goes", "It is being deleted.")
    if record.failed:
        return Keeping("goes", f"The pod failed ({record.reason or record.phase}): the next server ping "
                               "removes it and its agent.")  # fmt: skip
    if record.state == PodState.RETIRING:
        why = record.retire_reason or "no reason was recorded"
        return Keeping("goes", f"Retiring: {why}. It takes no more jobs; once its agent is not building, "
                               "the agent is disabled, the pod deleted, then the agent.")  # fmt: skip
    knobs = record.knobs(now, settings.idle_timeout)
    if record.state == PodState.BOOTING:
        deadline = record.created_at + settings.auto_register_timeout
        return Keeping("kept", f"Its agent is starting: the pod goes at {_until(deadline)} if the agent "
                               f"has not registered by then (auto_register_timeout "
                               f"{format_duration(settings.auto_register_timeout)}).")  # fmt: skip
    if record.state == PodState.BUSY:
        if not record.reuse:
            return Keeping("kept", "Kept while it runs its job; then it goes: its profile runs one job "
                                   "per pod (Reuse=false).")  # fmt: skip
        after = _after_its_job(record, knobs, settings, now)
        then = f"it retires: {after}" if after else (
            f"it waits for the next job of its profile, at most {format_duration(knobs.idle_timeout)} "
            "(IdleTimeout)")  # fmt: skip
        return Keeping("kept", f"Kept while it runs its job; then {then}.")
    return _idle(record, knobs, settings, now)


def _idle(record: PodRecord, knobs: Knobs, settings: ClusterProfile, now: float) -> Keeping:
    if not record.reuse:
        if record.jobs_run:
            return Keeping("goes", "Its job is done and its profile runs one job per pod: the next server "
                                   "ping removes it.")  # fmt: skip
        deadline = record.state_since + settings.idle_timeout
        return Keeping("kept", f"Waiting for the job it was started for; it goes at {_until(deadline)} if "
                               "that job never comes to it (cancelled).")  # fmt: skip
    if knobs.max_jobs_per_pod and record.jobs_run >= knobs.max_jobs_per_pod:
        ran = counted(record.jobs_run, "job")
        return Keeping("goes", f"It ran {ran} (MaxJobsPerPod {knobs.max_jobs_per_pod}): "
                               "the next server ping removes it.")  # fmt: skip
    lifetime = settings.max_pod_lifetime
    if lifetime and now - record.created_at >= lifetime:
        return Keeping("goes", f"It is older than max_pod_lifetime ({format_duration(lifetime)}): the "
                               "next server ping removes it.")  # fmt: skip
    deadline = record.state_since + knobs.idle_timeout
    warm = f", unless MinIdlePods ({knobs.min_idle_pods}) keeps it" if knobs.min_idle_pods else ""
    return Keeping("kept", f"Kept for the next job of its profile: it goes at {_until(deadline)} "
                           f"(IdleTimeout {format_duration(knobs.idle_timeout)}) if no job comes first"
                           f"{warm}.")  # fmt: skip
