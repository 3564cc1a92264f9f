"""What the advisor reports of a run: the wait percentiles, pods per job, idle and boot pod-seconds.

`PolicyResult` is a simulated run's outcome and `percentile` the statistic of its waits; the trace
command reports real waits with the same percentile. Neither refers to the simulator's objects, so
this module imports nothing of `elastic_agent.simulation`: the simulator fills a
`PolicyResult` (`simulation/run_summary.py` reads its fake cluster and GoCD server) and the serving path
(`service/trace_command.py`) may import `percentile` without loading the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True)
class Stretch:
    """The waits of a stretch of a run (`PolicyResult.within`)."""

    jobs: int
    wait_mean: float
    wait_p95: float
    wait_max: float


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
    # Pods whose agent GoCD refused (a spent, expired or unknown key): an invariant, always 0.
    registrations_refused: int = 0
    # Predict (elastic_agent/forecast): pods started ahead of a predicted stage; of those, assigned a job
    # of that stage, assigned another job first, gone without a job; and pods a prediction wanted that
    # no banked registration key could start.
    predicted_started: int = 0
    predicted_hits: int = 0
    predicted_other_job: int = 0
    predicted_idled_out: int = 0
    predicted_without_key: int = 0
    violations: list[str] = field(default_factory=list)
    plugin_errors: list[str] = field(default_factory=list)
    waits: list[float] = field(default_factory=list, repr=False)
    timeline: list[tuple[float, int]] = field(default_factory=list, repr=False)
    # Requests and real seconds the plugin spent per request name, when it reports them (this project's
    # backend); "settle" is its deferred work after requests.
    plugin_calls: dict[str, int] = field(default_factory=dict, repr=False)
    plugin_time_s: dict[str, float] = field(default_factory=dict, repr=False)
    # Each assigned job's (scheduled, seconds from the trace's time 0; wait), in the order they came:
    # the figures of one stretch of the trace (`within`).
    waits_at: list[tuple[float, float]] = field(default_factory=list, repr=False)

    @property
    def pods_per_job(self) -> float:
        return self.pods_created / max(1, self.jobs)

    @property
    def idle_pod_s_per_job(self) -> float:
        return self.idle_pod_s / max(1, self.jobs)

    @property
    def boot_pod_s_per_job(self) -> float:
        return self.boot_pod_s / max(1, self.jobs)

    def pod_hours_per_day(self, days: float, boot: bool = False) -> float:
        """Idle pod-hours a day over the `days` the run's pod-seconds cover (`boot`: idle and booting),
        the unit an administrator budgets."""
        return (self.idle_pod_s + (self.boot_pod_s if boot else 0.0)) / 3600.0 / days

    def within(self, start_s: float, end_s: float) -> Stretch:
        """The waits of the jobs scheduled from `start_s` to before `end_s` (seconds from time 0)."""
        waits = sorted(wait for at, wait in self.waits_at if start_s <= at < end_s)
        mean = sum(waits) / len(waits) if waits else 0.0
        return Stretch(len(waits), mean, percentile(waits, 0.95), waits[-1] if waits else 0.0)

    def numbers(self) -> dict[str, Any]:
        """Everything but the long series and the per-request timings, for JSON and tests."""
        skip = {"waits", "timeline", "plugin_calls", "plugin_time_s", "waits_at"}
        values = {key: value for key, value in vars(self).items() if key not in skip}
        values |= {
            "pods_per_job": self.pods_per_job,
            "idle_pod_s_per_job": self.idle_pod_s_per_job,
            "boot_pod_s_per_job": self.boot_pod_s_per_job,
        }
        return values
