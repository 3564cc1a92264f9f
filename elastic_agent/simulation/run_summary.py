"""What a simulated run measured: pods created, waits, idle pod-seconds, pods over time.

`PodTracker` listens to the fake cluster's store (every pod's creation and deletion, on the clock); the
simulated GoCD server knows registrations, assignments and waits. `summarize` joins the two into the
advisor's `PolicyResult`. This half of the measuring reads the simulator's objects, so it lives with
them; the result and its statistics are the advisor's (`advisor/measures.py`), which the simulator imports
and never the other way round.
"""

from __future__ import annotations

import math

from elastic_agent.advisor.measures import PolicyResult, percentile
from elastic_agent.clock import Clock
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import SimulatedGoCD


class PodTracker:
    """Pod lifetimes and the number of pods over time, from the store's change stream."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.created: dict[str, float] = {}
        self.deleted: dict[str, float] = {}
        self.timeline: list[tuple[float, int]] = []  # (time, pods existing right after)
        self.live = 0
        self.peak = 0

    def on_change(self, kind: str, obj: Obj) -> None:
        meta = obj["metadata"]
        name = meta["name"]
        now = self._clock.now()
        if kind == "ADDED" and name not in self.created:
            self.created[name] = now
            self.live += 1
            self.peak = max(self.peak, self.live)
            self.timeline.append((now, self.live))
        elif (kind == "DELETED" or meta.get("deletionTimestamp")) and name in self.created:
            gone_now = name not in self.deleted
            if gone_now:
                self.deleted[name] = now
                self.live -= 1
                self.timeline.append((now, self.live))


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
    count_from: float | None = None,
) -> PolicyResult:
    """The run's measures; with `count_from` (clock seconds), only the jobs scheduled from then on, the
    pods created from then on, the peak from then on and the pod-seconds from then on: each pod's life,
    boot and busy time clipped to [count_from, end]."""
    since = -math.inf if count_from is None else count_from
    all_jobs = model.jobs()
    if count_from is None:
        waits = sorted(model.wait_times().values())
    else:
        waits = sorted(j.wait_s for j in all_jobs if j.wait_s is not None and j.scheduled_at >= since)
    registered: dict[str, float] = {}
    for attempt in model.registrations:
        registered.setdefault(attempt.pod_name, attempt.at)
    busy: dict[str, float] = {}
    for assignment in model.assignments:
        finished = assignment.finished_at if assignment.finished_at is not None else end
        held = finished - max(assignment.assigned_at, since) if finished > since else 0.0
        busy[assignment.agent_id] = busy.get(assignment.agent_id, 0.0) + held
    boot_s = idle_s = busy_s = 0.0
    for name, born in tracker.created.items():
        created = max(born, since)
        gone = tracker.deleted.get(name, end)
        life = max(0.0, gone - created)
        booted = min(life, max(0.0, registered.get(name, gone) - created))
        worked = min(life - booted, busy.get(name, 0.0))
        boot_s += booted
        busy_s += worked
        idle_s += life - booted - worked
    stats = model.stats
    errors = [f"{f.request_name} answered {f.status}: {f.answer_excerpt[:80]}" for f in stats.non_200_answers]
    return PolicyResult(
        policy=policy,
        jobs=jobs,
        assigned=len(waits),
        completed=sum(1 for job in all_jobs if job.completed_at is not None and job.scheduled_at >= since),
        pods_created=sum(1 for born in tracker.created.values() if born >= since),
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        wait_p50=percentile(waits, 0.50),
        wait_p95=percentile(waits, 0.95),
        wait_p99=percentile(waits, 0.99),
        wait_max=waits[-1] if waits else 0.0,
        waited_past_resend=sum(1 for wait in waits if wait > resend_s),
        idle_pod_s=idle_s,
        boot_pod_s=boot_s,
        busy_pod_s=busy_s,
        peak_pods=tracker.peak if count_from is None else _peak_from(tracker, count_from),
        pods_left=tracker.live,
        simulated_s=simulated_s,
        wall_s=wall_s,
        events=events,
        create_agent_sent=stats.create_agent_sent,
        should_assign_asked=stats.should_assign_asked,
        registrations_refused=len(model.refusals),
        violations=model.invariant_violations(),
        plugin_errors=errors + list(stats.protocol_errors),
        waits=waits,
        timeline=tracker.timeline,
    )


def _peak_from(tracker: PodTracker, since: float) -> int:
    """The most pods existing at once from `since` on (those alive at `since` included)."""
    before = [live for at, live in tracker.timeline if at < since]
    return max([before[-1] if before else 0] + [live for at, live in tracker.timeline if at >= since])
