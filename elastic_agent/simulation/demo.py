"""The demo: one workload trace, run twice live (the backend over HTTP, a simulated GoCD server and a fake
Kubernetes cluster, in scaled time, with a progress bar), then replayed in virtual time through the same
executors and pool at several idle timeouts: the reuse-versus-one-pod-per-job comparison for its workload.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from elastic_agent.advisor.workload import TraceJob
from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.stack import Stack, StackOptions
from elastic_agent.simulation.virtual_time import Policy as SimPolicy
from elastic_agent.simulation.virtual_time import SimSettings, Simulation

PROFILES = ("small", "large")


@dataclass(frozen=True)
class Policy:
    name: str
    elastic_overrides: Mapping[str, str]


POLICIES = [
    Policy("one pod per job", {"Reuse": "false"}),
    Policy("reuse", {"Reuse": "true", "IdleTimeout": "2m"}),
]


@dataclass(frozen=True)
class Outcome:
    policy: str
    jobs: int
    completed: int
    pods_created: int
    waits: list[float]
    left_pods: int
    left_agents: int
    violations: list[str]
    plugin_errors: int
    registrations_refused: int


def demo_trace(jobs: int, seed: int) -> list[TraceJob]:
    """A job every 6 s on average, 20 to 90 s long, two profiles, three pipelines."""
    rng = random.Random(seed)
    at, trace = 0.0, []
    for n in range(jobs):
        trace.append(TraceJob(at, PROFILES[n % 2], None, f"pipeline-{n % 3}", rng.uniform(20, 90)))
        at += rng.expovariate(1 / 6.0)
    return trace


def elastic_properties(profile: str, overrides: Mapping[str, str]) -> dict[str, str]:
    image = {"Image": f"registry.example.test/agents/{profile}:1", "PodSpecType": "properties"}
    return {**image, **({"MaxMemory": "2Gi"} if profile == "large" else {}), **overrides}


def _boot_delay(rng: random.Random) -> Any:
    # Pod start-up (scheduling, image, JVM, registration) is lognormal around 25 s, as on real clusters.
    return lambda pod: min(90.0, rng.lognormvariate(3.2, 0.3))


def _show_progress(bar: tqdm, stack: Stack, scheduled: list[int]) -> int:
    done = sum(1 for job_id in scheduled if stack.gocd.job(job_id).completed_at)
    if done > bar.n:
        bar.update(done - bar.n)
    return done


def run_policy(policy: Policy, trace: Sequence[TraceJob], speed: float, seed: int, show: bool) -> Outcome:
    clock = ScaledClock(speed)
    stack = Stack(
        clock, StackOptions(boot_delay=_boot_delay(random.Random(seed + 1)), gocd=GoCDConfig(seed=seed))
    )
    try:
        cluster = stack.cluster_profile(idle_timeout="2m")
        scheduled: list[int] = []
        bar = tqdm(total=len(trace), desc=f"{policy.name:>16}", unit="job", disable=not show, mininterval=0.5)
        start = clock.now()
        for entry in trace:
            while clock.now() - start < entry.at:
                _show_progress(bar, stack, scheduled)
                time.sleep(0.02)
            profile = elastic_properties(entry.profile, policy.elastic_overrides)
            job = stack.gocd.schedule_job(
                entry.pipeline, "build", "compile", profile, cluster, None, entry.duration
            )
            scheduled.append(job.job_id)
        deadline = time.monotonic() + 6000 / speed
        while time.monotonic() < deadline and _show_progress(bar, stack, scheduled) < len(trace):
            time.sleep(0.05)
        bar.close()
        # Let pings clean up what is left (one pod per job: everything; reuse: idle pods after the timeout).
        cleanup_deadline = time.monotonic() + 600 / speed
        while time.monotonic() < cleanup_deadline and (stack.pods() or stack.gocd.agents()):
            time.sleep(0.05)
        completed = sum(1 for job_id in scheduled if stack.gocd.job(job_id).completed_at)
        return Outcome(
            policy=policy.name,
            jobs=len(trace),
            completed=completed,
            pods_created=stack.gocd.stats.registrations_accepted + len(stack.gocd.refusals),
            waits=list(stack.gocd.wait_times().values()),
            left_pods=len(stack.pods()),
            left_agents=len(stack.gocd.agents()),
            violations=stack.gocd.invariant_violations(),
            plugin_errors=len(stack.gocd.stats.non_200_answers) + len(stack.gocd.stats.protocol_errors),
            registrations_refused=len(stack.gocd.refusals),
        )
    finally:
        stack.stop()


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _live_summary(outcomes: list[Outcome]) -> str:
    lines = [
        "",
        "Live, over HTTP:",
        "",
        "| policy | jobs done | pods created | pods per job | mean wait | p95 wait | left pods/agents | "
        "registrations refused | invariant violations | plugin errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.policy} | {o.completed}/{o.jobs} | {o.pods_created} | "
            f"{o.pods_created / max(1, o.jobs):.2f} | "
            f"{statistics.mean(o.waits or [0.0]):.1f} s | {_p95(o.waits):.1f} s | "
            f"{o.left_pods}/{o.left_agents} | "
            f"{o.registrations_refused} | {len(o.violations)} | {o.plugin_errors} |"
        )
    return "\n".join(lines)


def virtual_comparison(trace: Sequence[TraceJob], seed: int) -> str:
    """The same trace in virtual time (no HTTP, no sleeping) through the real executors and pool."""
    policies = [SimPolicy("one pod per job", {"Reuse": "false"})] + [
        SimPolicy(f"reuse, IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t})
        for t in ("2m", "10m", "30m")
    ]
    policies = [SimPolicy(p.name, p.elastic, {"large": {"MaxMemory": "2Gi"}}, p.cluster) for p in policies]
    results = [Simulation(trace, policy, SimSettings(seed=seed)).run() for policy in policies]
    baseline = results[0].wait_mean or 1.0
    lines = [
        "",
        "The same trace in virtual time (real executors and pool, simulated GoCD and cluster):",
        "",
        "| policy | pods per job | mean wait | wait vs one pod per job | p95 wait | waited > 120 s | "
        "idle pod-s per job | registrations refused | violations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.policy} | {r.pods_created / max(1, r.jobs):.2f} | {r.wait_mean:.1f} s | "
            f"{r.wait_mean / baseline:.2f} | {r.wait_p95:.1f} s | {r.waited_past_resend} | "
            f"{r.idle_pod_s / max(1, r.jobs):.0f} | {r.registrations_refused} | {len(r.violations)} |"
        )
    return "\n".join(lines)


def run_demo(jobs: int = 60, speed: float = 30.0, seed: int = 7) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    print(
        f"Demo: {jobs} jobs through the backend (HTTP), a simulated GoCD server and a fake Kubernetes "
        f"cluster, {speed:g}x real time; pods take about 25 s (simulated) to boot."
    )
    trace = demo_trace(jobs, seed)
    outcomes = [run_policy(policy, trace, speed, seed, show=True) for policy in POLICIES]
    print(_live_summary(outcomes))
    print(virtual_comparison(trace, seed))
    failed = [o for o in outcomes if o.completed < o.jobs or o.violations or o.left_pods or o.plugin_errors]
    for o in failed:
        print(f"\n{o.policy}: something went wrong: {o.violations[:5]}")
    return 1 if failed else 0
