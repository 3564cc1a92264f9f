"""The demo: a short workload run twice live (the backend over HTTP, a simulated GoCD server and a fake
Kubernetes cluster, in scaled time, with a progress bar), then a pipeline-shaped working day
(traces/pipelines.py: stages following stages, test fan-outs, downstream deploys, a nightly and an hourly
timer) replayed in virtual time through the same executors and pool: one pod per job, flat idle timeouts,
prediction, and prediction with a schedule, so that what each setting buys shows in one table.

The live part is short because it runs in scaled real time; the day is long enough to hold quiet hours
and repeated pipeline runs, which is where the idle timeouts differ and where prediction has something to
learn. The day's runs use two processes.
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

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.stack import Stack, StackOptions
from elastic_agent.simulation.virtual_time import Policy as SimPolicy
from elastic_agent.simulation.virtual_time import simulate_all
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.pipelines import PipelineSpec, generate_pipelines
from elastic_agent.traces.schedule_advice import analyse, propose
from elastic_agent.traces.workload import DEFAULT_ORIGIN, TraceJob, describe

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


def demo_day(seed: int, pipelines: int = 15, commits_per_hour: float = 10.0) -> list[TraceJob]:
    """A Monday of a small installation: about 1,900 jobs from 15 commit-triggered pipelines and their
    deploys, 10 commits an office hour, the nightly and hourly timers."""
    spec = PipelineSpec(days=1.0, commit_pipelines=pipelines, commits_per_hour=commits_per_hour)
    return generate_pipelines(spec, seed)


def _schedule(trace: Sequence[TraceJob], settings: SimSettings) -> dict[str, dict[str, str]]:
    """Each profile's ReuseSchedule as the advisor proposes it from the day (busy hours 60m with a warm
    pool at the median, else 2m), with Predict on."""
    per_profile = {}
    for profile in sorted({job.profile for job in trace}):
        demand = analyse(
            [job for job in trace if job.profile == profile],
            DEFAULT_ORIGIN,
            refill_window_s=settings.boot_median_s + settings.ping_s,
        )
        proposals = propose(
            demand, quantiles=(0.5,), busy_idle_timeouts=("60m",), plain_idle_timeouts=("2m",)
        )
        chosen = proposals[0].properties() if proposals else {"Reuse": "true", "IdleTimeout": "2m"}
        per_profile[profile] = {**chosen, "Predict": "true"}
    return per_profile


def virtual_comparison(trace: Sequence[TraceJob], seed: int, workers: int = 2, show: bool = False) -> str:
    """The trace in virtual time (no HTTP, no sleeping) through the real executors and pool, one run per
    row."""
    settings = SimSettings(seed=seed, start=DEFAULT_ORIGIN.timestamp())
    policies = [SimPolicy("one pod per job", {"Reuse": "false"})]
    policies += [
        SimPolicy(f"reuse, IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t})
        for t in ("2m", "10m", "30m")
    ]
    policies += [
        SimPolicy(f"reuse + Predict, IdleTimeout {t}", {"Reuse": "true", "IdleTimeout": t, "Predict": "true"})
        for t in ("2m", "10m")
    ]
    policies.append(
        SimPolicy(
            "reuse + Predict + ReuseSchedule", {"Reuse": "true"}, per_profile=_schedule(trace, settings)
        )
    )
    bar = tqdm(total=len(policies), desc="virtual-time runs", unit="run", disable=not show)

    def done(_: PolicyResult) -> None:
        bar.update()

    results = simulate_all([(trace, policy, settings) for policy in policies], workers, done)
    bar.close()
    baseline = results[0].wait_mean or 1.0
    lines = [
        "",
        f"A pipeline-shaped day in virtual time ({describe(trace)}; real executors and pool, simulated GoCD "
        "and cluster):",
        "",
        "| policy | pods per job | mean wait | wait vs one pod per job | p95 wait | waited > 120 s | "
        "idle pod-s per job | pods started ahead | of them used as predicted | wanted but no key | "
        "registrations refused | violations |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.policy} | {r.pods_per_job:.2f} | {r.wait_mean:.1f} s | "
            f"{r.wait_mean / baseline:.2f} | {r.wait_p95:.1f} s | {r.waited_past_resend} | "
            f"{r.idle_pod_s_per_job:.0f} | {r.predicted_started} | {r.predicted_hits} | "
            f"{r.predicted_without_key} | {r.registrations_refused} | {len(r.violations)} |"
        )
    lines += [
        "",
        "Longer idle timeouts buy waits with idle pods. Predict starts the next stage's pods while a stage "
        "runs, but only with registration keys GoCD handed out for jobs that another pod served: "
        "'wanted but no key' counts the pods it could not start for want of one.",
    ]
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
    print("\nNow a whole pipeline-shaped day, replayed in virtual time (about a minute):", flush=True)
    print(virtual_comparison(demo_day(seed), seed, show=True))
    failed = [o for o in outcomes if o.completed < o.jobs or o.violations or o.left_pods or o.plugin_errors]
    for o in failed:
        print(f"\n{o.policy}: something went wrong: {o.violations[:5]}")
    return 1 if failed else 0
