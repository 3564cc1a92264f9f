"""The settings of one simulated run and its clock: how pods boot (alike for every profile, or each
profile's own `PodStart`, as the advisor calibrates them from a trace's waits), how GoCD's server and
agents are tuned (the server's two settings that bound reuse among them), what is skipped and what is
counted; and the virtual clock every part of the run reads, which moves only when the simulation's
loop moves it (virtual_time.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from elastic_agent.clock import ManualClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from profiles.quantities import format_duration

START = 1_700_000_000.0


class VirtualClock(ManualClock):
    """ManualClock for one thread: no lock, and `sleep` does not move time (nothing else could run
    meanwhile, so sleeping would only skip over due events)."""

    def __init__(self, start: float = START) -> None:
        super().__init__(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def move_to(self, at: float) -> None:
        if at > self._now:
            self._now = at

    def sleep(self, seconds: float) -> None:
        pass


@dataclass(frozen=True)
class PodStart:
    """How long a profile's pods take from creation to a registered agent: lognormal around `median_s`
    with `sigma`, clipped to `bounds_s`; with `by_hour`, the median of pods created in each hour of the
    day in `timezone` (24 values), as a node autoscaler or a busy registry makes some hours slower."""

    median_s: float
    sigma: float
    bounds_s: tuple[float, float]
    by_hour: tuple[float, ...] = ()
    timezone: str = "UTC"

    def median_at(self, epoch_s: float) -> float:
        if not self.by_hour:
            return self.median_s
        return self.by_hour[datetime.fromtimestamp(epoch_s, _zone(self.timezone)).hour]


@functools.lru_cache(maxsize=8)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


Engine = Literal["full", "policy"]


@dataclass(frozen=True)
class SimSettings:
    seed: int = 1
    boot_median_s: float = 25.0  # pod boot (schedule, pull, JVM, register): lognormal around this
    boot_sigma: float = 0.3
    boot_bounds_s: tuple[float, float] = (5.0, 180.0)
    # Profiles whose pods start otherwise (the advisor's calibration): (profile, its PodStart) pairs.
    pod_starts: tuple[tuple[str, PodStart], ...] = ()
    # An idle agent's get-work back-off: GoCD's agent.properties (GoCDConfig's get_work_* fields).
    get_work_delay_s: float = 1.0
    get_work_multiplier: float = 1.5
    get_work_interval_s: float = 10.0
    get_work_waits_first: bool = False  # True: GoCD 23.1.0 to 25.3.0's agents (GoCDConfig's)
    resend_s: float = 120.0  # GoCD's jobStarvationTimeout: create-agent re-sent to a waiting job
    ping_s: float = 60.0
    # The GoCD server's two settings that bound reuse (docs/install.md, "A GoCD server tuned for reuse"):
    # its assignment tick (cruise.build.assignment.service.interval) and how long its registration keys
    # live (gocd.ephemeral.auto.register.key.expiry.millis); the simulated cluster profile's
    # auto_register_key_expiry follows the second, as the guide asks of an administrator.
    scheduler_s: float = 5.0
    key_lifetime_s: float = 30 * 60.0
    namespace: str = "ci"
    pending_pods_count: int = 100
    console: bool = False  # write decision lines to job consoles (costs time, changes no measure)
    tail_s: float | None = None  # after the last job: run this long (None: until pods are gone or 2h)
    start: float = START  # epoch seconds at which the trace's time 0 lies (cron schedules read the clock)
    # Skip the events that change nothing (gocd_inprocess.py): the same results with less work; only for
    # this project's backend (another plugin gets every event). False: the reference the tests compare with.
    skip_idle_events: bool = True
    quiet_pings: bool = True  # with skip_idle_events: skip the pings that change nothing (quiet_pings.py)
    # Seconds from the trace's time 0 before which nothing is counted: the jobs arriving earlier and the
    # pod-seconds spent earlier are simulated but not measured (advisor/holdout.py: judged days only).
    judged_from_s: float = 0.0
    # "full": the fake API server's store and the simulated kubelet, which also model faults; "policy":
    # the pods kept in memory with a kubelet that only boots them (memory_pods.py, pod_lives.py), for the
    # advisor. A seed gives the same run under both (tests/scenarios/test_engines_agree.py).
    engine: Engine = "full"

    def pod_start(self, profile: str | None) -> PodStart:
        """How `profile`'s pods start: its own PodStart, else the boot_* fields'."""
        for name, start in self.pod_starts:
            if name == profile:
                return start
        return PodStart(self.boot_median_s, self.boot_sigma, self.boot_bounds_s)

    def polling(self) -> str:
        """How idle agents ask for work, in words for reports."""
        first = f"at once after a job, then after {self.get_work_delay_s:g} s"
        if self.get_work_waits_first:
            first = f"{self.get_work_delay_s:g} s after a job (agents before GoCD 25.4.0)"
        return (
            f"idle agents ask for work {first}, "
            f"{self.get_work_multiplier:g}x longer each time up to {self.get_work_interval_s:g} s"
        )

    def gocd_config(self) -> GoCDConfig:
        return GoCDConfig(
            scheduler_interval_s=self.scheduler_s,
            job_starvation_timeout_s=self.resend_s,
            get_work_delay_s=self.get_work_delay_s,
            get_work_multiplier=self.get_work_multiplier,
            get_work_interval_s=self.get_work_interval_s,
            get_work_waits_first=self.get_work_waits_first,
            ping_interval_s=self.ping_s,
            key_ttl_s=self.key_lifetime_s,
            seed=self.seed,
        )

    def server(self) -> str:
        """The simulated GoCD server's settings, in words for reports."""
        return (
            f"assignment tick {format_duration(self.scheduler_s)}, registration keys valid "
            f"{format_duration(self.key_lifetime_s)}"
        )
