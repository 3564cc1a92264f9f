"""The discrete-event simulation: a trace replayed through the simulated GoCD server, the fake cluster
with its kubelet, and a plugin (this project's backend in process, or a baseline), in virtual time.

One loop: find the earliest due time among the GoCD model (scheduler ticks, agent polls, job ends,
pings), the kubelet (pods finishing their boot), the trace (the next arrival) and the plugin (a
ReuseSchedule period that may start or end: `Backend.next_period_change`); move the clock there; let the
trace schedule its jobs, wake the plugin when its time has come (`Backend.on_period_change`, then settle),
the kubelet start pods (agents register), the model do its work (which calls the plugin), then let the
plugin settle (the backend's deferred annotation writes) and the kubelet see what the plugin created or
deleted. Nothing sleeps and no thread runs, so a seed fixes everything. The clock starts at
`SimSettings.start` (run_settings.py), the epoch second of the trace's time 0, so cron periods see the
trace's time of day.

This project's backend is reached one way in process, `ProjectPlugin` (plugins.py): the simulated server
(gocd_inprocess.py) hands it each request as a value and its executors answer, without JSON text
(inprocess_requests.py); its calls back into GoCD go to the server's methods (direct_gocd.py). Events
that change nothing (idle polls, idle scheduler ticks, pings the backend shows to be quiet) are not
simulated while nothing waits on an event (`SimSettings.skip_idle_events`);
tests/scenarios/test_fast_path.py and tests/scenarios/test_quiet_pings.py show the pods, waits and
assignments are those of a run that simulates every event. Another plugin (a baseline) gets the requests
as JSON text and every event.
"""

from __future__ import annotations

import concurrent.futures
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_callbacks import ServerApi
from elastic_agent.simulation.gocd_inprocess import InProcessGoCD
from elastic_agent.simulation.gocd_transport import encode
from elastic_agent.simulation.inprocess_cluster import (
    SimulationKubeStore,
)
from elastic_agent.simulation.kubelet import SimulatedKubelet
from elastic_agent.simulation.memory_pods import MemoryPods
from elastic_agent.simulation.plugins import PluginFactory, PluginWorld, ProjectPlugin, SimulatedPlugin
from elastic_agent.simulation.pod_lives import PodLives
from elastic_agent.simulation.run_settings import SimSettings, VirtualClock
from elastic_agent.simulation.run_summary import Part, PodTracker, summarize
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob
from profiles.quantities import format_duration, parse_duration
from profiles.schedule import parse_schedule

if TYPE_CHECKING:
    from elastic_agent.simulation.quiet_pings import QuietPings

_EPSILON_S = 1e-6


@dataclass(frozen=True)
class Policy:
    """One way of running the trace: profile properties for every job, and which plugin answers."""

    name: str
    elastic: Mapping[str, str] = field(default_factory=dict)
    per_profile: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    cluster: Mapping[str, str] = field(default_factory=dict)
    plugin: PluginFactory = ProjectPlugin

    def elastic_properties(self, profile: str) -> dict[str, str]:
        return {
            "Image": f"registry.example.test/agents/{profile}:1",
            "PodSpecType": "properties",
            **self.elastic,
            **self.per_profile.get(profile, {}),
        }

    def max_idle_timeout_s(self) -> float:
        """The longest an idle pod may be kept, a ReuseSchedule's periods included (a trace may end in
        one), so that the run goes on until every pod has retired."""
        profiles = [self.elastic, *self.per_profile.values()]
        texts = [self.cluster.get("idle_timeout"), *(p.get("IdleTimeout") for p in profiles)]
        seconds = [_seconds(t) for t in texts if t]
        for properties in profiles:
            if properties.get("ReuseSchedule"):
                schedule = parse_schedule(properties["ReuseSchedule"])
                seconds += [e.idle_timeout for e in schedule.entries if e.idle_timeout is not None]
        return max(seconds or [600.0])


def cluster_properties(settings: SimSettings, overrides: Mapping[str, str]) -> dict[str, str]:
    return {
        "go_server_url": "https://gocd.example.test/go",
        "kubernetes_cluster_url": "https://kubernetes.example.test",
        "namespace": settings.namespace,
        "pending_pods_count": str(settings.pending_pods_count),
        "auto_register_timeout": "10m",
        "auto_register_key_expiry": format_duration(settings.key_lifetime_s),
        **overrides,
    }


class _LateTransport:
    """The model needs a transport before the plugin (which needs the model's API) exists. This project's
    backend takes the requests as values; another plugin gets them as the JSON text GoCD sends."""

    target: SimulatedPlugin | None = None

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        assert self.target is not None
        return self.target.send(request_name, body)

    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        target = self.target
        if isinstance(target, ProjectPlugin):
            return target.send_value(request_name, body)
        assert target is not None
        return target.send(request_name, encode(body))


