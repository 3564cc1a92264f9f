"""Real pods measured (benchmarks/RESULTS.md, section 16): how long an agent takes to start on the real node,
one pod per job against reuse on a 30-job trace in real time, and what the virtual-time simulator predicts
for the same trace given that start-up time.

    python -m benchmarks.real_pods                 # the real node (root, built binaries); about 5 minutes
    python -m benchmarks.real_pods --fake          # the same on the fake cluster, agents as processes

1. Boots: `--samples` jobs of a one-pod-per-job profile, one after another on an otherwise empty node,
   each split into its phases (benchmarks/real_pods_live.py): create-agent sent, pod seen, scheduled,
   Running, agent registered.
2. The trace: `--jobs` jobs of one profile from the advisor's generator (a fixed seed; arrivals spread
   over `--span` seconds, a share of them in bursts; durations of a few seconds), replayed twice on
   fresh stacks: `Reuse=false` (one pod per job), then `Reuse=true` with `IdleTimeout` `IDLE_TIMEOUT`,
   long against the trace's gaps, so that reuse matters.
3. The prediction: the same trace and profiles through `Simulation` (virtual_time.py) with the simulated
   server's cadence set as the live one's (tests/support/node_stack.py's FAST_GOCD, and the stand-in's
   polling) and pod boots drawn around the measured creation-to-registration times.

The stack is the real backend over HTTP, the simulated GoCD server with its agent API on 127.0.0.1, and
the stand-in agent in each pod (tests/support/node_stack.py). JSON goes to benchmarks/results/real_pods.json
(or real_pods_fake.json); the tables are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import signal
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.real_pods_live import BootSample, LiveResult, boot_samples, replay
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.stack import Stack
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import DAY_S, ProfileMix, TraceJob, WorkloadSpec, generate
from tests.support import node_stack
from tests.support.node_stack import FAST_AGENT, FAST_GOCD, agent_profile

RESULTS = Path(__file__).resolve().parent / "results"
IDLE_TIMEOUT = "30s"
BOOT_JOB_S = 0.5
POLICIES = {"one pod per job": {"Reuse": "false"}, "reuse": {"Reuse": "true", "IdleTimeout": IDLE_TIMEOUT}}


def trace(jobs: int, span_s: float, seed: int) -> list[TraceJob]:
    """`jobs` jobs of one profile over `span_s` seconds, two in five in bursts of 3 to 6, lasting 1 to 8 s."""
    spec = WorkloadSpec(
        jobs=jobs,
        days=span_s / DAY_S,
        daily_amplitude=0.0,
        burst_share=0.4,
        burst_size=(3, 6),
        pipelines=5,
        profiles=(ProfileMix("standin", 1.0, 3.0, 0.5),),
        environments=((None, 1.0),),
        min_duration_s=1.0,
        max_duration_s=8.0,
    )
    return generate(spec, seed)


StackMaker = Callable[[], Stack]


@contextmanager
def node_stacks() -> Iterator[tuple[StackMaker, str]]:
    """Stacks on a real node of a control plane of their own (held under the machine's node lock), and
    the agent image's name."""
    from tests.support import control_plane, node_build
    from tests.support.real_node import RealNode, machine_lock

    binaries = control_plane.build()
    node_build.install_tools()
    node_binaries = node_build.build()
    with (
        tempfile.TemporaryDirectory(prefix="real-pods-") as work,
        machine_lock(),
        control_plane.ControlPlane.start(binaries, Path(work)) as plane,
        RealNode.start(plane, node_binaries) as node,
    ):
        image = node_stack.imported_agent_image(node).name
        yield (lambda: node_stack.node_stack(node)), image


@contextmanager
def fake_stacks() -> Iterator[tuple[StackMaker, str]]:
    yield node_stack.fake_stack, node_stack.FAKE_IMAGE


def _run(make: StackMaker, work: Callable[[Stack], Any]) -> Any:
    stack = make()
    try:
        return work(stack)
    finally:
        stack.stop()


def measure_boots(make: StackMaker, image: str, samples: int) -> list[BootSample]:
    def work(stack: Stack) -> list[BootSample]:
        elastic = agent_profile(stack, image, **POLICIES["one pod per job"])
        return boot_samples(stack, elastic, stack.cluster_profile(), samples, BOOT_JOB_S)

    result: list[BootSample] = _run(make, work)
    return result


def measure_trace(make: StackMaker, image: str, jobs: Sequence[TraceJob]) -> list[LiveResult]:
    results = []
    for name, overrides in POLICIES.items():

        def work(stack: Stack, overrides: dict[str, str] = overrides, name: str = name) -> LiveResult:
            return replay(
                stack, jobs, agent_profile(stack, image, **overrides), stack.cluster_profile(), name
            )

        results.append(_run(make, work))
    return results


def sim_settings(boots_s: Sequence[float], seed: int) -> SimSettings:
    """The simulator as the live stack runs: the server's cadence of tests/support/node_stack.py, agents
    asking for work as the stand-in does (its back-off from STANDIN_WORK_DELAY_S up to
    STANDIN_WORK_INTERVAL_S), the cluster profile's
    pending_pods_count, and boots lognormal with the measured median and spread, within the measured
    range."""
    logs = [math.log(value) for value in boots_s]
    return SimSettings(
        seed=seed,
        boot_median_s=statistics.median(boots_s),
        boot_sigma=statistics.stdev(logs) if len(logs) > 1 else 0.0,
        boot_bounds_s=(min(boots_s), max(boots_s)),
        get_work_delay_s=float(FAST_AGENT["STANDIN_WORK_DELAY_S"]),
        get_work_interval_s=float(FAST_AGENT["STANDIN_WORK_INTERVAL_S"]),
        scheduler_s=FAST_GOCD["scheduler_interval_s"],
        ping_s=FAST_GOCD["ping_interval_s"],
        pending_pods_count=10,  # Stack.cluster_profile's
    )


def predict(jobs: Sequence[TraceJob], boots_s: Sequence[float], seed: int) -> list[PolicyResult]:
    settings = sim_settings(boots_s, seed)
    return [
        Simulation(jobs, Policy(name, elastic=overrides), settings).run()
        for name, overrides in POLICIES.items()
    ]


# ---- tables ----------------------------------------------------------------------------------------


def _stats(values: Sequence[float | None]) -> str:
    seen = [value for value in values if value is not None]
    if not seen:
        return "- | - | -"
    return f"{statistics.fmean(seen):.2f} | {min(seen):.2f} | {max(seen):.2f}"


def boots_table(samples: Sequence[BootSample]) -> str:
    rows = [
        "| from create-agent sent to | mean s | min s | max s |",
        "|---|---:|---:|---:|",
        f"| pod seen in the API | {_stats([s.pod_created_s for s in samples])} |",
        f"| pod scheduled (spec.nodeName) | {_stats([s.scheduled_s for s in samples])} |",
        f"| pod Running (status.phase) | {_stats([s.running_s for s in samples])} |",
        f"| agent registered | {_stats([s.registered_s for s in samples])} |",
        f"| (pod seen to agent registered) | {_stats([s.created_to_registered_s for s in samples])} |",
    ]
    return "\n".join(rows)


def _ratio(reuse: float, single: float) -> str:
    return "-" if not single or math.isnan(single) else f"{reuse / single:.2f}"


Result = LiveResult | PolicyResult
ROWS: tuple[tuple[str, Callable[[Result], float], int], ...] = (
    ("pods created", lambda r: r.pods_created, 0),
    ("mean wait s", lambda r: r.wait_mean, 2),
    ("p95 wait s", lambda r: r.wait_p95, 2),
    ("max wait s", lambda r: r.wait_max, 2),
    ("most pods alive at once", lambda r: r.most_alive if isinstance(r, LiveResult) else r.peak_pods, 0),
)


def trace_table(columns: Sequence[tuple[str, Sequence[Result]]]) -> str:
    """One row per measure; for each (label, [one pod per job, reuse]) column pair, both and their ratio."""
    head = "| |" + "".join(f" {label}: one pod per job | {label}: reuse | ratio |" for label, _ in columns)
    rows = [head, "|---|" + "---:|---:|---:|" * len(columns)]
    for name, pick, digits in ROWS:
        cells = []
        for _, (single, reuse) in columns:
            a, b = pick(single), pick(reuse)
            cells.append(f" {a:.{digits}f} | {b:.{digits}f} | {_ratio(b, a)} |")
        rows.append(f"| {name} |" + "".join(cells))
    return "\n".join(rows)


def boots_under_load(live: Sequence[LiveResult]) -> str:
    lines = []
    for result in live:
        boots = result.boots_s
        if boots:
            mean = statistics.fmean(boots)
            lines.append(f"{result.policy}: pod seen to agent registered, {len(boots)} pods: "
                         f"mean {mean:.2f} s, min {boots[0]:.2f} s, max {boots[-1]:.2f} s")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fake", action="store_true", help="the fake cluster instead of the real node")
    parser.add_argument("--samples", type=int, default=8, help="boots measured one at a time (default 8)")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--span", type=float, default=120.0, help="seconds the arrivals spread over")
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    if args.samples < 1 or args.jobs < 1:
        print("error: --samples and --jobs must be at least 1", file=sys.stderr)
        return 2
    jobs = trace(args.jobs, args.span, args.seed)
    # SIGTERM unwinds as Ctrl-C does, so the node and the control plane are stopped, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    stacks = fake_stacks() if args.fake else node_stacks()
    with stacks as (make, image):
        samples = measure_boots(make, image, args.samples)
        live = measure_trace(make, image, jobs)
    sim = predict(jobs, [sample.created_to_registered_s for sample in samples], args.seed)
    # The same with the boots the one-pod-per-job run saw: how much of a difference is boots under load.
    loaded = predict(jobs, live[0].boots_s, args.seed)
    columns = [("live", live), ("simulator", sim), ("simulator, boots under load", loaded)]
    texts = [boots_table(samples), trace_table(columns), boots_under_load(live)]
    print("\n\n".join(texts))
    out = RESULTS / ("real_pods_fake.json" if args.fake else "real_pods.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "cluster": "fake" if args.fake else "real node",
        "arguments": vars(args),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "trace": [job.row() for job in jobs],
        "boots": [asdict(sample) for sample in samples],
        "live": [asdict(result) for result in live],
        "simulator": [result.numbers() for result in sim],
        "simulator_boots_under_load": [result.numbers() for result in loaded],
        "tables": texts,
    }, indent=2) + "\n")  # fmt: skip
    broken = [r.policy for r in live if r.violations or r.completed < r.jobs]
    broken += [f"simulated {r.policy}" for r in [*sim, *loaded] if r.violations or r.completed < r.jobs]
    if broken:
        print(f"not every job ran cleanly: {', '.join(broken)}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
