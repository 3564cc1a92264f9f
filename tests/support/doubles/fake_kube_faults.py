"""Fault injection of the fake Kubernetes API server: chosen calls answer an error status, or answer
late, a given number of times. What a real kube-apiserver cannot be made to do on demand, and the reason
the fake exists beside it (tests/contracts/test_kube_contract.py keeps the two in agreement otherwise).

The fake takes them through its seam, `FakeKubeApi.faults`; `faults_of` puts rules there on first use."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from elastic_agent.simulation.fake_kube import FakeKubeServer


@dataclass
class Fault:
    """Matching requests answer `status` (None: answer normally) after `delay` real seconds, `times`
    times (None: until removed)."""

    method: str | None
    path_pattern: re.Pattern[str]
    status: int | None
    delay: float
    times: int | None
    message: str
    hits: int = 0


@dataclass
class FaultRules:
    """Fault injection. `latency` slows every request down (real seconds: it models the network)."""

    latency: float = 0.0
    _rules: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(
        self,
        method: str | None = None,
        path_pattern: str = ".*",
        status: int | None = 500,
        delay: float = 0.0,
        times: int | None = 1,
        message: str = "injected fault",
    ) -> Fault:
        verb = method.upper() if method else None
        fault = Fault(verb, re.compile(path_pattern), status, delay, times, message)
        with self._lock:
            self._rules.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.latency = 0.0

    def take(self, method: str, path: str) -> Fault | None:
        """The first rule matching this request, consuming one of its `times`."""
        with self._lock:
            for fault in self._rules:
                if fault.method not in (None, method) or not fault.path_pattern.search(path):
                    continue
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._rules.remove(fault)
                return fault
            return None


def faults_of(server: FakeKubeServer) -> FaultRules:
    """The fault rules of `server`, put into its API on first use (until then it has none)."""
    if not isinstance(server.api.faults, FaultRules):
        server.api.faults = FaultRules()
    return server.api.faults
