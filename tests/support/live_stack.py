"""The whole stack on a scaled clock, as the tests over HTTP drive it: GoCD's request names, the time scale,
and waiting in real time for what the stack does in the background.

The root conftest.py builds such stacks (the fixture make_stack); the names here are shared by the tests
and helpers that talk to them."""

from __future__ import annotations

import time
from collections.abc import Callable

from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX as PREFIX

# Full request names, as GoCD sends them.
CREATE = PREFIX + "create-agent"
ASSIGN = PREFIX + "should-assign-work"
COMPLETE = PREFIX + "job-completion"
PING = PREFIX + "server-ping"

# Simulated seconds per real second: a 60 s ping comes every second of the test.
SPEED = 60.0


def wait_until(condition: Callable[[], object], timeout_s: float = 15.0, what: str = "condition") -> None:
    """Poll a condition in real time; fail with `what` when it never holds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
