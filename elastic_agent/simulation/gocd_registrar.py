"""The simulated GoCD server's agent registration: who may register, and the refused agents that ask again.

Modelled on gocd/gocd's `AgentRegistrationController.agentRequest`: an elastic agent's key is validated
and revoked first (`shouldAutoRegister` -> `EphemeralAutoRegisterKeyService.validateAndRevoke`:
gocd_keys.py), and only then are the ids checked, so a registration refused for a duplicate elastic agent
id has spent its key all the same. A refused in-process agent writes GoCD's answer to its console as the
real agent does (gocd_registration.py has the words) and asks again every REGISTER_RETRY_S with the same
key (`SslInfrastructureService.register`) until its pod stops: it never registers. The same rules hold
for an agent that is a process of its own (gocd_agent_api.py). Every attempt is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from elastic_agent.simulation.agents import Console
from elastic_agent.simulation.gocd_keys import RegistrationKeys
from elastic_agent.simulation.gocd_records import (
    ENV_AGENT_ID,
    ENV_ENVIRONMENT,
    ENV_KEY,
    ENV_PLUGIN_ID,
    ENV_SERVER_URL,
    Agent,
    RegistrationAttempt,
    ServerCore,
)
from elastic_agent.simulation.gocd_registration import (
    DUPLICATE_REASON,
    REGISTER_RETRY_S,
    refusal_log_line,
    registration_answer,
)
from elastic_agent.simulation.gocd_timing import TimedQueue


class Registrar:
    def __init__(
        self,
        core: ServerCore,
        keys: RegistrationKeys,
        agents: dict[str, Agent],
        on_registered: Callable[[Agent, float], None],
    ) -> None:
        """`agents`: the registry's, which a registered agent joins; `on_registered(agent, now)`: what the
        server does next for it (its first poll, or its first ping deadline when remote)."""
        self._clock = core.clock
        self._lock = core.lock
        self._config = core.config
        self._stats = core.stats
        self._keys = keys
        self._agents = agents
        self._on_registered = on_registered
        self.registrations: list[RegistrationAttempt] = []
        self.refusals: list[RegistrationAttempt] = []
        # Refused in-process agents, which ask again every REGISTER_RETRY_S: pod -> (next try, env, console).
        self._retrying: dict[str, tuple[float, Mapping[str, str], Console]] = {}
        self.retries: TimedQueue[str] = TimedQueue(self._retry_is_current)  # pod names

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None) -> None:
        """The in-process agent registers at once; refused, it logs the answer and asks again every
        REGISTER_RETRY_S. A retry after a refusal for another cause than the key is told the key "is
        either not provided or expired": the first try spent it."""
        attempt = self._register_from(pod_name, env, retry=False)
        if attempt.status == 422 and console is not None:
            console(refusal_log_line(attempt.at, attempt.answer))
            self._retrying[pod_name] = (attempt.at + REGISTER_RETRY_S, env, console)
            self.retries.push(attempt.at + REGISTER_RETRY_S, pod_name)

    def agent_stopped(self, pod_name: str) -> None:
        """A refused agent's pod stopped: it asks no more."""
        self._retrying.pop(pod_name, None)

    def _register_from(self, pod_name: str, env: Mapping[str, str], *, retry: bool) -> RegistrationAttempt:
        environments = frozenset(e.strip() for e in env.get(ENV_ENVIRONMENT, "").split(",") if e.strip())
        agent_id, plugin_id, key = env.get(ENV_AGENT_ID, ""), env.get(ENV_PLUGIN_ID, ""), env.get(ENV_KEY, "")
        server_url = env.get(ENV_SERVER_URL, "")
        return self.register(pod_name, agent_id, plugin_id, key, environments, server_url, retry=retry)

    def run_retries(self) -> None:
        """The refused agents whose next try is due ask again."""
        with self._lock:
            due = self.retries.pop_due(self._clock.now())
        for pod_name in due:
            retrying = self._retrying.pop(pod_name, None)
            if retrying is None:
                continue
            _, env, console = retrying
            attempt = self._register_from(pod_name, env, retry=True)
            if attempt.status == 422:
                console(refusal_log_line(attempt.at, attempt.answer))
                self._retrying[pod_name] = (attempt.at + REGISTER_RETRY_S, env, console)
                self.retries.push(attempt.at + REGISTER_RETRY_S, pod_name)

    def _retry_is_current(self, at: float, pod_name: str) -> bool:
        retrying = self._retrying.get(pod_name)
        return retrying is not None and retrying[0] == at

    def register(
        self,
        pod_name: str,
        agent_id: str,
        plugin_id: str,
        key: str,
        environments: frozenset[str],
        server_url: str,
        *,
        remote: bool = False,
        retry: bool = False,
    ) -> RegistrationAttempt:
        """An elastic agent asks to be registered. `retry`: the same agent asks again after a refusal; a
        refusal then is not counted again (`refusals` and the stats count agents refused)."""
        now = self._clock.now()
        with self._lock:
            reason = self._refusal(agent_id, plugin_id, server_url, key, now)
            status = 422 if reason else 200
            answer = registration_answer(reason, key, agent_id, plugin_id) if reason else ""
            attempt = RegistrationAttempt(now, pod_name, agent_id, key, environments, status, reason, answer)
            if reason:
                if not retry:
                    self.refusals.append(attempt)
                    self._stats.registrations_refused += 1
                return attempt
            self.registrations.append(attempt)
            self._stats.registrations_accepted += 1
            agent = Agent(agent_id, pod_name, plugin_id, environments, now)
            agent.remote = remote
            self._on_registered(agent, now)
            return attempt

    def _refusal(self, agent_id: str, plugin_id: str, server_url: str, key: str, now: float) -> str | None:
        """Why the server refuses the registration, or None: the key is spent before the ids are checked."""
        if not server_url.rstrip("/").endswith("/go"):
            return "the agent has no server URL ending in /go"  # it never reaches the server
        if not agent_id or not plugin_id:
            return "the elastic agent id and the plugin id are both required"
        key_refused = self._keys.validate_and_revoke(key, agent_id, now)
        if key_refused is not None:
            return key_refused
        if plugin_id != self._config.plugin_id:
            return f"no elastic agent plugin with id {plugin_id}"
        if agent_id in self._agents:
            return DUPLICATE_REASON
        return None
