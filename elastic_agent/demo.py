"""The demo: the backend over HTTP, a simulated GoCD server and a fake Kubernetes cluster running a
short workload in scaled time, with a progress bar and a summary of what happened."""

from __future__ import annotations

import logging
import random
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.stack import Stack, StackOptions


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


def _boot_delay(rng: random.Random) -> Any:
    # Pod start-up (scheduling, image, JVM, registration) is lognormal around 25 s, as on real clusters.
    return lambda pod: min(90.0, rng.lognormvariate(3.2, 0.3))


def _show_progress(bar: tqdm, stack: Stack, scheduled: list[int]) -> int:
    done = sum(1 for job_id in scheduled if stack.gocd.job(job_id).completed_at)
    if done > bar.n:
        bar.update(done - bar.n)
    return done


def run_policy(policy: Policy, jobs: int, speed: float, seed: int, show: bool) -> Outcome:
    rng = random.Random(seed)
    clock = ScaledClock(speed)
    stack = Stack(
        clock, StackOptions(boot_delay=_boot_delay(random.Random(seed + 1)), gocd=GoCDConfig(seed=seed))
    )
    try:
        cluster = stack.cluster_profile(idle_timeout="2m")
        profiles = [
            stack.elastic_profile(**policy.elastic_overrides),
            stack.elastic_profile(MaxMemory="2Gi", **policy.elastic_overrides),
        ]
        scheduled: list[int] = []
        bar = tqdm(total=jobs, desc=f"{policy.name:>16}", unit="job", disable=not show, mininterval=0.5)
        next_at = clock.now()
        while len(scheduled) < jobs:
            if clock.now() >= next_at:
                profile = profiles[len(scheduled) % len(profiles)]
                pipeline = f"pipeline-{len(scheduled) % 3}"
                job = stack.gocd.schedule_job(
                    pipeline, "build", "compile", profile, cluster, None, rng.uniform(20, 90)
                )
                scheduled.append(job.job_id)
                next_at += rng.expovariate(1 / 6.0)  # a job every 6 simulated seconds on average
            _show_progress(bar, stack, scheduled)
            time.sleep(0.02)
        deadline = time.monotonic() + 600 / speed * 10
        while time.monotonic() < deadline:
            if _show_progress(bar, stack, scheduled) == jobs:
                break
            time.sleep(0.05)
        bar.close()
        # Let pings clean up what is left (one pod per job: everything; reuse: idle pods after the timeout).
        cleanup_deadline = time.monotonic() + 300 / speed * 2
        while time.monotonic() < cleanup_deadline and (stack.pods() or stack.gocd.agents()):
            time.sleep(0.05)
        completed = sum(1 for job_id in scheduled if stack.gocd.job(job_id).completed_at)
        return Outcome(
            policy=policy.name,
            jobs=jobs,
            completed=completed,
            pods_created=stack.gocd.stats.registrations_accepted + len(stack.gocd.refusals),
            waits=list(stack.gocd.wait_times().values()),
            left_pods=len(stack.pods()),
            left_agents=len(stack.gocd.agents()),
            violations=stack.gocd.invariant_violations(),
            plugin_errors=len(stack.gocd.stats.non_200_answers) + len(stack.gocd.stats.protocol_errors),
        )
    finally:
        stack.stop()


def _summary(outcomes: list[Outcome]) -> str:
    lines = [
        "",
        "| policy | jobs done | pods created | pods per job | mean wait | p95 wait | left pods/agents | "
        "invariant violations | plugin errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        waits = sorted(o.waits) or [0.0]
        p95 = waits[min(len(waits) - 1, int(0.95 * len(waits)))]
        lines.append(
            f"| {o.policy} | {o.completed}/{o.jobs} | {o.pods_created} | "
            f"{o.pods_created / max(1, o.jobs):.2f} | "
            f"{statistics.mean(waits):.1f} s | {p95:.1f} s | {o.left_pods}/{o.left_agents} | "
            f"{len(o.violations)} | {o.plugin_errors} |"
        )
    return "\n".join(lines)


def run_demo(jobs: int = 60, speed: float = 30.0, seed: int = 7) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    print(
        f"Demo: {jobs} jobs through the backend (HTTP), a simulated GoCD server and a fake Kubernetes "
        f"cluster, {speed:g}x real time; pods take about 25 s (simulated) to boot."
    )
    outcomes = [run_policy(policy, jobs, speed, seed, show=True) for policy in POLICIES]
    print(_summary(outcomes))
    failed = [o for o in outcomes if o.completed < o.jobs or o.violations or o.left_pods or o.plugin_errors]
    for o in failed:
        print(f"\n{o.policy}: something went wrong: {o.violations[:5]}")
    return 1 if failed else 0
