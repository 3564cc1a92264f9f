"""The simulated GoCD server seen from outside: the calls a plugin makes back into GoCD (answered for
gocd_callbacks.ServerApi) and the queries of tests and benchmarks, each under the server's state lock.
A mixin of SimulatedGoCD (gocd_model.py), which owns the state; the attributes below are its."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from elastic_agent.simulation.gocd_records import (
    Agent,
    AgentState,
    Assignment,
    ConfigState,
    GoCDConfig,
    GoCDStats,
    HealthMessage,
    Job,
    RegistrationAttempt,
    RegistrationKey,
)
from elastic_agent.simulation.gocd_timing import EPSILON_S

ConsoleKey = tuple[str, str, str, str, str]  # pipeline, pipeline counter, stage, stage counter, job


class ServerSide:
    config: GoCDConfig
    stats: GoCDStats
    assignments: list[Assignment]
    refusals: list[RegistrationAttempt]
    health_messages: list[HealthMessage]
    orphan_console: dict[ConsoleKey, list[str]]
    _state_lock: threading.RLock
    _jobs: dict[int, Job]
    _job_by_identifier: dict[ConsoleKey, int]
    _agents: dict[str, Agent]
    _agent_by_pod: dict[str, str]
    _keys: dict[str, RegistrationKey]

    # ---- calls from the plugin -------------------------------------------------------------------

    def list_agents(self) -> list[dict[str, str]]:
        with self._state_lock:
            return [a.status() for a in self._agents.values() if a.plugin_id == self.config.plugin_id]

    def list_agents_json(self) -> str:
        """`list_agents()` as the compact JSON GoCD answers with, from each agent's encoded status (the
        plugin lists every agent at each ping, and again before it deletes any)."""
        with self._state_lock:
            plugin_id = self.config.plugin_id
            return f"[{','.join(a.status_text() for a in self._agents.values() if a.plugin_id == plugin_id)}]"

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        with self._state_lock:
            for agent_id in agent_ids:
                agent = self._agents.get(agent_id)
                if agent is not None:
                    agent.config_state = ConfigState.DISABLED

    def delete_agents(self, agent_ids: Iterable[str]) -> list[str]:
        """Delete agents that are disabled and not building; leave every other agent in place."""
        deleted: list[str] = []
        with self._state_lock:
            for agent_id in agent_ids:
                agent = self._agents.get(agent_id)
                if agent is None:
                    continue
                if agent.agent_state is AgentState.BUILDING:
                    self.stats.deleted_while_building.append(agent_id)
                    continue
                if agent.config_state is not ConfigState.DISABLED:
                    self.stats.delete_refused_enabled += 1
                    continue
                if agent.process_alive:
                    # Allowed, but the running agent's next calls fail: the shutdown order is pod first.
                    self.stats.deleted_with_live_process += 1
                del self._agents[agent_id]
                self._agent_by_pod.pop(agent.pod_name, None)
                deleted.append(agent_id)
        return deleted

    def server_info(self) -> dict[str, str]:
        config = self.config
        return {
            "server_id": config.server_id,
            "site_url": config.site_url,
            "secure_site_url": config.secure_site_url,
        }

    def forget_keys(self) -> None:
        """What a restart of GoCD does to its registration keys: `EphemeralAutoRegisterKeyService` keeps
        them in memory only, so every key issued before is unknown afterwards."""
        with self._state_lock:
            self._keys.clear()

    def replace_health_messages(self, messages: list[HealthMessage]) -> None:
        with self._state_lock:
            self.health_messages = list(messages)

    def append_console(self, key: ConsoleKey, text: str) -> bool:
        """Append to the console of the latest run of the job named by (pipeline, pipeline counter, stage,
        stage counter, job). Unknown jobs are kept aside and reported as False."""
        with self._state_lock:
            job = self._jobs.get(self._job_by_identifier.get(key, -1))
            if job is None:
                self.orphan_console.setdefault(key, []).append(text)
                return False
            job.console.append(text)
            return True

    # ---- queries for tests and benchmarks --------------------------------------------------------

    def job(self, job_id: int) -> Job:
        with self._state_lock:
            return self._jobs[job_id]

    def jobs(self) -> list[Job]:
        with self._state_lock:
            return list(self._jobs.values())

    def agent(self, agent_id: str) -> Agent | None:
        with self._state_lock:
            return self._agents.get(agent_id)

    def agents(self) -> list[Agent]:
        with self._state_lock:
            return list(self._agents.values())

    def keys_issued_for(self, job_id: int) -> list[str]:
        """The keys the job's create-agent calls carried, in the order they were issued."""
        with self._state_lock:
            issued = sorted(self._keys.values(), key=lambda k: k.issued_at)
            return [k.key for k in issued if k.job_id == job_id]

    def registration_key(self, key: str) -> RegistrationKey | None:
        with self._state_lock:
            return self._keys.get(key)

    def wait_times(self) -> dict[int, float]:
        """Seconds from scheduling to assignment, for every assigned job."""
        with self._state_lock:
            return {j.job_id: j.wait_s for j in self._jobs.values() if j.wait_s is not None}

    def invariant_violations(self) -> list[str]:
        """Jobs assigned twice, agents running two jobs at once, registrations refused (a pod with a spent,
        expired or unknown key never becomes an agent: a key went into two pods, or waited too long),
        and everything recorded on the way."""
        with self._state_lock:
            problems = list(self.stats.invariant_violations)
            problems += [f"agent {a} deleted while building" for a in self.stats.deleted_while_building]
            problems += [f"registration of pod {r.pod_name} refused: {r.reason}" for r in self.refusals]
            seen: set[int] = set()
            busy_until: dict[str, float] = {}
            for assignment in sorted(self.assignments, key=lambda a: (a.assigned_at, a.job_id)):
                if assignment.job_id in seen:
                    problems.append(f"job {assignment.job_id} assigned twice")
                seen.add(assignment.job_id)
                if busy_until.get(assignment.agent_id, float("-inf")) > assignment.assigned_at + EPSILON_S:
                    problems.append(f"agent {assignment.agent_id} ran two jobs at once")
                end = assignment.finished_at if assignment.finished_at is not None else float("inf")
                busy_until[assignment.agent_id] = end
            return problems
