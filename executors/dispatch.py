"""The dispatch table: one executor per GoCD request name."""

from __future__ import annotations

from executors import agent_lifecycle, cluster_profile_changed, profile_requests, server_ping, simple, status
from executors.base import Executor

PREFIX = "cd.go.elastic-agent."

EXECUTORS: dict[str, Executor] = {
    PREFIX + "get-icon": simple.get_icon,
    PREFIX + "get-capabilities": simple.get_capabilities,
    PREFIX + "migrate-config": profile_requests.migrate_config,
    PREFIX + "get-cluster-profile-metadata": profile_requests.cluster_profile_metadata,
    PREFIX + "get-cluster-profile-view": profile_requests.cluster_profile_view,
    PREFIX + "validate-cluster-profile": profile_requests.validate_cluster_profile,
    PREFIX + "get-elastic-agent-profile-metadata": profile_requests.elastic_profile_metadata,
    PREFIX + "get-elastic-agent-profile-view": profile_requests.elastic_profile_view,
    PREFIX + "validate-elastic-agent-profile": profile_requests.validate_elastic_profile,
    PREFIX + "create-agent": agent_lifecycle.create_agent,
    PREFIX + "should-assign-work": agent_lifecycle.should_assign_work,
    PREFIX + "job-completion": agent_lifecycle.job_completion,
    PREFIX + "server-ping": server_ping.server_ping,
    PREFIX + "cluster-profile-changed": cluster_profile_changed.cluster_profile_changed,
    PREFIX + "cluster-status-report": status.cluster_status_report,
    PREFIX + "agent-status-report": status.agent_status_report,
    PREFIX + "plugin-status-report": status.plugin_status_report,
    "go.plugin-settings.get-configuration": simple.plugin_settings_configuration,
    "go.plugin-settings.get-view": simple.plugin_settings_view,
}


def executor_for(request_name: str) -> Executor | None:
    return EXECUTORS.get(request_name)


# The requests whose executor never waits on the network (no Kubernetes API call, no call into GoCD, no
# remote pod template fetched; only locks that are never held across such a call): the service answers
# them on its server's own thread. Every other request runs on a handler thread that stopping can give up
# on (elastic_agent/service/in_flight.py says why, and why not every request: the hand-over costs).
FROM_MEMORY: frozenset[str] = frozenset(
    {
        PREFIX + "should-assign-work",
        PREFIX + "job-completion",
        PREFIX + "get-icon",
        PREFIX + "get-capabilities",
        PREFIX + "get-cluster-profile-metadata",
        PREFIX + "get-cluster-profile-view",
        PREFIX + "get-elastic-agent-profile-metadata",
        PREFIX + "get-elastic-agent-profile-view",
        "go.plugin-settings.get-configuration",
        "go.plugin-settings.get-view",
    }
)
