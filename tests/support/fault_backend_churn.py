"""The backend's side of the fault matrix: one churn on the real kube-apiserver with the backend as its own
process, and one fault in the middle of it. tests/real/test_fault_matrix_backend.py runs the short versions,
benchmarks/fault_matrix_backend.py the long ones and the baseline (the same churn without the fault).

The faults: the backend killed with SIGKILL between disabling an agent and deleting its pod, or between
deleting the pod and deleting the agent (the retirement's order is in pool/applier.py: retiring mark
written, agent disabled, pod deleted, agent deleted); and GoCD's callback endpoint answering 503, or not
answering, for two minutes of scaled time. The exact moment of a kill comes from the simulated GoCD's
callback endpoint (tests/support/doubles/gocd_callback_faults.py), not from a hook in the product: the kill
happens once GoCD has disabled the agents and before the backend hears so, or when the backend asks GoCD to
delete agents whose pods it has just deleted, before GoCD does. A new backend process starts a moment later
(as the sidecar's container is restarted) and must finish the retirement it finds half done.

The world (tests/support/process_world.py): GoCD, the kubelet and every backend process run on one scaled
clock, so pod annotations written by the killed backend mean the same to the next one; GoCD's pings and
job-completions are sent from threads of their own, as GoCD sends them. Times reported are real
seconds; simulated seconds are real seconds times SPEED.

Recovery, as reported: `repair_s`, from the new backend answering /healthz until the interrupted
retirement is finished (its pods and agents gone); for an outage, `first_ok_s`, from the outage's end to
the first callback GoCD answered 200. `backlog_s`, for both, from the fault's end until every job
scheduled before it was assigned (0 when all were assigned during it)."""

from __future__ import annotations

import json
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_callbacks import DELETE_AGENTS, DISABLE_AGENTS
from elastic_agent.simulation.gocd_model import JobState, SimulatedGoCD
from elastic_agent.simulation.gocd_records import Job
from elastic_agent.simulation.stack import Stack
from tests.support.churn_outcome import ChurnOutcome
from tests.support.control_plane import ControlPlane
from tests.support.live_stack import wait_until
from tests.support.process_world import SPEED, ProcessWorld

OUTAGE_S = 120.0 / SPEED  # two minutes of scaled time
RESTART_AFTER_S = 1.0  # real seconds from the kill to the new process (a container restart)


class Fault:
    """inject() after the first bursts; settle() returns when the fault is over (the fault's end)."""

    name = "none"
    hold_s = 0.0  # the baseline's pause, where a fault would be: the churn's timing as with a fault

    def inject(self, world: ProcessWorld) -> None: ...

    def settle(self, world: ProcessWorld, result: CaseResult) -> None:
        time.sleep(self.hold_s)

    def check(self, world: ProcessWorld, result: CaseResult) -> list[str]:
        """What shows that the fault really happened and was repaired: empty is good."""
        return []


def _agent_ids(body: str) -> list[str]:
    return [str(item["agent_id"]) for item in json.loads(body or "[]") if item.get("agent_id")]


class KillDuringRetirement(Fault):
    """`after_disable`: killed once GoCD disabled the agents of pods that are still there, before the
    backend hears the answer. Else killed when the backend asks GoCD to delete the agents of pods it
    has just deleted, before GoCD deletes them."""

    def __init__(self, after_disable: bool, mark_lost: bool = False) -> None:
        self.after_disable = after_disable
        # The retiring mark is written before disable-agents, unless the pod's writes were in backoff:
        # then the next backend finds an idle pod whose agent GoCD has disabled.
        self.mark_lost = mark_lost
        self.name = "kill -9 after disable-agents" if after_disable else "kill -9 before delete-agents"
        if mark_lost:
            self.name += ", retiring mark unwritten"
        self.victims: list[str] = []
        self.killed_sim_at = 0.0

    def inject(self, world: ProcessWorld) -> None:
        def kill(body: str) -> None:
            self.victims = _agent_ids(body)
            self.killed_sim_at = world.clock.now()
            world.kill_backend()

        def pods_still_there(body: str) -> bool:
            ids = _agent_ids(body)
            return bool(ids) and set(ids) <= world.live_pod_names()

        def pods_gone(body: str) -> bool:
            ids = _agent_ids(body)
            return bool(ids) and not set(ids) & world.live_pod_names()

        faults = world.callback_faults
        if self.after_disable:
            faults.when(DISABLE_AGENTS, kill, after=True, condition=pods_still_there, drop=True)
        else:
            faults.when(DELETE_AGENTS, kill, after=False, condition=pods_gone, drop=True)

    def settle(self, world: ProcessWorld, result: CaseResult) -> None:
        wait_until(lambda: self.victims, 60, f"a retirement to reach the moment of {self.name}")
        result.victims = list(self.victims)
        result.victim_pod_left = sorted(set(self.victims) & world.live_pod_names())
        result.victim_agent_left = sorted(a for a in self.victims if world.gocd.agent(a) is not None)
        if self.mark_lost:
            for name in result.victim_pod_left:
                world.set_annotations(name, {labels.ANN_STATE: "idle", labels.ANN_RETIRE_REASON: None})
        time.sleep(RESTART_AFTER_S)
        world.start_backend()
        restarted = time.monotonic()

        def repaired() -> bool:
            return not set(self.victims) & {p["metadata"]["name"] for p in world.pods()} and not any(
                world.gocd.agent(a) for a in self.victims
            )

        try:
            wait_until(repaired, 60, "the new backend to finish the interrupted retirement")
        except AssertionError as error:
            raise AssertionError(f"{error}: {self._state(world)}") from None
        result.repair_s = round(time.monotonic() - restarted, 2)

    def _state(self, world: ProcessWorld) -> str:
        pods = {p["metadata"]["name"]: p["metadata"] for p in world.pods()}
        seen = [(name, pods.get(name, {}).get("annotations"), pods.get(name, {}).get("deletionTimestamp"),
                 world.gocd.agent(name)) for name in self.victims]  # fmt: skip
        return f"victims {seen}; the new backend's log: {world.backends[-1].stderr[-20:]}"

    def check(self, world: ProcessWorld, result: CaseResult) -> list[str]:
        problems = []
        killed = world.backends[0].process.returncode
        if killed != -signal.SIGKILL:
            problems.append(f"the first backend was not killed by SIGKILL: {killed}")
        # At the kill: after disable, the pods are still there; before delete-agents, the agents are.
        if self.after_disable and result.victim_pod_left != sorted(self.victims):
            problems.append(f"the kill came after the pods were deleted: {result.victim_pod_left}")
        if not self.after_disable and result.victim_agent_left != sorted(self.victims):
            problems.append(f"the kill came after the agents were deleted: {result.victim_agent_left}")
        late = [a for a in world.gocd.assignments
                if a.agent_id in self.victims and a.assigned_at >= self.killed_sim_at]  # fmt: skip
        problems += [f"disabled agent {a.agent_id} was given job {a.job_id}" for a in late]
        return problems


