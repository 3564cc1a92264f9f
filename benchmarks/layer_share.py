"""Where one simulation's CPU goes, by layer: the product (the pool, the executors, the backend, the GoCD
messages, the profiles: what `serve` runs) against the simulation (the GoCD model, the pods, the kubelet,
the event loop). What the product's share is bounds how fast any simulator that runs the product's own
decisions can be (benchmarks/RESULTS.md §30).

    python -m elastic_agent generate week.jsonl --standard 100000
    python -m benchmarks.layer_share week.jsonl --first 3000 Reuse=true IdleTimeout=10m MinIdlePods=1

cProfile with CPU time; the time of builtins, the standard library and packages goes to the layer of
the nearest caller of ours up the calls, in proportion to the time each caller spent there. cProfile's
cost per call weighs code of many small calls more, so the shares are approximate.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import load_trace
from profiles.validation import validate_elastic_profile

ROOT = str(Path(__file__).resolve().parent.parent) + "/"
# The simulator and what reads its runs (the traces' measures, the advisor); the rest of ours is the product.
SIMULATION = tuple(ROOT + "elastic_agent/" + folder for folder in ("simulation/", "traces/", "advisor/"))
PRODUCT = tuple(ROOT + folder for folder in ("elastic_agent/", "executors/", "profiles/"))


def layer_of(filename: str) -> str | None:
    """"simulation", "product", or None for code of neither (builtins, the standard library, packages)."""
    if filename.startswith(SIMULATION):
        return "simulation"
    return "product" if filename.startswith(PRODUCT) else None


Function = tuple[str, int, str]


def shares(stats: pstats.Stats) -> Counter[str]:
    """CPU seconds per layer, "other" for what no caller of ours spent."""
    table = stats.stats  # type: ignore[attr-defined]
    weights: dict[Function, dict[str, float]] = {}

    def weight(function: Function, visiting: frozenset[Function]) -> dict[str, float]:
        """Which layers a function's time counts for, as fractions: its own layer, else its callers',
        up the calls (json.loads then its decoder are the product's when the product called them)."""
        known = weights.get(function)
        if known is not None:
            return known
        layer = layer_of(function[0])
        callers = table[function][4] if function in table else {}
        by_callers = sum(spent[2] for spent in callers.values())
        if layer is not None or not by_callers or function in visiting:
            found = {layer or "other": 1.0}
        else:
            found = {}
            for caller, spent in callers.items():
                for name, part in weight(caller, visiting | {function}).items():
                    found[name] = found.get(name, 0.0) + part * spent[2] / by_callers
        if not visiting:  # a weight found inside a cycle may lack the cycle's part: kept only when whole
            weights[function] = found
        return found

    seconds: Counter[str] = Counter()
    for function, (_, _, own, _, _) in table.items():
        for name, part in weight(function, frozenset()).items():
            seconds[name] += own * part
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trace", type=Path)
    parser.add_argument("properties", nargs="+", help="the elastic profile's reuse keys, KEY=VALUE")
    parser.add_argument("--first", type=int, default=3000, help="simulate the trace's first N jobs")
    parser.add_argument("--engine", choices=("policy", "full"), default="policy")
    args = parser.parse_args(argv)
    if args.first < 1:
        parser.error("--first must be at least 1")
    pairs = [item.partition("=") for item in args.properties]
    if any(not key or not sep for key, sep, _ in pairs):
        parser.error("each property is KEY=VALUE, for example IdleTimeout=10m")
    logging.basicConfig(level=logging.ERROR)  # the simulated backends' warnings are about simulated pods
    try:
        jobs = load_trace(args.trace)[: args.first]
    except OSError as error:
        parser.error(f"the trace {args.trace} cannot be read: {error.strerror or error}")
    except ValueError as error:  # TraceError among them: the line and what is wrong with it
        parser.error(f"the trace {args.trace} is not a trace this project reads: {error}")
    properties = {key: value for key, _, value in pairs}
    # The elastic profile's own validation, as GoCD's validate request gets it (the image is the simulator's).
    problems = validate_elastic_profile({"Image": "agent", "PodSpecType": "properties", **properties})
    if problems:
        parser.error(f"the properties cannot be simulated: {problems[0]['key']}: {problems[0]['message']}")
    simulation = Simulation(jobs, Policy("measured", properties), SimSettings(engine=args.engine))
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    simulation.run()
    profile.disable()
    seconds = shares(pstats.Stats(profile))
    total = sum(seconds.values())
    parts = ", ".join(f"{layer} {100 * spent / total:.1f} %" for layer, spent in seconds.most_common())
    print(f"{len(jobs):,} jobs, {' '.join(args.properties)}, the {args.engine} engine: {parts} "
          f"of {total:.1f} s of CPU (profiled)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
