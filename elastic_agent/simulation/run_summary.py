"""What a simulated run measured: pods created, waits, idle pod-seconds, pods over time.

`PodTracker` listens to the fake cluster's store (every pod's creation and deletion, on the clock); the
simulated GoCD server knows registrations, assignments and waits. `summarize` joins the two into the
advisor's `PolicyResult`, for the whole run or for one `Part` of it (one profile's jobs and pods, so that
a run of every profile at once gives each profile's figures: pods are told apart by their image, which
the simulated profiles make one per profile). This half of the measuring reads the simulator's objects,
so it lives with them; the result and its statistics are in `traces/measures.py`, which the simulator
and the advisor import and which imports neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import SimulatedGoCD
from elastic_agent.traces.measures import PolicyResult, percentile


class PodTracker:
    """Pod lifetimes and the number of pods over time, from the store's change stream."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.created: dict[str, float] = {}
        self.deleted: dict[str, float] = {}
        self.timeline: list[tuple[float, int]] = []  # (time, pods existing right after)
        self.images: dict[str, str] = {}  # pod name: its first container's image
        self.live = 0
        self.peak = 0

    def on_change(self, kind: str, obj: Obj) -> None:
        meta = obj["metadata"]
        name = meta["name"]
        now = self._clock.now()
        if kind == "ADDED" and name not in self.created:
            self.created[name] = now
            containers = (obj.get("spec") or {}).get("containers") or [{}]
            self.images[name] = containers[0].get("image", "")
            self.live += 1
            self.peak = max(self.peak, self.live)
            self.timeline.append((now, self.live))
        elif (kind == "DELETED" or meta.get("deletionTimestamp")) and name in self.created:
            gone_now = name not in self.deleted
            if gone_now:
                self.deleted[name] = now
                self.live -= 1
                self.timeline.append((now, self.live))


@dataclass(frozen=True)
class Part:
    """Which jobs and pods of a run one result speaks of: jobs by their elastic profile's image, pods by
    their container's image (the same string)."""

    image: str
    jobs: int  # the trace's jobs of this part


def _timeline(created: dict[str, float], deleted: dict[str, float]) -> tuple[list[tuple[float, int]], int]:
    """Pods existing over time, and the peak, from creation and deletion times (deletions first at a tie,
    as the store's stream orders an instant's changes only by the order they happened)."""
    changes = sorted([(at, 1) for at in created.values()] + [(at, -1) for at in deleted.values()])
    timeline, live, peak = [], 0, 0
    for at, step in changes:
        live += step
        peak = max(peak, live)
        timeline.append((at, live))
    return timeline, peak


def summarize(
    policy: str,
    model: SimulatedGoCD,
    tracker: PodTracker,
    *,
    jobs: int,
    end: float,
    resend_s: float,
    wall_s: float,
    events: int,
    simulated_s: float,
    part: Part | None = None,
    count_from: float | None = None,
    origin: float = 0.0,
) -> PolicyResult:
    """The run's figures; with `part`, those of its jobs and pods alone. The server's request counts
    (`should_assign_asked`) and invariant violations stay the whole run's: they are not kept per job.
    With `count_from` (clock seconds), only the jobs scheduled from then on, the pods created from then
    on, the peak from then on and the pod-seconds from then on: each pod's life, boot and busy time
    clipped to [count_from, end]. `origin`: the clock's time at the trace's time 0 (for `waits_at`)."""
    since = -math.inf if count_from is None else count_from
    all_jobs = model.jobs()
    created, deleted = tracker.created, tracker.deleted
    if part is not None:
        all_jobs = [job for job in all_jobs if job.elastic_profile_properties.get("Image") == part.image]
        created = {name: at for name, at in created.items() if tracker.images.get(name) == part.image}
        deleted = {name: at for name, at in deleted.items() if name in created}
        jobs = part.jobs
    job_ids = {job.job_id for job in all_jobs}
    judged = [job for job in all_jobs if job.scheduled_at >= since]
    waits = sorted(job.wait_s for job in judged if job.wait_s is not None)
    registered: dict[str, float] = {}
    for attempt in model.registrations:
        registered.setdefault(attempt.pod_name, attempt.at)
    busy: dict[str, float] = {}
    for assignment in model.assignments:
        if assignment.job_id not in job_ids:
            continue
        finished = assignment.finished_at if assignment.finished_at is not None else end
        held = finished - max(assignment.assigned_at, since) if finished > since else 0.0
        busy[assignment.agent_id] = busy.get(assignment.agent_id, 0.0) + held
    boot_s = idle_s = busy_s = 0.0
    for name, born in created.items():
        counted_from = max(born, since)
        gone = deleted.get(name, end)
        life = max(0.0, gone - counted_from)
        booted = min(life, max(0.0, registered.get(name, gone) - counted_from))
        worked = min(life - booted, busy.get(name, 0.0))
        boot_s += booted
        busy_s += worked
        idle_s += life - booted - worked
    stats = model.stats
    timeline, peak = (tracker.timeline, tracker.peak) if part is None else _timeline(created, deleted)
    if count_from is not None:
        peak = _peak_from(timeline, count_from)
    refusals = [r for r in model.refusals if r.pod_name in created]
    errors = [f"{f.request_name} answered {f.status}: {f.answer_excerpt[:80]}" for f in stats.non_200_answers]
    return PolicyResult(
        policy=policy,
        jobs=jobs,
        assigned=len(waits),
        completed=sum(1 for job in judged if job.completed_at is not None),
        pods_created=sum(1 for born in created.values() if born >= since),
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        wait_p50=percentile(waits, 0.50),
        wait_p95=percentile(waits, 0.95),
        wait_p99=percentile(waits, 0.99),
        wait_max=waits[-1] if waits else 0.0,
        waited_past_resend=sum(1 for wait in waits if wait > resend_s),
        idle_pod_s=idle_s,
        boot_pod_s=boot_s,
        busy_pod_s=busy_s,
        peak_pods=peak,
        pods_left=len(created) - len(deleted),
        simulated_s=simulated_s,
        wall_s=wall_s,
        events=events,
        create_agent_sent=sum(job.create_agent_sends for job in judged),
        should_assign_asked=stats.should_assign_asked,
        registrations_refused=len(refusals),
        violations=model.invariant_violations(),
        plugin_errors=errors + list(stats.protocol_errors),
        waits=waits,
        timeline=timeline,
        waits_at=[(job.scheduled_at - origin, job.wait_s) for job in judged if job.wait_s is not None],
    )


def _peak_from(timeline: list[tuple[float, int]], since: float) -> int:
    """The most pods existing at once from `since` on (those alive at `since` included)."""
    before = [live for at, live in timeline if at < since]
    return max([before[-1] if before else 0] + [live for at, live in timeline if at >= since])
