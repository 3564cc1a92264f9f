"""The plugin side of a simulation: what a plugin may use (`PluginWorld`: the clock, the cluster's store,
the server's API), what the simulation asks of it (`SimulatedPlugin`), and this project's backend as such
a plugin (`ProjectPlugin`), which takes GoCD's requests as values (inprocess_requests.py). A baseline
(another plugin: benchmarks/legacy_reuse.py, the tests' wrappers) is any other `PluginFactory`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from elastic_agent.backend import ClusterFactory
from elastic_agent.simulation.gocd_callbacks import ServerApi
from elastic_agent.simulation.gocd_inprocess import InProcessGoCD
from elastic_agent.simulation.inprocess import build_inprocess_backend
from elastic_agent.simulation.inprocess_cluster import (
    InProcessCluster,
    SimulationKubeStore,
    store_cluster_factory,
)
from elastic_agent.simulation.inprocess_requests import InProcessTransport
from elastic_agent.simulation.memory_pods import MemoryPods
from elastic_agent.simulation.run_settings import SimSettings, VirtualClock


@dataclass
class PluginWorld:
    """What a plugin may use in a simulation: the clock, the cluster's store, the server's API."""

    clock: VirtualClock
    store: SimulationKubeStore | MemoryPods  # the engine's (run_settings.SimSettings.engine)
    api: ServerApi
    settings: SimSettings
    # Numbers the pods the plugin creates; the world's, so that a restarted plugin goes on counting.
    pod_counter: Callable[[], int] = field(default_factory=lambda: itertools.count(1).__next__)
    # The server behind `api`, for a plugin that calls its methods directly; None: only through `api`.
    model: InProcessGoCD | None = None

    def cluster_factory(self, lists: list[InProcessCluster]) -> ClusterFactory:
        """The plugin's cluster factory over the world's store; its ports leave their first pod list in
        `lists` for the plugin's driver to answer (inprocess_cluster.py)."""
        return store_cluster_factory(self.store, self.pod_counter, lists=lists)


class SimulatedPlugin(Protocol):
    def send(self, request_name: str, body: str) -> tuple[int, str]:
        """A request as JSON text, as GoCD's `GoPlugin.handle()` gets it."""

    def settle(self) -> None:
        """Finish what the plugin does "right after" a request (deferred writes)."""

    def timings(self) -> tuple[dict[str, int], dict[str, float]]:
        """Requests and real seconds spent per request name (empty when the plugin does not count)."""

    def next_due(self) -> float | None:
        """When the plugin has something to do of its own (clock seconds; None: nothing)."""

    def wake(self) -> None:
        """Do it: called at that time, before the server's work of the instant."""


PluginFactory = Callable[[PluginWorld], SimulatedPlugin]


class ProjectPlugin:
    """This project's backend, in process: requests as values (`send_value`), text only for what a
    scenario writes by hand (`send`); its calls into GoCD to the world's server directly when it has one."""

    def __init__(self, world: PluginWorld) -> None:
        self.backend = build_inprocess_backend(
            world.clock, world.api, world.cluster_factory, console=world.settings.console, model=world.model
        )
        self.transport = InProcessTransport(self.backend.backend)
        self.settle_s = 0.0

    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        return self.transport.send_value(request_name, body)

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        return self.transport.send(request_name, body)

    def settle(self) -> None:
        started = time.perf_counter()
        self.backend.settle()
        self.settle_s += time.perf_counter() - started

    def timings(self) -> tuple[dict[str, int], dict[str, float]]:
        return dict(self.transport.requests), dict(self.transport.seconds, settle=self.settle_s)

    def next_due(self) -> float | None:
        return self.backend.backend.next_period_change()

    def wake(self) -> None:
        self.backend.backend.on_period_change()  # a ReuseSchedule period starts: PeriodTimer's work

    def pending_writes(self) -> bool:
        return self.backend.pending_writes()
