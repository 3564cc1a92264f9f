"""How long reuse jobs whose pods could not be created during a Kubernetes API outage wait once it ends,
in virtual time (deterministic: the figures are the simulation's, not the machine's).

One idle pod's worth of warm-up, then a two-minute outage of the in-process port (every call refused,
as a stopped kube-apiserver's port refuses) during which two reuse jobs of five minutes are scheduled
every 15 s; each needs a pod of its own. Prints, per tree, the jobs' waits from the outage's end to their
assignment and the create-agent re-sends GoCD needed. With `--against REV` the same scenario also runs in
a git worktree of REV, so that a change to the key rules is seen against the code before it:

    python -m benchmarks.outage_waits --against cb80a5a~1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in each tree with that tree on sys.path; prints one JSON line.
RUNNER = """
import json
from tests.stack_helpers import reuse_profile, schedule
from tests.virtual_helpers import completed, virtual_stack
stack = virtual_stack()
cluster = stack.cluster_profile(pending_pods_count="50", idle_timeout="10m")
profile = reuse_profile(stack)
completed(stack, schedule(stack, profile, cluster=cluster, duration=5))
(pool,) = stack.backend.pools()
pool.port.unreachable = True
jobs, start = [], stack.clock.now()
while stack.clock.now() - start < 120:
    jobs += [schedule(stack, profile, cluster=cluster, name=f"j{len(jobs)}", duration=300) for _ in range(2)]
    stack.run_for(15)
pool.port.unreachable = False
end = stack.clock.now()
stack.run_until(lambda: all(stack.gocd.job(j.job_id).agent_id for j in jobs), 900, "every job assigned")
done = [stack.gocd.job(j.job_id) for j in jobs]
waits = [max(0.0, j.assigned_at - end) for j in done]
print(json.dumps({"jobs": len(done), "mean_s": sum(waits) / len(waits), "max_s": max(waits),
                  "resends": sum(j.create_agent_sends - 1 for j in done), "pods": len(stack.pods())}))
"""


def measure(tree: Path) -> dict[str, float]:
    answer = subprocess.run(
        [sys.executable, "-c", RUNNER],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(answer.stdout.strip().splitlines()[-1])
    return result


def _line(name: str, r: dict[str, float]) -> str:
    return (
        f"{name}: {r['jobs']:.0f} jobs, after the outage mean {r['mean_s']:.1f} s, max {r['max_s']:.1f} s; "
        f"{r['resends']:.0f} create-agent re-sends; {r['pods']:.0f} pods"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="also run the scenario in a worktree of REV")
    args = parser.parse_args(argv)
    here = measure(ROOT)
    print(_line("this tree", here))
    if args.against:
        with tempfile.TemporaryDirectory() as scratch:
            tree = Path(scratch) / "tree"
            git = ["git", "-C", str(ROOT), "worktree"]
            subprocess.run([*git, "add", "-q", "--detach", str(tree), args.against], check=True)
            try:
                there = measure(tree)
            finally:
                subprocess.run([*git, "remove", "--force", str(tree)], check=True)
        print(_line(args.against, there))
        print(f"mean wait, this tree / {args.against}: {here['mean_s'] / there['mean_s']:.2f}")


if __name__ == "__main__":
    main()
