"""Agents without pods: which of this plugin's agents server-ping removes from GoCD, and which it keeps.

GoCD lists every agent of the plugin, across all cluster profiles (`list-agents`); the pools know the
pods of the profiles that exist now. An agent none of them shows is either the leftover of a pod that is
gone, which must go from GoCD, or the agent of a pod that runs where no pool looks: a cluster profile
deleted, or edited to name another cluster or namespace, while this backend was down (before a restart
the orphaned pool still knows its pods, and retires them with their agents: reaping.orphaned).
Removing the second kind would leave a pod that builds for GoCD and that nobody will ever delete, its
agent unable to register again (its key is spent). So an agent goes only on evidence that its pod is
gone:
- a pool saw the pod deleted (gone.py), or
- GoCD has not heard from the agent for its contact timeout: `LostContact`, which GoCD sets in
  `AgentInstance.refresh` (server/src/main/java/com/thoughtworks/go/domain/AgentInstance.java) once
  `isTimeout(lastHeardTime)`; an agent not heard from since the server started is `Missing` first and
  becomes `LostContact` the same way, so `Missing` alone is no evidence.
The others are kept, and named in a health message that says what to do.

Pure: the executor (executors/server_ping.py) asks, the applier (applier.remove_agents) does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from elastic_agent.gocd.messages import Agent

LOST_CONTACT = "LostContact"  # an agent_state of list-agents
NAMED_AT_MOST = 10  # agents named in the health message; the rest are counted


@dataclass(frozen=True)
class AgentRemoval:
    remove: tuple[Agent, ...] = ()  # disabled; deleted once not building
    kept: tuple[str, ...] = ()  # no evidence their pods are gone

    def warning(self) -> str | None:
        """The health message for the agents kept, None when there are none."""
        if not self.kept:
            return None
        named = ", ".join(self.kept[:NAMED_AT_MOST])
        more = len(self.kept) - NAMED_AT_MOST
        if more > 0:
            named += f" and {more} more"
        return (
            f"{len(self.kept)} agent(s) of this plugin have no pod in the namespace of any of its cluster "
            f"profiles, and are kept: {named}. Their pods may still run in a cluster or namespace whose "
            "cluster profile was deleted or changed; delete those pods there (the pods carry the label "
            "reuse.gocd.org/plugin-id), and once GoCD lists their agents as LostContact this plugin "
            "removes them."
        )


def agents_without_pods(
    agents: Mapping[str, Agent], known_pods: Collection[str], gone: Collection[str]
) -> AgentRemoval:
    """`known_pods`: the pods the pools show; `gone`: the pods they saw deleted recently."""
    remove: list[Agent] = []
    kept: list[str] = []
    for agent_id, agent in agents.items():
        if agent_id in known_pods:
            continue
        if agent_id in gone or agent.agent_state == LOST_CONTACT:
            remove.append(agent)
        else:
            kept.append(agent_id)
    return AgentRemoval(tuple(remove), tuple(sorted(kept)))