class CallbackOutage(Fault):
    """GoCD's callback endpoint answering 503 (`mode` "503"), or accepting calls and never answering
    ("hang"), for `hold_s` real seconds."""

    def __init__(self, mode: str, hold_s: float = OUTAGE_S) -> None:
        self.mode = mode
        self.hold_s = hold_s
        self.name = "callbacks answer 503" if mode == "503" else "callbacks never answered"
        if hold_s != OUTAGE_S:
            self.name += f" for {hold_s * SPEED / 60:g} min"

    def inject(self, world: ProcessWorld) -> None:
        world.callback_faults.outage("503" if self.mode == "503" else "hang")

    def settle(self, world: ProcessWorld, result: CaseResult) -> None:
        time.sleep(self.hold_s)
        world.callback_faults.recover()
        ended = time.monotonic()
        wait_until(lambda: any(c.outcome == "200" for c in world.callback_faults.outcomes(ended)), 60,
                   "a callback to succeed after the outage")  # fmt: skip
        first = next(c for c in world.callback_faults.outcomes(ended) if c.outcome == "200")
        result.first_ok_s = round(first.at - ended, 2)

    def check(self, world: ProcessWorld, result: CaseResult) -> list[str]:
        failed = [c for c in world.callback_faults.outcomes() if c.outcome in ("503", "dropped")]
        return [] if failed else ["no callback failed during the outage"]


@dataclass(frozen=True)
class Churn:
    seed: int = 14
    bursts: int = 3
    jobs_per_burst: int = 6
    gap_s: float = 30.0  # simulated seconds between bursts
    fault_after: int = 1  # bursts scheduled before the fault
    idle_timeout: str = "3m"


@dataclass
class CaseResult(ChurnOutcome):
    repair_s: float | None = None
    first_ok_s: float | None = None
    victims: list[str] = field(default_factory=list)
    victim_pod_left: list[str] = field(default_factory=list)  # at the kill
    victim_agent_left: list[str] = field(default_factory=list)  # at the kill
    callbacks_failed: int = 0
    requests_failed: int = 0  # GoCD's requests to the backend that were not answered 200
    mismatches: list[str] = field(default_factory=list)  # pods without agents, agents without pods


def run_case(plane: ControlPlane, fault: Fault | None, churn: Churn, timeout_s: float = 180.0) -> CaseResult:
    """The churn with `fault` (None: the baseline); raises only when the run cannot go on."""
    fault = fault or Fault()
    started = time.monotonic()
    world = ProcessWorld(plane)
    result = CaseResult(fault.name)
    try:
        world.start_backend()
        world.gocd.start()
        _churn(world, fault, churn, result, timeout_s)
    finally:
        result.warnings = len(world.warnings())
        result.warning_summary = summarise(world.warnings())
        world.stop()
    result.seconds = round(time.monotonic() - started, 1)
    return result


def summarise(lines: list[str], top: int = 5) -> list[str]:
    """The most frequent log lines, without their timestamps, numbers and pod names."""
    shapes = Counter(_shape(line.split(" ", 2)[-1]) for line in lines)
    return [f"{n} x {text}" for text, n in shapes.most_common(top)]


