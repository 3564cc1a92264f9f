"""Shared fixtures: the whole stack (backend over HTTP, fake cluster, simulated GoCD) in scaled time."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.stack import Stack, StackOptions
from tests.support.live_stack import SPEED

# The real node's fixtures, defined once for the session here rather than imported into each module that
# uses them: each module binding a session fixture by name gets an instance of its own, and a second
# node's start would wait for the machine lock the session's first node holds.
from tests.support.real_node_fixtures import real_kube_binaries, real_node, real_node_binaries

__all__ = ["real_kube_binaries", "real_node", "real_node_binaries"]  # fixtures, used by name

# No test reads or writes the user's cache of the advisor's runs (elastic_agent/advisor/cache.py), nor
# depends on one: `advise` keeps none unless a test gives it `--cache-dir` (a temporary directory).
os.environ["GOCD_REUSE_ADVISOR_CACHE"] = "off"


@pytest.fixture
def make_stack() -> Iterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def make(boot_delay: float = 5.0, start_gocd: bool = True, **gocd: object) -> Stack:
        clock = ScaledClock(SPEED)
        config = GoCDConfig(**gocd)  # type: ignore[arg-type]
        stack = Stack(clock, StackOptions(boot_delay=boot_delay, gocd=config, start_gocd=start_gocd))
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()