class Simulation:
    def __init__(self, trace: Sequence[TraceJob], policy: Policy, settings: SimSettings | None = None):
        self.trace = list(trace)
        self.policy = policy
        self.settings = settings = settings or SimSettings()
        self.clock = VirtualClock(settings.start)
        self.store: SimulationKubeStore | MemoryPods = (
            MemoryPods(self.clock) if settings.engine == "policy" else SimulationKubeStore(clock=self.clock)
        )
        self.tracker = PodTracker(self.clock)
        self.store.add_listener(self.tracker.on_change)
        self._changes = self._changes_seen = 0
        self.store.add_listener(self._count_change)
        transport = _LateTransport()
        self.model = InProcessGoCD(self.clock, transport, settings.gocd_config())
        world = PluginWorld(self.clock, self.store, ServerApi(self.model), settings, model=self.model)
        self.plugin: SimulatedPlugin = policy.plugin(world)
        transport.target = self.plugin
        # What may be skipped is shown to change nothing for this project's backend only.
        self.skipping: ProjectPlugin | None = None
        if settings.skip_idle_events and isinstance(self.plugin, ProjectPlugin):
            self.skipping = self.plugin
        boot_rng = random.Random(settings.seed * 7919 + 17)
        self.kubelet: SimulatedKubelet | PodLives
        if isinstance(self.store, MemoryPods):
            self.kubelet = PodLives(self.store, self.clock, self.model, lambda pod: self._boot(boot_rng, pod))
        else:
            self.kubelet = SimulatedKubelet(
                self.store, self.clock, self.model, boot_delay=lambda pod: self._boot(boot_rng, pod)
            )
        # Pods are told apart by profile through their image, one per profile (run_summary.Part).
        self._starts = {
            policy.elastic_properties(profile)["Image"]: settings.pod_start(profile)
            for profile in {job.profile for job in self.trace}
        }
        self._default_start = settings.pod_start(None)
        self.cluster = cluster_properties(settings, policy.cluster)
        self._profiles: dict[str, dict[str, str]] = {}
        self.events = 0
        self._simulated_s = 0.0
        self._origin = settings.start

    def _boot(self, rng: random.Random, pod: Obj) -> float:
        containers = pod.get("spec", {}).get("containers") or [{}]
        start = self._starts.get(containers[0].get("image", ""), self._default_start)
        low, high = start.bounds_s
        drawn = rng.lognormvariate(math.log(start.median_at(self.clock.now())), start.sigma)
        return min(high, max(low, drawn))

    def _schedule(self, job: TraceJob) -> None:
        properties = self._profiles.get(job.profile)
        if properties is None:
            properties = self._profiles[job.profile] = self.policy.elastic_properties(job.profile)
        self.model.schedule_job(
            job.pipeline,
            job.stage,
            job.job_name,
            properties,
            self.cluster,
            job.environment,
            job.duration,
            pipeline_counter=job.pipeline_counter,
            stage_counter=str(job.stage_counter),
            planned_result=job.result,
        )

    def run(self) -> PolicyResult:
        started = time.perf_counter()
        self._play()
        return self._result(time.perf_counter() - started)

    def run_by_profile(self) -> dict[str, PolicyResult]:
        """One run of every profile of the trace together, its figures split by profile (run_summary.Part):
        for a policy under which profiles share nothing, as one pod per job."""
        return self.run_whole_and_by_profile()[1]

    def run_whole_and_by_profile(self) -> tuple[PolicyResult, dict[str, PolicyResult]]:
        """One run of every profile together: the whole installation's figures (what `run` gives) and
        each profile's, read from the same run."""
        started = time.perf_counter()
        self._play()
        wall_s = time.perf_counter() - started
        counts: dict[str, int] = {}
        for job in self.trace:
            counts[job.profile] = counts.get(job.profile, 0) + 1
        by_profile = {
            profile: self._result(wall_s, Part(self.policy.elastic_properties(profile)["Image"], jobs))
            for profile, jobs in sorted(counts.items())
        }
        return self._result(wall_s), by_profile

    def _play(self) -> None:
        clock, model, kubelet, plugin = self.clock, self.model, self.kubelet, self.plugin
        origin = clock.now()
        pending = self.trace
        index, count = 0, len(pending)
        tail = self.settings.tail_s
        idle_tail = self.policy.max_idle_timeout_s() + 3 * self.settings.ping_s
        hard_end = math.inf
        limit = origin + self._limit()
        skipper = self.skipping
        quiet_pings = self._quiet_pings()
        skipping = False
        while True:
            arrival = origin + pending[index].at if index < count else math.inf
            if skipper is not None:
                # Events that change nothing (gocd_inprocess.py) may be skipped while jobs are still to come,
                # no write waits for its backoff (a drain retries it at the next event, whichever that
                # is) and no graceful deletion waits for the store's next tick (the kubelet's step at the
                # next event ticks it). After the last arrival every event happens again, so the run
                # ends at the same instant.
                quiet = not skipper.pending_writes() and not self.store.deleting()
                skipping = index < count and quiet
                model.allow_skipping(skipping)
            kubelet_due = kubelet.next_due()
            plugin_due = plugin.next_due()
            due = min(
                model.next_due_at(),
                math.inf if kubelet_due is None else kubelet_due,
                arrival,
                math.inf if plugin_due is None else plugin_due,
            )
            if index >= count and math.isinf(hard_end) and model.stats.job_completions_sent >= count:
                # Every job ran: go on until the pods are gone or idle timeouts have surely passed.
                hard_end = clock.now() + (tail if tail is not None else idle_tail)
            if index >= count and not math.isinf(hard_end) and (self.tracker.live == 0 or due > hard_end):
                break
            if due > limit:
                break  # something never finishes (a starving baseline): stop and report what happened
            if (
                skipping
                and quiet_pings is not None
                and due < min(arrival, math.inf if kubelet_due is None else kubelet_due) - _EPSILON_S
                and (plugin_due is None or due < plugin_due - _EPSILON_S)
                and quiet_pings.skip(due)
            ):
                continue
            clock.move_to(due)
            now = clock.now()
            if quiet_pings is not None:
                quiet_pings.step_begins(due)
            eventful = False
            while index < count and origin + pending[index].at <= now + _EPSILON_S:
                self._schedule(pending[index])
                index += 1
                eventful = True
            if plugin_due is not None and plugin_due <= now + _EPSILON_S:
                plugin.wake()
                plugin.settle()
                eventful = True
            eventful |= kubelet_due is not None and kubelet_due <= now + _EPSILON_S
            self._kubelet_step(now)
            model.step()
            plugin.settle()
            self._kubelet_step(now)
            if quiet_pings is not None:
                quiet_pings.step_ended(eventful=eventful)
            self.events += 1
        self._origin = origin
        self._simulated_s = clock.now() - origin

    def _quiet_pings(self) -> QuietPings | None:
        """The skipping of pings that would change nothing (quiet_pings.py), if asked for."""
        skipper = self.skipping
        if skipper is None or not self.settings.quiet_pings:
            return None
        from elastic_agent.simulation.quiet_pings import QuietPings

        return QuietPings(
            self.model,
            skipper.backend.backend,
            skipper.transport.requests,
            lambda: self._changes,
            skipper.pending_writes,
        )

    def _result(self, wall_s: float, part: Part | None = None) -> PolicyResult:
        judged_from = self.settings.judged_from_s
        counted = [
            job
            for job in self.trace
            if job.at >= judged_from
            and (part is None or self.policy.elastic_properties(job.profile)["Image"] == part.image)
        ]
        if part is not None:
            part = Part(part.image, len(counted))
        result = summarize(
            self.policy.name,
            self.model,
            self.tracker,
            jobs=len(counted),
            end=self.clock.now(),
            resend_s=self.settings.resend_s,
            wall_s=wall_s,
            events=self.events,
            simulated_s=self._simulated_s,
            part=part,
            count_from=self._origin + judged_from if judged_from > 0 else None,
            origin=self._origin,
        )
        result.plugin_calls, result.plugin_time_s = self.plugin.timings()
        if isinstance(self.plugin, ProjectPlugin):
            totals = self.plugin.backend.backend.prediction_totals()
            result.predicted_started, result.predicted_hits = totals["started"], totals["hit"]
            result.predicted_other_job, result.predicted_idled_out = totals["other_job"], totals["idled_out"]
            result.predicted_without_key = totals["without_key"]
        return result

    def _kubelet_step(self, now: float) -> None:
        """Step the kubelet only when it has something to hear or do (a step costs a store round)."""
        due = self.kubelet.next_due()
        if self._changes != self._changes_seen or (due is not None and due <= now + _EPSILON_S):
            self._changes_seen = self._changes
            self.kubelet.step()

    def _count_change(self, kind: str, obj: Obj) -> None:
        self._changes += 1

    def _limit(self) -> float:
        last = self.trace[-1].at if self.trace else 0.0
        longest = max((job.duration for job in self.trace), default=0.0)
        return last + longest + 6 * 3600.0


def _seconds(text: str) -> float:
    return parse_duration(text)  # the profiles' own reading of "10m", "90s", "2h"


Run = tuple[Sequence[TraceJob], Policy, SimSettings | None]


def simulate(run: Run) -> PolicyResult:
    trace, policy, settings = run
    return Simulation(trace, policy, settings).run()


def simulate_by_profile(run: Run) -> dict[str, PolicyResult]:
    trace, policy, settings = run
    return Simulation(trace, policy, settings).run_by_profile()


def simulate_all(
    runs: Sequence[Run], workers: int = 1, done: Callable[[PolicyResult], None] | None = None
) -> list[PolicyResult]:
    """Each run in its own simulation, results in the order of `runs`. Simulations share nothing, so
    with `workers` > 1 they run in that many processes (one core each) and give the same results."""
    if workers <= 1 or len(runs) <= 1:
        results = []
        for run in runs:
            results.append(simulate(run))
            if done is not None:
                done(results[-1])
        return results
    # The standard library's process pool: a simulation is CPU-bound Python, so threads would not help.
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(runs))) as pool:
        futures = [pool.submit(simulate, run) for run in runs]
        if done is not None:
            for future in concurrent.futures.as_completed(futures):
                done(future.result())
        return [future.result() for future in futures]
