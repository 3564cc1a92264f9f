"""The world of tests/support/fault_backend_churn.py: a namespace of the real kube-apiserver, the simulated
kubelet and GoCD (with its callback endpoint) in the test process, and the backend as a process of its own
(tests/support/backend_process.py) on a clock shared with them (tests/support/scaled_serve.py), so that it can
be killed with SIGKILL and another started, and the pod annotations the first wrote mean the same to the next.

GoCD sends server-ping from a timer thread of its own and job-completion from the thread of the agent that
reported it; the simulated GoCD sends every request from its one thread, where a request waiting on a
hung callback would stop its scheduler and agents too. `GoCDThreads` sends those two as GoCD does."""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, SimulatedGoCD
from elastic_agent.simulation.gocd_records import HealthMessage
from elastic_agent.simulation.gocd_transport import HttpPluginTransport, PluginTransport
from elastic_agent.simulation.kubelet import SimulatedKubelet
from elastic_agent.simulation.stack import SwitchableTransport
from tests.support.backend_process import BackendProcess
from tests.support.control_plane import ControlPlane
from tests.support.doubles.gocd_callback_faults import CallbackFaults
from tests.support.real_cluster import RealCluster

SPEED = 30.0  # simulated seconds per real second, as tests/support/real_cluster.py
TOKEN = "fault-matrix-backend-token"
_LOG_LEVEL = re.compile(r" (WARNING|ERROR|CRITICAL) ")


class GoCDThreads:
    """server-ping from one thread, in order; each job-completion from a thread of its own. Their answers
    change nothing in GoCD, so the simulated GoCD is told 200 at once; failures are kept here."""

    def __init__(self, target: PluginTransport) -> None:
        self._target = target
        self._pings: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self.failures: list[tuple[str, int]] = []
        threading.Thread(target=self._send_pings, name="gocd-pings", daemon=True).start()

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        if request_name.endswith("server-ping"):
            self._pings.put((request_name, body))
        elif request_name.endswith("job-completion"):
            threading.Thread(target=self._send, args=(request_name, body), daemon=True).start()
        else:
            return self._target.send(request_name, body)
        return 200, ""

    def _send(self, request_name: str, body: str) -> None:
        status, _ = self._target.send(request_name, body)
        if status != 200:
            self.failures.append((request_name.rsplit(".", 1)[-1], status))

    def _send_pings(self) -> None:
        while (item := self._pings.get()) is not None:
            self._send(*item)

    def stop(self) -> None:
        self._pings.put(None)


class ProcessWorld:
    """A namespace of the real API server, the simulated kubelet and GoCD (with its callback endpoint) in
    this process; the backend as a process of its own on the shared clock, started and killed at will."""

    def __init__(self, plane: ControlPlane) -> None:
        wall = time.time()
        self.clock = ScaledClock(SPEED, start=wall)
        self._launcher = ("-m", "tests.support.scaled_serve", str(SPEED), repr(wall), repr(wall))
        self.cluster = RealCluster(plane)
        self.namespace = self.cluster.namespace
        self.transport = SwitchableTransport()
        self.threads = GoCDThreads(self.transport)
        self.gocd = SimulatedGoCD(self.clock, self.threads, GoCDConfig())
        # The fault matrix's callback faults, recording every call from the first.
        self.callback_faults = CallbackFaults()
        self.callbacks = CallbackServer(self.gocd, TOKEN, faults=self.callback_faults)
        self.callback_url = self.callbacks.start()
        self.kubelet = SimulatedKubelet(self.cluster.pod_host, self.clock, self.gocd, boot_delay=10.0)
        self.backends: list[BackendProcess] = []
        self.created: list[str] = []
        self._seen: set[str] = set()
        self.cluster.pod_host.add_listener(self._on_change)
        self.health: list[tuple[float, list[HealthMessage]]] = []
        replace = self.gocd.replace_health_messages

        def record_health(messages: list[HealthMessage]) -> None:
            self.health.append((time.monotonic(), list(messages)))
            replace(messages)

        self.gocd.replace_health_messages = record_health  # type: ignore[method-assign]
        self.kubelet.start()

    def _on_change(self, kind: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if kind == "ADDED" and name not in self._seen:  # a re-list repeats ADDED
            self._seen.add(name)
            self.created.append(name)

    def start_backend(self) -> BackendProcess:
        env = {"GOCD_ELASTIC_AGENT_TOKEN": TOKEN, "GOCD_ELASTIC_AGENT_CALLBACK_URL": self.callback_url}
        backend = BackendProcess(env=env, launcher=self._launcher)
        self.backends.append(backend)
        self.transport.switch(HttpPluginTransport(backend.url, TOKEN, self.callback_url))
        return backend

    def kill_backend(self) -> None:
        """SIGKILL; GoCD's requests get 503 "backend not running" until the next one starts."""
        self.transport.switch(None)
        self.backends[-1].kill()

    def cluster_profile(self, **overrides: str) -> dict[str, str]:
        return {"go_server_url": "https://gocd.example.test/go", **self.cluster.profile_properties(),
                "namespace": self.namespace, "auto_register_timeout": "10m", **overrides}  # fmt: skip

    def pods(self) -> list[dict[str, Any]]:
        pods, _ = self.cluster.pod_host.list_pods(self.namespace)
        return pods

    def set_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None:
        """As the admin (None removes one)."""
        body = {"metadata": {"annotations": dict(annotations)}}
        api = client.CoreV1Api(self.cluster.plane.admin_api_client())
        api.patch_namespaced_pod(name, self.namespace, body)

    def live_pod_names(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.pods() if not p["metadata"].get("deletionTimestamp")}

    def warnings(self) -> list[str]:
        return [line.rstrip() for b in self.backends for line in list(b.stderr) if _LOG_LEVEL.search(line)]

    def stop(self) -> None:
        self.gocd.stop()
        self.threads.stop()
        self.transport.switch(None)
        for backend in self.backends:
            backend.kill()
        self.kubelet.stop()
        self.callbacks.stop()
        self.cluster.stop()
