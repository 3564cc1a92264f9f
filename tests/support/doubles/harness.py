"""The whole system in virtual time, for tests: a scenario instead of a trace.

`VirtualStack` has the surface of `stack.Stack` (the simulated GoCD server, profiles, pods, the
plugin's transport, a backend restart) over the pieces the discrete-event simulation uses: one
`VirtualClock`, the in-process server and backend (requests as values: plugins.ProjectPlugin), the
simulation store and the simulated kubelet; every event is simulated (no skipping). Nothing runs by
itself: `run_until(condition)` and `run_for(seconds)` step from one due event to the next, so a test
says what must happen by when in simulated time and never races a wall clock. The HTTP stack stays for
what needs the real service (the bridge contract, threads, a process).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from elastic_agent.backend import Backend
from elastic_agent.clock import Clock
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_callbacks import ServerApi
from elastic_agent.simulation.gocd_inprocess import InProcessGoCD
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.inprocess_cluster import SimulationKubeStore
from elastic_agent.simulation.kubelet import BootDelay, FaultPolicy, SimulatedKubelet
from elastic_agent.simulation.plugins import PluginWorld, ProjectPlugin
from elastic_agent.simulation.run_settings import START, SimSettings, VirtualClock

_EPSILON_S = 1e-6


class NeverHappened(AssertionError):
    """What a test waited for did not happen within its simulated time."""


class _Switch:
    """The model's transport: the plugin of the moment (a restart swaps it)."""

    def __init__(self) -> None:
        self.plugin: ProjectPlugin | None = None

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        if self.plugin is None:
            return 503, "backend not running"
        return self.plugin.send(request_name, body)

    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        if self.plugin is None:
            return 503, "backend not running"
        return self.plugin.send_value(request_name, body)


class SkewedClock:
    """Another machine's clock: `skew_s` ahead of (or, negative, behind) the given one."""

    def __init__(self, clock: Clock, skew_s: float) -> None:
        self._clock = clock
        self.skew_s = skew_s

    def now(self) -> float:
        return self._clock.now() + self.skew_s

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(seconds)


class VirtualStack:
    """`server_clock_skew_s`: how far the API server's clock (its timestamps) is from the backend's."""

    def __init__(
        self,
        boot_delay: BootDelay = 5.0,
        gocd: GoCDConfig | None = None,
        namespace: str = "ci",
        faults: FaultPolicy | None = None,
        server_clock_skew_s: float = 0.0,
    ) -> None:
        self.clock = VirtualClock(START)
        self.store = SimulationKubeStore(clock=SkewedClock(self.clock, server_clock_skew_s))
        self.store.keep_logs = True
        self.pods_created: list[str] = []
        self.store.add_listener(self._heard)
        self.namespace = namespace
        self.transport = _Switch()
        self.gocd = InProcessGoCD(self.clock, self.transport, gocd or GoCDConfig(seed=1))
        settings = SimSettings(console=True)
        self._world = PluginWorld(self.clock, self.store, ServerApi(self.gocd), settings, model=self.gocd)
        self.kubelet = SimulatedKubelet(
            self.store, self.clock, self.gocd, boot_delay=boot_delay, faults=faults
        )
        self.start_backend()

    def _heard(self, kind: str, pod: Obj) -> None:
        if kind == "ADDED":
            self.pods_created.append(pod["metadata"]["name"])

    # -- the backend ---------------------------------------------------------------------------------

    @property
    def plugin(self) -> ProjectPlugin:
        assert self.transport.plugin is not None, "the backend is stopped"
        return self.transport.plugin

    @property
    def backend(self) -> Backend:
        return self.plugin.backend.backend

    def start_backend(self) -> None:
        self.transport.plugin = ProjectPlugin(self._world)

    def stop_backend(self) -> None:
        """Like a killed process: answers stop, memory is gone, pods stay. (Nothing unwritten is
        flushed: call `settle()` first for a clean stop.)"""
        self.transport.plugin = None

    def restart_backend(self) -> None:
        self.stop_backend()
        self.start_backend()

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        """One request to the plugin, as GoCD would send it, then what the plugin does right after."""
        answer = self.transport.send(request_name, body)
        self.settle()
        return answer

    def settle(self) -> None:
        if self.transport.plugin is not None:
            self.transport.plugin.settle()
        self.kubelet.step()

    # -- profiles and pods, as stack.Stack has them ------------------------------------------------------

    def cluster_profile(self, **overrides: str) -> dict[str, str]:
        return {
            "go_server_url": "https://gocd.example.test/go",
            "kubernetes_cluster_url": "https://kubernetes.example.test",
            "namespace": self.namespace,
            "pending_pods_count": "10",
            "auto_register_timeout": "10m",
            **overrides,
        }

    @staticmethod
    def elastic_profile(**overrides: str) -> dict[str, str]:
        return {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties", **overrides}

    def pods(self) -> list[Obj]:
        pods, _ = self.store.list_pods(self.namespace)
        return pods

    # -- time ----------------------------------------------------------------------------------------

    def run_until(self, condition: Callable[[], Any], within_s: float, what: str = "the condition") -> None:
        """Step events until `condition()` holds; NeverHappened after `within_s` simulated seconds."""
        deadline = self.clock.now() + within_s
        while not condition():
            if not self._step(deadline):
                raise NeverHappened(f"{what} did not happen within {within_s:g} simulated seconds")

    def run_for(self, seconds: float) -> None:
        deadline = self.clock.now() + seconds
        while self._step(deadline):
            pass
        self.clock.move_to(deadline)

    def _step(self, deadline: float) -> bool:
        """One instant: everything due at the next due time, if that is before `deadline`."""
        kubelet_due = self.kubelet.next_due()
        period_due = self.backend.next_period_change() if self.transport.plugin is not None else None
        due = min(self.gocd.next_due_at(), math.inf if kubelet_due is None else kubelet_due,
                  math.inf if period_due is None else period_due)  # fmt: skip
        if due > deadline + _EPSILON_S:
            return False
        self.clock.move_to(due)
        if period_due is not None and period_due <= due:
            self.backend.on_period_change()  # a ReuseSchedule period starts: PeriodTimer's work
        self.kubelet.step()
        self.gocd.step()
        self.settle()
        return True
