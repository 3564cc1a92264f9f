"""One churn on the real kube-apiserver with one fault in the middle of it: the driver of the fault matrix.

tests/real/test_fault_matrix.py runs the short versions, benchmarks/fault_matrix.py the long ones and the
baseline (the same churn, same seed, the fault's time spent without a fault). A churn schedules bursts of
jobs of two profiles, one that reuses pods (MaxJobsPerPod 5) and one that takes a pod per job, in two
environments; right after burst `fault_after` (once the backend watches) the fault is injected, held for
`hold_s` real seconds while the bursts go on (the faults are real processes and sockets, so their time
is real, while GoCD, the kubelet and the backend run on a scaled clock), and cleared. Once every job has
completed, a probe checks that reuse resumed (with a reuse pod just idle, a job of that profile runs on a
pod that was there before it was scheduled), then every pod and agent must go after the idle timeout.

The backend's Kubernetes client is the product's (KubeCluster), built as the product builds it, in a
subclass that only records each call's outcome and each 410 Gone: the recovery times come from it.

Recovery, as reported: `first_call_s`, real seconds from the fault's end to the first API call of the
backend that succeeded after it; `first_create_s`, the same for a pod creation; `backlog_s`, from the
fault's end until every job scheduled before it was assigned (0 when all were assigned during it)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_agent.clock import Clock, ScaledClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.port import ClusterError, ClusterPort
from elastic_agent.pool import labels
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.simulation.gocd_model import JobState
from elastic_agent.simulation.gocd_records import HealthMessage, Job
from elastic_agent.simulation.stack import Stack, StackOptions
from profiles.cluster import ClusterProfile
from tests.support.churn_outcome import ChurnOutcome
from tests.support.control_plane import ControlPlane
from tests.support.live_stack import wait_until
from tests.support.real_cluster import RealCluster
from tests.support.tcp_proxy import CuttableProxy

# Threads of the simulators (kubelet, node stand-in, GoCD): their log lines are not the backend's.
SIMULATOR_THREADS = ("simulated-kubelet", "apiserver-node", "simulated-gocd")


class ObservedKubeCluster(KubeCluster):
    """The product's adapter, recording when each call succeeded or failed and each 410 on a re-watch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.successes: list[tuple[float, str]] = []  # (time.monotonic(), verb)
        self.failures: list[tuple[float, str, int | None]] = []  # (time.monotonic(), verb, status)
        self.gone = 0  # watches that ended in 410 Gone

    def _call(self, verb: str, call: Callable[[], Any]) -> Any:
        try:
            answer = super()._call(verb, call)
        except ClusterError as error:
            self.failures.append((time.monotonic(), verb, error.status))
            raise
        self.successes.append((time.monotonic(), verb))
        return answer

    def _watch(self, version: str) -> tuple[str, bool]:
        version, gone = super()._watch(version)
        self.gone += gone
        return version, gone


