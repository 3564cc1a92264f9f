"""The whole system on one machine: the backend served over HTTP, a Kubernetes API server with the
simulated kubelet, and the simulated GoCD server with its callback endpoint, on one clock.

The API server is the project's fake by default (`FakeCluster`: fault injection, any clock); the tests
on a real kube-apiserver pass a cluster of their own (tests/support/real_cluster.py), driven by the same
simulated kubelet through the API (tests/support/doubles/apiserver_node.py). A cluster with a real node
(tests/support/node_stack.py) has no pod host: its own kubelet runs the pods and their agents, which reach the
simulated server's agent API over loopback, so no simulated kubelet runs. Integration tests and the demo use
it; the backend can be restarted (a new process would lose exactly what this loses: memory, not pods).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from elastic_agent.backend import Backend, ClusterFactory
from elastic_agent.clock import Clock, ScaledClock
from elastic_agent.service.wsgi import RunningService, build_backend, kubernetes_cluster, serve_in_background
from elastic_agent.simulation.agent_processes import AgentCommand, ProcessAgentHost
from elastic_agent.simulation.agents import AgentHost
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.gocd_agent_api import AgentApiServer
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, SimulatedGoCD
from elastic_agent.simulation.gocd_transport import HttpPluginTransport
from elastic_agent.simulation.kubelet import FaultPolicy, PodHost, SimulatedKubelet

TOKEN = "stack-token-not-a-secret"


class SwitchableTransport:
    """Lets the GoCD model exist before the callback server and survive backend restarts."""

    def __init__(self) -> None:
        self.target: HttpPluginTransport | None = None
        self._lock = threading.Lock()

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        with self._lock:
            target = self.target
        if target is None:
            return 503, "backend not running"
        return target.send(request_name, body)

    def switch(self, target: HttpPluginTransport | None) -> None:
        with self._lock:
            old, self.target = self.target, target
        if old is not None:
            old.close()


class ApiServerUnderTest(Protocol):
    """A Kubernetes API server for the stack: where it is, the credentials of a cluster profile for it,
    and its pods as plain objects."""

    url: str

    def profile_properties(self) -> dict[str, str]:
        """`kubernetes_cluster_url` and the credentials (`security_token`, `kubernetes_cluster_ca_cert`)."""

    def list_pods(self, namespace: str) -> list[dict[str, Any]]: ...

    def stop(self) -> None: ...


@runtime_checkable
class ClusterUnderTest(ApiServerUnderTest, Protocol):
    """An API server without a kubelet of its own: `pod_host` is what the simulated kubelet drives."""

    pod_host: PodHost


class FakeCluster:
    """The project's fake API server (fake_kube.py), over real HTTP."""

    def __init__(self, clock: Clock) -> None:
        self.server = FakeKubeServer(clock=clock)
        self.url = self.server.start()
        self.pod_host: PodHost = self.server.store

    def profile_properties(self) -> dict[str, str]:
        return {"kubernetes_cluster_url": self.url, "security_token": "cluster-token"}

    def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        pods, _ = self.pod_host.list_pods(namespace)
        return pods

    def stop(self) -> None:
        self.server.stop()


@dataclass
class StackOptions:
    boot_delay: float | Callable[..., float] = 2.0
    gocd: GoCDConfig = field(default_factory=GoCDConfig)
    namespace: str = "default"
    start_gocd: bool = True
    # How the backend builds its Kubernetes client: the product's own unless a test observes the calls.
    cluster_factory: ClusterFactory = kubernetes_cluster
    faults: FaultPolicy | None = None  # what goes wrong with which pod (kubelet.PodFault)
    # Each started pod runs the stand-in agent as a process that talks to the agent API over HTTP (these
    # variables added to its environment), instead of the in-process agent of the simulated server.
    agent_processes: dict[str, str] | None = None
    # What runs each agent process (the tests' tests/support/doubles/standin_agent.standin_command, or an
    # image's container): required with agent_processes, since the demo ships no agent to run.
    agent_command: AgentCommand | None = None
    # Serve the agent API on loopback without agent processes: a real node's pods run the agents.
    agent_api: bool = False


