"""What a simulated run measured: pods created, waits, idle pod-seconds, pods over time.

`PodTracker` listens to the fake cluster's store (every pod's creation and deletion, on the clock); the
simulated GoCD server knows registrations, assignments and waits. `summarize` joins the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class PolicyResult:
    policy: str
    jobs: int
    assigned: int
    completed: int
    pods_created: int
    wait_mean: float
    wait_p50: float
    wait_p95: float
    wait_p99: float
    wait_max: float
    waited_past_resend: int
    idle_pod_s: float
    boot_pod_s: float
    busy_pod_s: float
    peak_pods: int
    pods_left: int
    simulated_s: float
    wall_s: float
    events: int
    create_agent_sent: int
    should_assign_asked: int
    violations: list[str] = field(default_factory=list)
    plugin_errors: list[str] = field(default_factory=list)
    waits: list[float] = field(default_factory=list, repr=False)
    timeline: list[tuple[float, int]] = field(default_factory=list, repr=False)
    # Requests and real seconds the plugin spent per request name, when it reports them (this project's
    # backend); "settle" is its deferred work after requests.
    plugin_calls: dict[str, int] = field(default_factory=dict, repr=False)
    plugin_time_s: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def pods_per_job(self) -> float:
        return self.pods_created / max(1, self.jobs)

    @property
    def idle_pod_s_per_job(self) -> float:
        return self.idle_pod_s / max(1, self.jobs)

    @property
    def boot_pod_s_per_job(self) -> float:
        return self.boot_pod_s / max(1, self.jobs)

    def numbers(self) -> dict[str, Any]:
        """Everything but the long series and the per-request timings, for JSON and tests."""
        skip = {"waits", "timeline", "plugin_calls", "plugin_time_s"}
        values = {key: value for key, value in vars(self).items() if key not in skip}
        values |= {
            "pods_per_job": self.pods_per_job,
            "idle_pod_s_per_job": self.idle_pod_s_per_job,
            "boot_pod_s_per_job": self.boot_pod_s_per_job,
        }
        return values


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
) -> PolicyResult:
    waits = sorted(model.wait_times().values())
    all_jobs = model.jobs()
    registered: dict[str, float] = {}
    for attempt in model.registrations:
        registered.setdefault(attempt.pod_name, attempt.at)
    busy: dict[str, float] = {}
    for assignment in model.assignments:
        finished = assignment.finished_at if assignment.finished_at is not None else end
        busy[assignment.agent_id] = busy.get(assignment.agent_id, 0.0) + finished - assignment.assigned_at
    boot_s = idle_s = busy_s = 0.0
    for name, created in tracker.created.items():
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
        completed=sum(1 for job in all_jobs if job.completed_at is not None),
        pods_created=len(tracker.created),
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        wait_p50=percentile(waits, 0.50),
        wait_p95=percentile(waits, 0.95),
        wait_p99=percentile(waits, 0.99),
        wait_max=waits[-1] if waits else 0.0,
        waited_past_resend=sum(1 for wait in waits if wait > resend_s),
        idle_pod_s=idle_s,
        boot_pod_s=boot_s,
        busy_pod_s=busy_s,
        peak_pods=tracker.peak,
        pods_left=tracker.live,
        simulated_s=simulated_s,
        wall_s=wall_s,
        events=events,
        create_agent_sent=stats.create_agent_sent,
        should_assign_asked=stats.should_assign_asked,
        violations=model.invariant_violations(),
        plugin_errors=errors + list(stats.protocol_errors),
        waits=waits,
        timeline=tracker.timeline,
    )