def _shape(text: str) -> str:
    return re.sub(r"\d+", "N", re.sub(r"k8s-ea-[0-9a-f]+", "<pod>", text))[:150]


def _final(gocd: SimulatedGoCD, job: Job) -> Job:
    current = gocd.job(job.job_id)
    while current.rescheduled_as is not None:
        current = gocd.job(current.rescheduled_as)
    return current


def _churn(world: ProcessWorld, fault: Fault, churn: Churn, result: CaseResult, timeout_s: float) -> None:
    gocd, rng = world.gocd, random.Random(churn.seed)
    cluster = world.cluster_profile(idle_timeout=churn.idle_timeout, pending_pods_count="20")
    profiles = {"reuse": Stack.elastic_profile(Reuse="true", MaxJobsPerPod="5"),
                "single": Stack.elastic_profile(MaxMemory="1Gi")}  # fmt: skip
    jobs: list[Job] = []
    fault_start = fault_end = sim_end = 0.0
    for burst in range(churn.bursts):
        for n in range(churn.jobs_per_burst):
            kind = rng.choice(["reuse", "reuse", "single"])
            name, environment = f"{kind}-{burst}-{n}", rng.choice([None, "staging"])
            jobs.append(gocd.schedule_job(f"p-{kind}", "stage", name, profiles[kind], cluster, environment,
                                          rng.uniform(5, 30)))  # fmt: skip
        world.clock.sleep(churn.gap_s)
        if burst + 1 == churn.fault_after:
            fault_start = time.monotonic()
            fault.inject(world)
            fault.settle(world, result)
            fault_end, sim_end = time.monotonic(), world.clock.now()
    wait_until(lambda: all(_final(gocd, j).state is JobState.COMPLETED for j in jobs), timeout_s,
               f"every job of {fault.name} to complete")  # fmt: skip
    finals = [_final(gocd, j) for j in jobs]
    result.jobs = len(jobs)
    result.passed = sum(1 for j in finals if j.result == "Passed")
    result.rescheduled = sum(1 for j in jobs if gocd.job(j.job_id).rescheduled_as is not None)
    before = [_final(gocd, j) for j in jobs if j.scheduled_at < sim_end]
    result.backlog_s = round(max([0.0, *((j.assigned_at or 0.0) - sim_end for j in before)]) / SPEED, 2)
    result.evidence = fault.check(world, result)
    result.mismatches = _settled_mismatches(world)
    result.reused_pod = _probe_reuse(world, profiles["reuse"], cluster)
    wait_until(lambda: not world.pods() and not gocd.agents(), 90,
               f"every pod and agent of {fault.name} to be removed after the idle timeout")  # fmt: skip
    result.pods_created = len(world.created)
    result.health_during = _health_between(world, fault_start, fault_end + 30)
    result.health_after = [f"{m.type}: {m.message}" for m in gocd.health_messages]
    result.violations = gocd.invariant_violations()
    result.registrations_refused = len(gocd.refusals)
    result.callbacks_failed = sum(1 for c in world.callback_faults.outcomes() if c.outcome != "200")
    result.requests_failed = len(gocd.stats.non_200_answers) + len(world.threads.failures)
    result.leftovers = sorted(world.live_pod_names()) + [a.agent_id for a in gocd.agents()]


def mismatches(world: ProcessWorld) -> list[str]:
    """Pods whose agent is gone from GoCD after it registered, and agents whose pod is gone."""
    pods = world.live_pod_names()
    agents = {a.agent_id for a in world.gocd.agents()}
    registered = {r.agent_id for r in world.gocd.registrations if r.status == 200}
    return sorted([f"pod {p} has no agent" for p in pods if p in registered and p not in agents]
                  + [f"agent {a} has no pod" for a in agents if a not in pods])  # fmt: skip


def _settled_mismatches(world: ProcessWorld) -> list[str]:
    """Mismatches still there after two pings (a ping repairs them; one may be under way)."""
    try:
        wait_until(lambda: not mismatches(world), 3 * world.gocd.config.ping_interval_s / SPEED + 5,
                   "pods and agents to match")  # fmt: skip
    except AssertionError:
        return mismatches(world)
    return []


def _health_between(world: ProcessWorld, start: float, end: float) -> list[str]:
    texts = [f"{m.type}: {m.message}" for at, ms in world.health if start <= at <= end for m in ms]
    return list(dict.fromkeys(texts))


def _probe_reuse(world: ProcessWorld, profile: Mapping[str, str], cluster: Mapping[str, str]) -> str | None:
    """A reuse job after recovery: the pod it ran on, if that pod was there before it was scheduled (no
    pod was created for it). When the churn's pods are gone or busy, a first job makes one."""
    gocd = world.gocd

    def run(name: str) -> Job:
        job = gocd.schedule_job("p-reuse", "stage", name, dict(profile), dict(cluster), None, 5.0)
        wait_until(lambda: _final(gocd, job).completed_at, 60, f"the {name} job to complete")
        return _final(gocd, job)

    for name in ("reuse-probe", "reuse-probe-again"):
        before = world.live_pod_names()
        pod = run(name).agent_id
        if pod in before:
            return pod
    return None
