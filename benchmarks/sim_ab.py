"""The simulator's speed against an earlier commit, side by side: the same generated trace simulated by
this tree and by a git worktree of REV at the same time, one process per tree (one core each on 2
cores), so that the machine's run-to-run drift hits both alike. Prints wall times and their ratio, and
checks that both trees simulated the same pods and waits.

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

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {
    "reuse": ("reuse, IdleTimeout 10m", {"Reuse": "true", "IdleTimeout": "10m"}),
    "one": ("one pod per job", {"Reuse": "false"}),
}

# Run in each tree with that tree on sys.path: the arguments come as JSON in argv[1].
RUNNER = """
import json, sys
from elastic_agent.simulation.virtual_time import Policy, SimSettings, Simulation
from elastic_agent.simulation.workload import WorkloadSpec, generate
args = json.loads(sys.argv[1])
trace = generate(WorkloadSpec(jobs=args["jobs"], days=args["jobs"] / 20000), seed=1)
settings = SimSettings(seed=1, pending_pods_count=1000)
out = []
for name, elastic in args["policies"]:
    r = Simulation(trace, Policy(name, elastic), settings).run()
    same = [r.pods_created, r.wait_mean, r.wait_p95, r.wait_max, r.events, r.should_assign_asked, r.peak_pods]
    out.append({"policy": name, "wall_s": r.wall_s, "simulated": same})
print(json.dumps(out))
"""


def simulate_in(tree: Path, jobs: int, policies: list[tuple[str, dict[str, str]]]) -> subprocess.Popen[str]:
    argument = json.dumps({"jobs": jobs, "policies": policies})
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, argument],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.PIPE,
        text=True,
    )


def compare(against: str, jobs: int, names: Sequence[str]) -> list[str]:
    policies = [POLICIES[name] for name in names]
    with tempfile.TemporaryDirectory(prefix="sim-ab-") as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), against],
                       check=True)  # fmt: skip
        try:
            runs = [simulate_in(other, jobs, policies), simulate_in(ROOT, jobs, policies)]
            outputs = [run.communicate()[0] for run in runs]
            if any(run.returncode for run in runs):
                raise RuntimeError("a simulation failed; its error is above")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=True)
    before, after = (json.loads(output) for output in outputs)
    lines = [
        f"| {jobs:,} jobs | {against} | this tree | ratio | same pods and waits |",
        "|---|---:|---:|---:|---|",
    ]
    for old, new in zip(before, after, strict=True):
        ratio = old["wall_s"] / new["wall_s"] if new["wall_s"] else float("inf")
        same = "yes" if old["simulated"] == new["simulated"] else "NO: the trees simulate differently"
        walls = f"{old['wall_s']:.1f} s | {new['wall_s']:.1f} s"
        lines.append(f"| {new['policy']} | {walls} | {ratio:.2f}x | {same} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", required=True, help="the git revision to compare with")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--policies", default="reuse,one", help=f"comma-separated, of {', '.join(POLICIES)}")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names or args.jobs < 1:
        parser.error(f"policies are among {', '.join(POLICIES)}, and --jobs is at least 1")
    print("\n".join(compare(args.against, args.jobs, names)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
