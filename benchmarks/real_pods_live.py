"""The live half of `python -m benchmarks.real_pods`: agents booted one at a time, and a trace replayed in
real time, on a `Stack` whose pods really run (tests/support/node_stack.py: the real node, or the fake cluster
with the stand-in agent as a process per pod).

What a pod went through is read from the API as clusterloader2's pod start-up measurement reads it
(kubernetes/perf-tests, clusterloader2/pkg/measurement/common/slos/pod_startup_latency.go,
`podStartupLatencyMeasurement.processEvent`): each phase is the time this side first saw it, since the
API's own timestamps have whole seconds only: created (first seen), scheduled (`spec.nodeName` set),
running (`status.phase` Running). It lists the namespace every `POLL_S` instead of watching, so the same
code reads the fake cluster and the real one. Two more phases come from the simulated GoCD server,
on the same clock: create-agent sent (`Job.create_agent_sent_at`) and agent registered (the
registration's time). Waits are the server's own: scheduling to assignment (`Job.wait_s`).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_agent.simulation.gocd_model import Job
from elastic_agent.simulation.stack import Stack
from elastic_agent.traces.measures import percentile
from elastic_agent.traces.workload import TraceJob

POLL_S = 0.1  # how often the pods are listed: a tenth of the shortest phase measured here
TIMEOUT_S = 600.0  # a bound on each run, not an expectation


class RunTimedOut(RuntimeError):
    """What a run waited for did not happen within its bound: the message says what."""


@dataclass
class PodPhases:
    """When this side first saw a pod in each phase (the stack's clock, seconds)."""

    created: float
    scheduled: float | None = None
    running: float | None = None


class PodPhaseWatch:
    """The pods of a stack's namespace, listed every POLL_S in a thread of its own, phases recorded."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self.phases: dict[str, PodPhases] = {}
        self.most_alive = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-phases", daemon=True)

    def __enter__(self) -> PodPhaseWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.see(self._stack.pods())
            self._stop.wait(POLL_S)

    def see(self, pods: Sequence[Mapping[str, Any]]) -> None:
        now = self._stack.clock.now()
        alive = 0
        for pod in pods:
            name = pod["metadata"]["name"]
            phases = self.phases.setdefault(name, PodPhases(created=now))
            if phases.scheduled is None and (pod.get("spec") or {}).get("nodeName"):
                phases.scheduled = now
            if phases.running is None and (pod.get("status") or {}).get("phase") == "Running":
                phases.running = now
            alive += not pod["metadata"].get("deletionTimestamp")
        self.most_alive = max(self.most_alive, alive)


@dataclass
class BootSample:
    """One agent's start, seconds from create-agent sent: pod seen, scheduled, running, agent registered.
    A phase this side polled too late to see apart from the next (or the agent registered before the API
    said Running) is None."""

    pod: str
    pod_created_s: float
    scheduled_s: float | None
    running_s: float | None
    registered_s: float

    @property
    def created_to_registered_s(self) -> float:
        """What the simulated kubelet's boot delay stands for: a pod's creation to its agent's
        registration."""
        return self.registered_s - self.pod_created_s


def _registered_at(stack: Stack) -> dict[str, tuple[str, float]]:
    """Agent id -> (pod, first registration time)."""
    found: dict[str, tuple[str, float]] = {}
    for attempt in stack.gocd.registrations:
        found.setdefault(attempt.agent_id, (attempt.pod_name, attempt.at))
    return found


def _wait(stack: Stack, condition: Callable[[], bool], what: str, within_s: float = TIMEOUT_S) -> None:
    deadline = stack.clock.now() + within_s
    while not condition():
        if stack.clock.now() > deadline:
            raise RunTimedOut(f"{what}: not within {within_s:.0f} s")
        stack.clock.sleep(POLL_S)


def boot_samples(
    stack: Stack, elastic: Mapping[str, str], cluster: Mapping[str, str], count: int, job_s: float
) -> list[BootSample]:
    """`count` jobs one after another, each on a new pod (`elastic` must not reuse), the next scheduled
    once the last one's pod is gone, so that no boot shares the machine with another pod's start or stop."""
    samples: list[BootSample] = []
    with PodPhaseWatch(stack) as watch:
        for number in range(count):
            job = stack.gocd.schedule_job("boot", "stage", f"boot-{number}", elastic, cluster, None, job_s)
            _wait(stack, _completed(job), f"boot sample {number}'s job done")
            _wait(stack, lambda: not stack.pods(), f"boot sample {number}'s pod deleted")
            samples.append(_sample(stack, job, watch))
    return samples


def _completed(job: Job) -> Callable[[], bool]:
    return lambda: job.completed_at is not None


def _sample(stack: Stack, job: Job, watch: PodPhaseWatch) -> BootSample:
    pod, registered = _registered_at(stack)[job.agent_id or ""]
    sent = job.create_agent_sent_at
    assert sent is not None and job.create_agent_sends == 1, "one create-agent per sample"
    phases = watch.phases[pod]

    def since(at: float | None) -> float | None:
        return None if at is None else at - sent

    return BootSample(
        pod, phases.created - sent, since(phases.scheduled), since(phases.running), registered - sent
    )


@dataclass
class LiveResult:
    """A trace replayed on a stack: what GoCD and the cluster saw."""

    policy: str
    jobs: int
    assigned: int
    completed: int
    pods_created: int
    most_alive: int
    wait_mean: float
    wait_p95: float
    wait_max: float
    boots_s: list[float] = field(default_factory=list)  # each pod's creation to its agent's registration
    waits: list[float] = field(default_factory=list)  # sorted
    violations: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def replay(
    stack: Stack,
    trace: Sequence[TraceJob],
    elastic: Mapping[str, str],
    cluster: Mapping[str, str],
    policy: str,
) -> LiveResult:
    """Schedule each job of `trace` at its time (seconds after now, real), as the simulator does
    (virtual_time.py, `Simulation._schedule`), and wait until every job is completed."""
    clock, model = stack.clock, stack.gocd
    origin = clock.now()
    jobs: list[Job] = []
    with PodPhaseWatch(stack) as watch:
        for entry in trace:
            clock.sleep(max(0.0, origin + entry.at - clock.now()))
            job = model.schedule_job(entry.pipeline, "build", "job", elastic, cluster, entry.environment,
                                     entry.duration)  # fmt: skip
            jobs.append(job)
        _wait(stack, lambda: all(job.completed_at is not None for job in jobs), f"{policy}: every job done")
    waits = sorted(job.wait_s for job in jobs if job.wait_s is not None)
    registered = {pod: at for pod, at in _registered_at(stack).values()}
    boots = [registered[pod] - phases.created for pod, phases in watch.phases.items() if pod in registered]
    return LiveResult(
        policy=policy,
        jobs=len(jobs),
        assigned=len(waits),
        completed=sum(1 for job in jobs if job.completed_at is not None),
        pods_created=len(set(watch.phases) | set(registered)),
        most_alive=watch.most_alive,
        wait_mean=statistics.fmean(waits) if waits else math.nan,
        wait_p95=percentile(waits, 0.95),
        wait_max=waits[-1] if waits else math.nan,
        boots_s=sorted(boots),
        waits=waits,
        violations=model.invariant_violations(),
        wall_s=clock.now() - origin,
    )
