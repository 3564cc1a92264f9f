"""`python -m elastic_agent serve`, on a scaled clock that the test process shares: for the tests that kill
the backend's process and start another, on one clock with the simulated GoCD and kubelet.

    python -m tests.support.scaled_serve SPEED SIM_ORIGIN WALL_ORIGIN serve [serve's options]

The clock reads SIM_ORIGIN at wall-clock time WALL_ORIGIN and runs SPEED times faster than real time,
so every process started with the same three numbers reads the same time: a pod's annotations written
by one backend mean the same to the next. Everything else is the product's own command line."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from elastic_agent import cli
from elastic_agent.backend import Backend
from elastic_agent.clock import ScaledClock
from elastic_agent.service import wsgi


def shared_clock(speed: float, sim_origin: float, wall_origin: float) -> ScaledClock:
    return ScaledClock(speed, start=sim_origin + (time.time() - wall_origin) * speed)


def main(argv: Sequence[str]) -> int:
    speed, sim_origin, wall_origin = (float(value) for value in argv[:3])
    clock = shared_clock(speed, sim_origin, wall_origin)
    build = wsgi.build_backend

    def build_on_the_shared_clock(*args: Any, **kwargs: Any) -> Backend:
        return build(*args, **{**kwargs, "clock": clock})

    # service/cli.py's _serve imports build_backend from the module when it runs: the one thing changed.
    wsgi.build_backend = build_on_the_shared_clock
    return cli.main(list(argv[3:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
