"""The simulator's speed against an earlier commit, side by side: the same generated trace simulated by
this tree and by a git worktree of REV at the same time, one process per tree (one core each on 2
cores), so that the machine's run-to-run drift hits both alike. Each tree is pinned to a core, and a
second round swaps the cores, so that a slower core does not pass for a slower tree. Prints the wall
times of each round, the ratio of their sums, and whether both trees simulated the same pods and waits.

    python -m benchmarks.sim_ab --against 3579d8e --jobs 10000

Only the simulator's long-standing API is used in the other tree (Simulation, Policy, SimSettings,
WorkloadSpec, generate), so any commit that has it can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {
    "reuse": ("reuse, IdleTimeout 10m", {"Reuse": "true", "IdleTimeout": "10m"}),
    "one": ("one pod per job", {"Reuse": "false"}),
}

# Run in each tree with that tree on sys.path: the arguments come as JSON in argv[1].
RUNNER = """
import json, os, sys
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.traces.workload import WorkloadSpec, generate
args = json.loads(sys.argv[1])
if args["cpu"] is not None:
    os.sched_setaffinity(0, {args["cpu"]})
trace = generate(WorkloadSpec(jobs=args["jobs"], days=args["jobs"] / 20000), seed=1)
settings = SimSettings(seed=1, pending_pods_count=1000)
out = []
for name, elastic in args["policies"]:
    r = Simulation(trace, Policy(name, elastic), settings).run()
    same = [r.pods_created, r.wait_mean, r.wait_p95, r.wait_max, r.events, r.should_assign_asked, r.peak_pods]
    out.append({"policy": name, "wall_s": r.wall_s, "simulated": same})
print(json.dumps(out))
"""


def simulate_in(
    tree: Path, jobs: int, policies: list[tuple[str, dict[str, str]]], cpu: int | None
) -> subprocess.Popen[str]:
    argument = json.dumps({"jobs": jobs, "policies": policies, "cpu": cpu})
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, argument],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.PIPE,
        text=True,
    )


def compare(against: str, jobs: int, names: Sequence[str], rounds: int = 2) -> list[str]:
    policies = [POLICIES[name] for name in names]
    cpus = sorted(os.sched_getaffinity(0))
    results: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []  # (other tree, this tree)
    with tempfile.TemporaryDirectory(prefix="sim-ab-") as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), against],
                       check=True)  # fmt: skip
        try:
            for round_ in range(rounds):
                pins: list[int | None] = [None, None]
                if len(cpus) >= 2:
                    pins = [cpus[round_ % 2], cpus[(round_ + 1) % 2]]
                runs = [
                    simulate_in(other, jobs, policies, pins[0]),
                    simulate_in(ROOT, jobs, policies, pins[1]),
                ]
                outputs = [run.communicate()[0] for run in runs]
                if any(run.returncode for run in runs):
                    raise RuntimeError("a simulation failed; its error is above")
                results.append((json.loads(outputs[0]), json.loads(outputs[1])))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=True)
    lines = [
        f"| {jobs:,} jobs | {against}, round by round | this tree, round by round | ratio of the sums "
        "| same pods and waits |",
        "|---|---:|---:|---:|---|",
    ]
    for index, (name, _) in enumerate(policies):
        old = [before[index] for before, _ in results]
        new = [after[index] for _, after in results]
        old_s, new_s = sum(r["wall_s"] for r in old), sum(r["wall_s"] for r in new)
        ratio = old_s / new_s if new_s else float("inf")
        simulated = {json.dumps(r["simulated"]) for r in old + new}
        same = "yes" if len(simulated) == 1 else "NO: the trees simulate differently"
        walls = " | ".join(", ".join(f"{r['wall_s']:.1f} s" for r in side) for side in (old, new))
        lines.append(f"| {name} | {walls} | {ratio:.2f}x | {same} |")
    return lines + differences(against, policies, results)


def differences(
    against: str,
    policies: list[tuple[str, dict[str, str]]],
    results: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]],
) -> list[str]:
    """What each tree simulated, for the policies the trees simulate differently (a change of the model:
    the work per job may differ, not only the speed)."""
    lines: list[str] = []
    for index, (name, _) in enumerate(policies):
        old, new = results[0][0][index]["simulated"], results[0][1][index]["simulated"]
        if old == new:
            continue
        if not lines:
            lines = [
                "",
                "| policy | tree | pods created | wait mean | p95 | max | events | should-assign-work asked "
                "| peak pods |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
        for tree, figures in ((against, old), ("this tree", new)):
            pods, mean, p95, longest, events, asked, peak = figures
            lines.append(
                f"| {name} | {tree} | {pods:,} | {mean:.1f} s | {p95:.1f} s | {longest:.1f} s | {events:,} | "
                f"{asked:,} | {peak:,} |"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", required=True, help="the git revision to compare with")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--policies", default="reuse,one", help=f"comma-separated, of {', '.join(POLICIES)}")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; the trees swap cores each round")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names or args.jobs < 1 or args.rounds < 1:
        parser.error(f"policies are among {', '.join(POLICIES)}; --jobs and --rounds are at least 1")
    print("\n".join(compare(args.against, args.jobs, names, args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
