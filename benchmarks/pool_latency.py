"""In-process latency of should-assign-work with many pods: the pool's answer alone, no HTTP. Also the
time create-agent holds the pool's lock when no pod is needed (should-assign-work waits for that lock),
and a server-ping's work for the pool when nothing changed (GoCD lists every agent as the pool knows it).

    python -m benchmarks.pool_latency [--pods 5000] [--calls 20000] [--pings 200]

GoCD asks should-assign-work inside its server-wide assignment lock, so the pool must answer from memory
in well under a millisecond whatever the number of pods.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from elastic_agent.clock import SystemClock
from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.gocd.server import ServerInfo
from elastic_agent.kube.outage import OutageTracker
from elastic_agent.kube.port import ClusterError, PodView
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.simulation.inprocess import DeferredWork, DeferredWriter, SyncNarrator
from profiles.cluster import ClusterProfile


class StaticCluster:
    """A ClusterPort whose pods are given up front; writes succeed and change nothing (in-process
    benchmark of the decision path only)."""

    namespace = "bench"

    def __init__(self, pods: list[PodView]) -> None:
        self._pods = {pod.name: pod for pod in pods}
        self.outage = OutageTracker("bench", SystemClock())

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wait_synced(self, timeout: float) -> bool:
        return True

    def on_synced(self, callback: Callable[[], None]) -> None:
        callback()

    def sync_problem(self) -> ClusterError | None:
        return None

    def pods(self) -> list[PodView]:
        return list(self._pods.values())

    def get(self, name: str) -> PodView | None:
        return self._pods.get(name)

    def create_pod(self, manifest: Mapping[str, Any]) -> PodView:
        raise ClusterError("not in this benchmark")

    def patch_pod_metadata(self, name: str, **_: Any) -> PodView:
        return self._pods[name]

    def delete_pod(self, name: str) -> None: ...
    def pod_events(self, name: str) -> list[dict[str, Any]]:
        return []

    def pod_log(self, name: str, tail_lines: int = 200, container: str | None = None) -> str:
        return ""

    def read_pod(self, name: str) -> dict[str, Any] | None:
        return None

    def nodes(self) -> list[Any]:
        return []

    def add_listener(self, listener: Any) -> None: ...

    def retained(self) -> dict[str, int]:
        return {}

    def retained_limits(self) -> dict[str, int]:
        return {}


class SilentGoCD:
    def list_agents(self) -> list[Agent]:
        return []

    def disable_agents(self, agent_ids: Any) -> None: ...
    def delete_agents(self, agent_ids: Any) -> None: ...
    def server_info(self) -> ServerInfo:
        return ServerInfo("bench", None, None)

    def set_health_messages(self, messages: list[dict[str, str]]) -> None: ...
    def console_log(self, job: dict[str, Any], text: str) -> None: ...


def build(
    pods: int, fingerprints: int, idle_since: float = 1_700_000_000.0, busy: int = 0
) -> tuple[ClusterPool, list[JobSpec]]:
    """`pods` idle pods over `fingerprints` fingerprints, idle since `idle_since`; the first `busy` of
    them busy instead, for 10 minutes by then."""
    identity = PodIdentity(server_id="bench", cluster="c0")
    server = "https://gocd.example.test/go"
    specs = [JobSpec(f"v1:{n:064x}", {}, True, None, 600.0, 0, None, server) for n in range(fingerprints)]
    views = []
    for n in range(pods):
        spec = specs[n % fingerprints]
        state = {} if n >= busy else {
            labels.ANN_STATE: "busy",  # for 10 minutes: GoCD's list is the truth for it again
            labels.ANN_STATE_SINCE: f"{idle_since - 600:.3f}",
            labels.ANN_CURRENT_JOB: f'{{"job_id": {n}}}',
        }  # fmt: skip
        views.append(
            PodView(
                name=f"pod-{n}",
                namespace="bench",
                labels={**identity.selector()},
                annotations={
                    labels.ANN_STATE: "idle",
                    labels.ANN_STATE_SINCE: f"{idle_since:.3f}",
                    labels.ANN_FINGERPRINT: spec.fingerprint,
                    labels.ANN_REUSE: "true",
                    labels.ANN_REGISTERED: "true",
                    labels.ANN_JOBS_RUN: "3",
                    labels.ANN_LAST_JOB: '{"job_id": 1}',
                    **state,
                },
                phase="Running",
                resource_version=str(n),
                created_at=1_700_000_000.0,
            )
        )
    settings = ClusterProfile.from_properties({"go_server_url": "https://ci.example.com/go"})
    clock = SystemClock()
    port = StaticCluster(views)
    pool = ClusterPool(
        port,
        identity,
        settings,
        clock,
        SyncNarrator(),
        RegistrationKeys(clock),
        DeferredWriter,
        DeferredWork(),
    )
    return pool, specs


def measure(pods: int, calls: int, seed: int = 1) -> dict[str, float]:
    pool, specs = build(pods, fingerprints=50)
    gocd = SilentGoCD()
    rng = random.Random(seed)
    samples = []
    trues = 0
    for call in range(calls):
        spec = rng.choice(specs)
        job = JobIdentifier("p", "1", 1, "s", "1", "j", call)
        agent = f"pod-{rng.randrange(pods)}"
        started = time.perf_counter()
        trues += pool.should_assign_work(agent, job, spec, gocd)  # type: ignore[arg-type]
        samples.append(time.perf_counter() - started)
    samples.sort()
    return {
        "pods": pods,
        "calls": calls,
        "true_answers": trues,
        "p50_ms": samples[len(samples) // 2] * 1000,
        "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
        "max_ms": samples[-1] * 1000,
        "mean_ms": statistics.fmean(samples) * 1000,
    }


def measure_create_agent(pods: int, calls: int) -> dict[str, float]:
    """create-agent for jobs that idle pods of their fingerprint will take: the whole call is decided
    under the pool's lock, and no pod is created (the cluster here refuses creations)."""
    pool, specs = build(pods, fingerprints=50)
    gocd = SilentGoCD()
    samples = []
    for call in range(calls):
        job = JobIdentifier("p", "1", 1, "s", "1", "j", 1_000_000 + call)
        started = time.perf_counter()
        outcome = pool.create_agent(job, specs[call % len(specs)], f"key-{call}", gocd)  # type: ignore[arg-type]
        samples.append(time.perf_counter() - started)
        if outcome.created is not None:
            raise RuntimeError(f"create-agent created a pod: {outcome.message}")
    samples.sort()
    return {
        "p50_ms": samples[len(samples) // 2] * 1000,
        "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
    }


def measure_ping(pods: int, pings: int) -> dict[str, float]:
    """A server-ping's work for the pool (ClusterPool.reconcile: GoCD's list, the retirements, the
    broken pods, the waiting jobs and the warm pool) when nothing changed: a fifth of the pods idle and
    within their idle timeout, the others busy, and GoCD lists each agent as the pool knows it."""
    busy = pods * 4 // 5
    pool, _ = build(pods, fingerprints=50, idle_since=time.time(), busy=busy)

    def listed() -> dict[str, Agent]:  # a new list at every ping, as GoCD's answer is parsed anew
        return {
            f"pod-{n}": Agent(f"pod-{n}", "Building" if n < busy else "Idle",
                              "Building" if n < busy else "Idle", "Enabled")
            for n in range(pods)
        }  # fmt: skip

    gocd = SilentGoCD()
    samples, cpu = [], []
    for _ in range(pings):
        agents = listed()
        listed_at = pool.state.change_mark()
        started, started_cpu = time.perf_counter(), time.thread_time()
        pool.reconcile(agents, gocd, listed_at)  # type: ignore[arg-type]
        samples.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - started_cpu)  # on a shared machine: less of the others' load
    if any(pool.state.deleted_by_us(f"pod-{n}") for n in range(pods)):
        raise RuntimeError("a ping retired a pod: the benchmark measures pings that change nothing")
    samples.sort()
    return {
        "p50_ms": samples[len(samples) // 2] * 1000,
        "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
        "cpu_p50_ms": statistics.median(cpu) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--pings", type=int, default=200)
    args = parser.parse_args()
    result = measure(args.pods, args.calls)
    print(
        f"should-assign-work in process, {result['pods']:.0f} pods, {result['calls']:.0f} calls "
        f"({result['true_answers']:.0f} true): p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms, "
        f"max {result['max_ms']:.3f} ms"
    )
    create = measure_create_agent(args.pods, 500)
    print(
        f"create-agent in process (no pod needed, all under the pool's lock), {args.pods} pods, 500 calls: "
        f"p50 {create['p50_ms']:.3f} ms, p99 {create['p99_ms']:.3f} ms"
    )
    ping = measure_ping(args.pods, args.pings)
    print(
        f"server-ping in process (the pool's work, nothing changed), {args.pods} pods, {args.pings} pings: "
        f"p50 {ping['p50_ms']:.3f} ms, p99 {ping['p99_ms']:.3f} ms, CPU time p50 {ping['cpu_p50_ms']:.3f} ms"
    )


if __name__ == "__main__":
    main()