class ObservingFactory:
    """A `ClusterFactory` building ObservedKubeClusters as wsgi.kubernetes_cluster builds the product's."""

    def __init__(self, watch_timeout: int = 120) -> None:
        self.watch_timeout = watch_timeout
        self.clusters: list[ObservedKubeCluster] = []

    def __call__(self, profile: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
        api_client = connect(url=profile.kubernetes_cluster_url, token=profile.security_token,
                             ca_cert=profile.kubernetes_cluster_ca_cert)  # fmt: skip
        cluster = ObservedKubeCluster(api_client, profile.namespace, identity.selector(), clock,
                                      request_timeout=profile.cluster_request_timeout,
                                      watch_timeout=self.watch_timeout)  # fmt: skip
        self.clusters.append(cluster)
        return cluster

    def successes(self, verb: str | None = None) -> list[float]:
        return sorted(t for c in self.clusters for t, v in c.successes if verb in (None, v))

    def failures(self, verb: str | None = None) -> list[tuple[float, str, int | None]]:
        return sorted(f for c in self.clusters for f in c.failures if verb in (None, f[1]))


class BackendWarnings(logging.Handler):
    """WARNING and above from the backend's threads (not the simulators'), urllib3's included."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        simulator = record.name.startswith("elastic_agent.simulation")
        if record.threadName not in SIMULATOR_THREADS and not simulator:
            self.records.append(record)

    def summary(self, top: int = 4) -> list[str]:
        """The most frequent messages, counted by their logger and format string."""
        counts = Counter(f"{r.name}: {r.msg}" for r in self.records)
        return [f"{n} x {text[:160]}" for text, n in counts.most_common(top)]


@dataclass
class World:
    """What a fault acts on."""

    plane: ControlPlane
    cluster: RealCluster
    stack: Stack
    factory: ObservingFactory
    proxy: CuttableProxy | None


class Fault:
    """A fault: inject(), then during() every quarter second while it is held, then clear(), which
    returns once the fault is over. `check` says what shows that the fault really happened."""

    name = "none"
    needs_proxy = False
    watch_timeout = 120  # the product's default; a case may shorten it (scaled time)

    def inject(self, world: World) -> None: ...

    def during(self, world: World) -> None: ...

    def clear(self, world: World) -> None: ...

    def check(self, world: World) -> list[str]:
        return []


@dataclass(frozen=True)
class Churn:
    seed: int = 14
    bursts: int = 3
    jobs_per_burst: int = 6
    gap_s: float = 30.0  # simulated seconds between bursts
    fault_after: int = 1  # bursts scheduled before the fault
    hold_s: float = 3.0  # real seconds the fault is held (or, in the baseline, waited)
    idle_timeout: str = "3m"
    speed: float = 30.0  # simulated seconds per real second (tests/support/real_cluster.py runs at 30)


@dataclass
class CaseResult(ChurnOutcome):
    first_call_s: float | None = None
    first_create_s: float | None = None
    failed_calls: dict[str, int] = field(default_factory=dict)  # "verb status" -> how many
    failure: str | None = None  # what never happened (a job that never completed, a pod never removed)


class HealthHistory:
    """Every set of health messages the backend sent GoCD (GoCD's add-messages replaces them all)."""

    def __init__(self, stack: Stack) -> None:
        self.seen: list[tuple[float, list[HealthMessage]]] = []
        self._replace = stack.gocd.replace_health_messages
        stack.gocd.replace_health_messages = self._record  # type: ignore[method-assign]

    def _record(self, messages: list[HealthMessage]) -> None:
        self.seen.append((time.monotonic(), list(messages)))
        self._replace(messages)

    def between(self, start: float, end: float) -> list[str]:
        texts = [f"{m.type}: {m.message}" for at, ms in self.seen if start <= at <= end for m in ms]
        return list(dict.fromkeys(texts))


class _Timeline(threading.Thread):
    """The fault on a thread of its own, so that bursts go on being scheduled while it holds."""

    def __init__(self, world: World, fault: Fault, hold_s: float) -> None:
        super().__init__(name="fault-timeline", daemon=True)
        self.world, self.fault, self.hold_s = world, fault, hold_s
        self.started_at = self.ended_at = self.sim_end = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            # The fault hits a backend that is connected: its first watch open (clients are made lazily,
            # at the first create-agent).
            wait_until(lambda: self.world.factory.successes("watch"), 30, "the backend's first watch")
            self.started_at = time.monotonic()
            self.fault.inject(self.world)
            try:
                while time.monotonic() < self.started_at + self.hold_s:
                    self.fault.during(self.world)
                    time.sleep(0.25)
            finally:  # a control plane left broken would fail every later case
                self.fault.clear(self.world)
        except BaseException as error:  # re-raised on the churn's thread by join()
            self.error = error
        self.ended_at, self.sim_end = time.monotonic(), self.world.stack.clock.now()

    def join(self, timeout: float | None = None) -> tuple[float, float, float]:  # type: ignore[override]
        """(fault start, fault end: time.monotonic(); fault end on the stack's clock)."""
        super().join(timeout)
        if self.error is not None:
            raise self.error
        return self.started_at, self.ended_at, self.sim_end


def _final(stack: Stack, job: Job) -> Job:
    """The job's latest run (GoCD reschedules a job whose agent was lost)."""
    current = stack.gocd.job(job.job_id)
    while current.rescheduled_as is not None:
        current = stack.gocd.job(current.rescheduled_as)
    return current


def _schedule(stack: Stack, profile: Mapping[str, str], cluster: Mapping[str, str], name: str,
              duration: float, environment: str | None = None) -> Job:  # fmt: skip
    return stack.gocd.schedule_job(f"p-{name.split('-')[0]}", "stage", name, dict(profile), dict(cluster),
                                   environment, duration)  # fmt: skip


def _idle_pods(stack: Stack, environment: str | None) -> set[str]:
    """Idle pods of the reuse profile for `environment` (an agent serves its own environment only), as
    their annotations in the API server say."""
    found = set()
    for pod in stack.pods():
        meta = pod["metadata"]
        notes = meta.get("annotations") or {}
        if (notes.get(labels.ANN_REUSE) == "true" and notes.get(labels.ANN_STATE) == "idle"
                and notes.get(labels.ANN_ENVIRONMENT, "") == (environment or "")
                and not meta.get("deletionTimestamp")):  # fmt: skip
            found.add(meta["name"])
    return found


def run_case(plane: ControlPlane, fault: Fault | None, churn: Churn, timeout_s: float = 180.0) -> CaseResult:
    """The churn with `fault` (None: the baseline) on `plane`; never raises for what it measures."""
    fault = fault or Fault()
    started = time.monotonic()
    proxy = CuttableProxy(("127.0.0.1", int(plane.url.rsplit(":", 1)[1]))) if fault.needs_proxy else None
    cluster = RealCluster(plane)
    if proxy is not None:
        cluster.url = proxy.url  # the backend's cluster URL; the kubelet stand-in talks to the server
    factory = ObservingFactory(fault.watch_timeout)
    options = StackOptions(boot_delay=10.0, namespace=cluster.namespace, cluster_factory=factory)
    warnings = BackendWarnings()
    logging.getLogger().addHandler(warnings)
    stack = Stack(ScaledClock(churn.speed), options, cluster)
    result = CaseResult(fault.name)
    try:
        history = HealthHistory(stack)
        world = World(plane, cluster, stack, factory, proxy)
        _churn(world, fault, churn, result, history, timeout_s)
    except AssertionError as error:  # a wait that timed out: the result says which
        result.failure = str(error)
    finally:
        stack.stop()
        logging.getLogger().removeHandler(warnings)
        if proxy is not None:
            proxy.close()
    result.warnings = len(warnings.records)
    result.warning_summary = warnings.summary()
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _churn(world: World, fault: Fault, churn: Churn, result: CaseResult, history: HealthHistory,
           timeout_s: float) -> None:  # fmt: skip
    stack, factory = world.stack, world.factory
    rng = random.Random(churn.seed)
    cluster_profile = stack.cluster_profile(idle_timeout=churn.idle_timeout, pending_pods_count="20")
    profiles = {"reuse": stack.elastic_profile(Reuse="true", MaxJobsPerPod="5"),
                "single": stack.elastic_profile(MaxMemory="1Gi")}  # fmt: skip
    jobs: list[Job] = []
    timeline = _Timeline(world, fault, churn.hold_s)
    for burst in range(churn.bursts):
        for n in range(churn.jobs_per_burst):
            kind = rng.choice(["reuse", "reuse", "single"])
            jobs.append(_schedule(stack, profiles[kind], cluster_profile, f"{kind}-{burst}-{n}",
                                  rng.uniform(5, 30), rng.choice([None, "staging"])))  # fmt: skip
        if burst + 1 == churn.fault_after:
            timeline.start()  # the jobs just scheduled need pods while the fault holds
        stack.clock.sleep(churn.gap_s)
    fault_start, fault_end, sim_end = timeline.join()
    before = [j for j in jobs if j.scheduled_at < sim_end]
    wait_until(lambda: all(_final(stack, j).state is JobState.COMPLETED for j in jobs), timeout_s,
               f"every job of {fault.name} to complete")  # fmt: skip
    finals = [_final(stack, j) for j in jobs]
    result.jobs = len(jobs)
    result.passed = sum(1 for j in finals if j.result == "Passed")
    result.rescheduled = sum(1 for j in jobs if stack.gocd.job(j.job_id).rescheduled_as is not None)
    after = [t for t in factory.successes() if t >= fault_end]
    result.first_call_s = round(after[0] - fault_end, 2) if after else None
    creates = [t for t in factory.successes("create") if t >= fault_end]
    result.first_create_s = round(creates[0] - fault_end, 2) if creates else None
    assigned = [_final(stack, j).assigned_at or 0.0 for j in before]
    result.backlog_s = round(max([0.0, *(a - sim_end for a in assigned)]) / churn.speed, 2)
    result.evidence = fault.check(world)
    # A pod of the probe's own (MaxMemory sets it apart from the churn's): a churn pod taking the warm-up
    # as its fifth job would retire at MaxJobsPerPod instead of going idle.
    probe_profile = stack.elastic_profile(Reuse="true", MaxMemory="256Mi")
    result.reused_pod = _probe_reuse(stack, probe_profile, cluster_profile)
    wait_until(lambda: not stack.pods() and not stack.gocd.agents(), 90,
               f"every pod and agent of {fault.name} to be removed")  # fmt: skip
    result.pods_created = len(factory.successes("create"))
    result.failed_calls = dict(Counter(f"{verb} {status}" for _, verb, status in factory.failures()))
    result.health_during = history.between(fault_start, fault_end + 30)
    result.health_after = [f"{m.type}: {m.message}" for m in stack.gocd.health_messages]
    result.violations = stack.gocd.invariant_violations()  # deletions while building included
    result.registrations_refused = len(stack.gocd.refusals)
    result.leftovers = [p["metadata"]["name"] for p in stack.pods()]
    result.leftovers += [f"agent {a.agent_id}" for a in stack.gocd.agents()]


def _probe_reuse(stack: Stack, profile: Mapping[str, str], cluster_profile: Mapping[str, str]) -> str | None:
    """Two reuse jobs after recovery on a profile no churn pod has: a warm-up, which makes a pod, then,
    once that pod is idle (with its whole idle timeout ahead), the probe. The pod the probe ran on if it
    was there before the probe was scheduled, else None."""
    warm = _schedule(stack, profile, cluster_profile, "reuse-warm", 5.0)
    wait_until(lambda: _final(stack, warm).completed_at, 60, "the warm-up job to complete")
    warm_pod = _final(stack, warm).agent_id
    wait_until(lambda: warm_pod in _idle_pods(stack, None), 30, "the warm-up's pod to be idle")
    there = {p["metadata"]["name"] for p in stack.pods()}
    probe = _schedule(stack, profile, cluster_profile, "reuse-probe", 5.0)
    wait_until(lambda: _final(stack, probe).completed_at, 60, "the probe job to complete")
    pod = _final(stack, probe).agent_id
    return pod if pod in there else None