class Stack:
    def __init__(
        self, clock: Clock, options: StackOptions | None = None, cluster: ApiServerUnderTest | None = None
    ) -> None:
        self.clock = clock
        self.options = options or StackOptions()
        self.cluster: ApiServerUnderTest = cluster if cluster is not None else FakeCluster(clock)
        self.transport = SwitchableTransport()
        self.gocd = SimulatedGoCD(clock, self.transport, self.options.gocd)
        self.callbacks = CallbackServer(self.gocd, TOKEN)
        self.callback_url = self.callbacks.start()
        self.agent_api: AgentApiServer | None = None
        self.agent_processes: ProcessAgentHost | None = None
        host: AgentHost = self.gocd
        if self.options.agent_processes is not None or self.options.agent_api:
            time_scale = clock.factor if isinstance(clock, ScaledClock) else 1.0
            self.agent_api = AgentApiServer(self.gocd, time_scale=time_scale)
            api_url = self.agent_api.start()
            if self.options.agent_processes is not None:
                if self.options.agent_command is None:
                    raise ValueError("agent_processes needs an agent_command: what runs each agent")
                self.agent_processes = ProcessAgentHost(
                    api_url, self.options.agent_processes, self.options.agent_command
                )
                host = self.agent_processes
        self._kubelet: SimulatedKubelet | None = None
        if isinstance(self.cluster, ClusterUnderTest):
            self._kubelet = SimulatedKubelet(
                self.cluster.pod_host,
                clock,
                host,
                boot_delay=self.options.boot_delay,
                faults=self.options.faults,
            )
        if self._kubelet is not None and self.agent_processes is not None:
            self.agent_processes.on_exit = self._kubelet.agent_exited
        self.service: RunningService | None = None
        self.start_backend()
        if self._kubelet is not None:
            self._kubelet.start()
        if self.options.start_gocd:
            self.gocd.start()

    @property
    def kube(self) -> FakeKubeServer:
        """The fake API server, for its fault injection (a stack on a real server has none)."""
        if not isinstance(self.cluster, FakeCluster):
            raise TypeError("this stack runs on a real API server: it has no fake to inject faults into")
        return self.cluster.server

    @property
    def kubelet(self) -> SimulatedKubelet:
        """The simulated kubelet, for its faults (a stack on a real node has the real one instead)."""
        if self._kubelet is None:
            raise TypeError("this stack runs on a real node: its pods are run by a real kubelet")
        return self._kubelet

    @property
    def backend(self) -> Backend:
        assert self.service is not None
        return self.service.backend

    def start_backend(self) -> None:
        backend = build_backend(TOKEN, self.callback_url, self.clock, self.options.cluster_factory)
        self.service = serve_in_background(backend, TOKEN)
        self.transport.switch(HttpPluginTransport(self.service.url, TOKEN, self.callback_url))

    def stop_backend(self) -> None:
        """As on SIGTERM: answers stop after those in flight, queued pod states are written, memory is
        gone, pods stay."""
        self.transport.switch(None)
        if self.service is not None:
            self.service.stop()
            self.service = None

    def restart_backend(self) -> None:
        self.stop_backend()
        self.start_backend()

    def cluster_profile(self, **overrides: str) -> dict[str, str]:
        profile = {
            "go_server_url": "https://gocd.example.test/go",
            **self.cluster.profile_properties(),
            "namespace": self.options.namespace,
            "pending_pods_count": "10",
            "auto_register_timeout": "10m",
        }
        profile.update(overrides)
        return profile

    @staticmethod
    def elastic_profile(**overrides: str) -> dict[str, str]:
        profile = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties"}
        profile.update(overrides)
        return profile

    def pods(self) -> list[dict[str, Any]]:
        return self.cluster.list_pods(self.options.namespace)

    def stop(self) -> None:
        self.gocd.stop()
        if self._kubelet is not None:
            self._kubelet.stop()
        if self.agent_processes is not None:
            self.agent_processes.stop()
        if self.agent_api is not None:
            self.agent_api.stop()
        self.stop_backend()
        self.callbacks.stop()
        self.cluster.stop()
