"""The seam between the simulated cluster and the simulated GoCD server.

The simulated kubelet starts a pod's containers; an official gocd-agent container would then read its
GO_EA_* variables and register with the GoCD server. Here the kubelet calls an AgentHost instead: the
simulated GoCD server (an in-process agent), or agent_processes.ProcessAgentHost (the stand-in agent as
a process, registering over HTTP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

Console = Callable[[str], None]  # writes one line to the container's output: the pod's log


class AgentHost(Protocol):
    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        """The agent container of `pod_name` is running with environment `env` (it holds the GO_EA_*
        variables: GO_EA_SERVER_URL, GO_EA_AUTO_REGISTER_KEY, GO_EA_AUTO_REGISTER_ENVIRONMENT,
        GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID, GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID); what the agent
        writes to its console goes to `console`, the pod's log, as a container runtime's does."""

    def agent_stopped(self, pod_name: str) -> None:
        """The pod's agent process is gone (pod deleted, failed or evicted)."""


class NoAgents:
    """An AgentHost for tests of the cluster alone."""

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        pass

    def agent_stopped(self, pod_name: str) -> None:
        pass
