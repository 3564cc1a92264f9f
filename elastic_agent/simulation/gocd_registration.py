"""GoCD's words about an elastic agent's registration, as the simulated server answers and the simulated
agent logs them.

The server (gocd/gocd server/src/main/java/com/thoughtworks/go/server/controller/
AgentRegistrationController.java, `agentRequest`): an elastic agent's key goes through
`EphemeralAutoRegisterKeyService.validateAndRevoke` only (`shouldAutoRegister`), one `remove` from an
in-memory cache built with `expireAfterWrite` of `gocd.ephemeral.auto.register.key.expiry.millis`. A key
that is unknown, spent or expired fails it alike, and the answer, 422 UNPROCESSABLE_ENTITY, names the key
as the agent sent it; a registration whose elastic agent id is registered already is refused after the
key was spent, with "Duplicate Elastic agent Id used to register elastic agent.".

The agent (agent/src/main/java/com/thoughtworks/go/agent/service/SslInfrastructureService.java,
`RemoteRegistrationRequester.requestRegistration`): a 422 is logged at ERROR with the body, and
`register` tries again 5 s later with the same key. The official images log to the console with
logback's pattern `%date{ISO8601} %-5level [%thread] %logger{0}:%line - %msg%n` (gocd-docker-agent's
agent-logback-include.xml; the JVM's zone is UTC there). The logger is the class's, the line number the
`LOGGER.error` call's in that file at the commit read (f17b6f3fc9fc); the thread is the agent's work loop,
run by its Spring task scheduler named `scheduler` (applicationContext.xml), whose threads are
`scheduler-<n>`: which n it is was not checked.
"""

from __future__ import annotations

from datetime import UTC, datetime

# The model's reasons for a refusal (gocd_model.SimulatedGoCD._registration_refusal), which the
# invariants name apart; GoCD's answer is the same for the three of a key.
UNKNOWN_KEY = "unknown auto-register key"
SPENT_KEY = "auto-register key already used"
EXPIRED_KEY = "auto-register key expired"
KEY_REASONS = frozenset({UNKNOWN_KEY, SPENT_KEY, EXPIRED_KEY})
DUPLICATE_REASON = "an agent with this elastic agent id and plugin id is already registered"
REFUSED_PREFIX = "[Agent Registration] Error occurred during agent registration process: "
LOGGER_AT = "SslInfrastructureService:159"
REGISTER_RETRY_S = 5.0  # SslInfrastructureService.REGISTER_RETRY_INTERVAL: a refused agent asks again
THREAD = "scheduler-1"


def registration_answer(reason: str, key: str, agent_id: str, plugin_id: str) -> str:
    """The body of GoCD's 422 for a refusal the model explains as `reason` (gocd_model's)."""
    if reason in KEY_REASONS:
        return (
            "Elastic agent registration requires an auto-register agent key to be setup on the server. "
            f"The agentAutoRegisterKey: [{key}] is either not provided or expired. Agent-id: [{agent_id}], "
            f"Plugin-id: [{plugin_id}]"
        )
    if reason == DUPLICATE_REASON:
        return "Duplicate Elastic agent Id used to register elastic agent."
    # Not GoCD's own words: the model's reasons the real server has no message of its own for.
    return f"Error occurred during agent registration process: {reason}"


def refusal_log_line(at: float, body: str) -> str:
    """The line an agent writes to its console when GoCD answers its registration 422 with `body`."""
    date = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return f"{date} ERROR [{THREAD}] {LOGGER_AT} - {REFUSED_PREFIX}{body}"
