"""The simulated GoCD server's agent registry: the registered agents, their states, and when the server
notices that one went silent.

GoCD knows an elastic agent by the elastic agent id it registered with; the plugin lists, disables and deletes
agents by that id (its calls to the server, answered for gocd_callbacks.ServerApi). An agent whose process is
gone stops its heartbeats, and the server marks it LostContact only `lost_contact_after_s` after the last one
(`AgentInstance.refreshStatus`), or at once with `immediate_lost_contact`. A remote agent (gocd_agent_api.py)
is always due to be lost at its latest ping's deadline. What a LostContact does to the agent's job is in
gocd_lost_contact.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from elastic_agent.simulation.gocd_records import Agent, AgentState, ConfigState, ServerCore
from elastic_agent.simulation.gocd_timing import TimedQueue


class AgentRegistry:
    def __init__(self, core: ServerCore) -> None:
        """The server's state lock is taken by the calls from outside (the plugin's, tests')."""
        self._config = core.config
        self._lock = core.lock
        self._stats = core.stats
        self.agents: dict[str, Agent] = {}
        self._by_pod: dict[str, str] = {}
        self.silences: TimedQueue[str] = TimedQueue(self._silence_is_current)  # agent ids

    def add(self, agent: Agent) -> None:
        self.agents[agent.agent_id] = agent
        self._by_pod[agent.pod_name] = agent.agent_id

    def by_pod(self, pod_name: str) -> Agent | None:
        return self.agents.get(self._by_pod.get(pod_name, ""))

    # ---- the plugin's calls and tests' queries --------------------------------------------------

    def get(self, agent_id: str) -> Agent | None:
        with self._lock:
            return self.agents.get(agent_id)

    def all(self) -> list[Agent]:
        with self._lock:
            return list(self.agents.values())

    def list_agents(self) -> list[dict[str, str]]:
        with self._lock:
            return [a.status() for a in self.agents.values() if a.plugin_id == self._config.plugin_id]

    def list_agents_json(self) -> str:
        """`list_agents()` as the compact JSON GoCD answers with, from each agent's encoded status (the
        plugin lists every agent at each ping, and again before it deletes any)."""
        with self._lock:
            plugin_id = self._config.plugin_id
            return f"[{','.join(a.status_text() for a in self.agents.values() if a.plugin_id == plugin_id)}]"

    def disable(self, agent_ids: Iterable[str]) -> None:
        with self._lock:
            for agent_id in agent_ids:
                agent = self.agents.get(agent_id)
                if agent is not None:
                    agent.config_state = ConfigState.DISABLED

    def delete(self, agent_ids: Iterable[str]) -> list[str]:
        """Delete agents that are disabled and not building; leave every other agent in place."""
        with self._lock:
            return self._delete(agent_ids)

    def _delete(self, agent_ids: Iterable[str]) -> list[str]:
        deleted: list[str] = []
        for agent_id in agent_ids:
            agent = self.agents.get(agent_id)
            if agent is None:
                continue
            if agent.agent_state is AgentState.BUILDING:
                self._stats.deleted_while_building.append(agent_id)
                continue
            if agent.config_state is not ConfigState.DISABLED:
                self._stats.delete_refused_enabled += 1
                continue
            if agent.process_alive:
                # Allowed, but the running agent's next calls fail: the shutdown order is pod first.
                self._stats.deleted_with_live_process += 1
            del self.agents[agent_id]
            self._by_pod.pop(agent.pod_name, None)
            deleted.append(agent_id)
        return deleted

    # ---- liveness --------------------------------------------------------------------------------

    def heard(self, agent_id: str, now: float) -> bool:
        """A remote agent called: it is lost `lost_contact_after_s` from now unless it calls again. False
        for an agent the server does not know (deleted, or never registered) or already lost."""
        agent = self.agents.get(agent_id)
        if agent is None or not agent.remote or not agent.lost_contact_pending:
            return False
        agent.lost_contact_at = now + self._config.lost_contact_after_s
        self.silences.push(agent.lost_contact_at, agent_id)
        return True

    def process_ended(self, pod_name: str, now: float) -> Agent | None:
        """The pod's agent process is gone: its heartbeats stop. The agent to mark LostContact now (with
        `immediate_lost_contact`), else None (it is marked when its silence is due: `silent`)."""
        agent = self.by_pod(pod_name)
        if agent is None or not agent.process_alive:
            return None
        agent.process_alive = False
        delay = 0.0 if self._config.immediate_lost_contact else self._config.lost_contact_after_s
        agent.lost_contact_at = now + delay
        if delay == 0.0:
            return agent
        self.silences.push(agent.lost_contact_at, agent.agent_id)
        return None

    def silent(self, now: float) -> list[Agent]:
        """The agents whose silence the server notices at `now`, to be marked LostContact."""
        return [self.agents[agent_id] for agent_id in self.silences.pop_due(now)]

    def _silence_is_current(self, at: float, agent_id: str) -> bool:
        agent = self.agents.get(agent_id)
        return agent is not None and agent.lost_contact_pending and agent.lost_contact_at == at

    @staticmethod
    def mark_lost(agent: Agent) -> int | None:
        """The agent is LostContact; the id of the job it was running, if any (no longer its)."""
        agent.agent_state = AgentState.LOST_CONTACT
        job_id, agent.running_job_id = agent.running_job_id, None
        return job_id
