"""GoCD refusing an agent's registration key, read from the agent's log, and what server-ping does then.

A pod whose key GoCD no longer knows never registers: its agent asks again every five seconds, refused
each time, until `auto_register_timeout` ends the pod. GoCD's keys expire after its
`gocd.ephemeral.auto.register.key.expiry.millis`, so a cluster profile that says they live longer
(`auto_register_key_expiry`) puts keys into pods that GoCD has dropped. What GoCD and its agent say then
(gocd/gocd):
- server, `AgentRegistrationController.agentRequest`: an elastic agent's key goes through
  `EphemeralAutoRegisterKeyService.validateAndRevoke` only (`shouldAutoRegister`), and an unknown, spent
  or expired key is answered 422 with "Elastic agent registration requires an auto-register agent key
  to be setup on the server. The agentAutoRegisterKey: [<key>] is either not provided or expired.
  Agent-id: [<id>], Plugin-id: [<plugin>]";
- agent, `SslInfrastructureService.RemoteRegistrationRequester.requestRegistration`: a 422 is logged at
  ERROR, "[Agent Registration] Error occurred during agent registration process: <body>", and
  `SslInfrastructureService.register` asks again 5 s later (REGISTER_RETRY_INTERVAL) with the same key.
  The agent images log to the console (gocd-docker-agent's agent-logback-include.xml): the pod's log.

At each server-ping the last lines of the log of every pod that runs and whose agent has not registered
(GoCD does not list it) are read: at most `pending_pods_count` pods, outside the pool's lock. A pod found
refused is deleted (retired in the usual order). When its key was issued after GoCD last started (a
restart of GoCD forgets every key it issued: keys.py), the bank drops every key as old or older, and the
refused key's age bounds the keys used from then on, until the profile changes (key_lifetime.py); the
ping tells GoCD's health messages (pool/key_health.py). The line echoes the key: only the line with the
key hidden is kept, logged or shown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping

from elastic_agent.kube.port import ClusterError
from elastic_agent.pool import labels, marks
from elastic_agent.pool.broken_pods import job_from
from elastic_agent.pool.intents import NOTHING, Intent, KeyRefused, Plan, Say
from elastic_agent.pool.key_lifetime import Refusal
from elastic_agent.pool.records import PodState
from elastic_agent.pool.state import PoolState
from elastic_agent.redaction import HIDDEN, redact
from profiles.quantities import format_duration

log = logging.getLogger(__name__)

REFUSED = "[Agent Registration] Error occurred during agent registration process:"
NOT_KNOWN = "is either not provided or expired"
LOG_LINES = 50  # the agent repeats the line every 5 s and logs nothing else meanwhile
# GoCD's `[%s]` around the key: up to the words that follow it, whatever the key holds.
_ECHOED_KEY = re.compile(r"(agentAutoRegisterKey: \[).*(\] is either not provided or expired)")


def refusal_in(log_text: str) -> str | None:
    """GoCD's answer in the latest refusal of an unknown or expired key that the log shows, with the key
    hidden; None when there is none."""
    for line in reversed(log_text.splitlines()):
        if REFUSED in line and NOT_KNOWN in line:
            answer = line[line.index(REFUSED) + len(REFUSED) :].strip()
            return redact(_ECHOED_KEY.sub(rf"\g<1>{HIDDEN}\g<2>", answer))
    return None


def read(state: PoolState, agents: Collection[str]) -> dict[str, str]:
    """Pod -> GoCD's answer (key hidden), for the pods whose agents GoCD refused: the logs of the pods
    that run and have not registered (`agents`: GoCD's list) are read after the lock is let go. A
    refusal learned under a profile that has changed since is forgotten first."""
    with state.lock:
        state.key_lifetime.forget_unless(state.settings)
        port, view = state.port, state.indexed()
        to_read: list[tuple[str, str | None]] = []
        for record in view.pending_registration():
            pod = port.get(record.name)
            if record.name in agents or state.deleted_by_us(record.name) or pod is None:
                continue
            if pod.phase == "Running" and not pod.deleting:
                to_read.append((record.name, pod.containers[0] if pod.containers else None))
    found: dict[str, str] = {}
    for name, container in to_read:
        try:
            answer = refusal_in(port.pod_log(name, tail_lines=LOG_LINES, container=container))
        except ClusterError as error:  # the RBAC may lack pods/log, the API may be away: the next ping
            log.debug("could not read the log of pod %s: %s", name, redact(str(error)))
            continue
        if answer is not None:
            found[name] = answer
    return found


def ping_plan(state: PoolState, found: Mapping[str, str], now: float) -> Plan:
    """For each pod `read` found refused that still waits for its agent: the refusal (what it teaches of
    the keys' lifetime), the pod marked retiring, and a line for the log and its job's console."""
    if not found:
        return NOTHING
    view, port, settings = state.indexed(), state.port, state.settings
    started = state.keys.started_at
    intents: list[Intent] = []
    for name, answer in found.items():
        record, pod = view.by_name.get(name), port.get(name)
        if record is None or pod is None or record.registered or record.state != PodState.BOOTING:
            continue
        if state.deleted_by_us(name):
            continue
        issued = _number(pod.annotations.get(labels.ANN_KEY_ISSUED_AT))
        refusal: Refusal | None = None
        if issued is None:
            why = "its pod does not say when its key was issued"
        elif started is not None and issued <= started:
            why = "the key was issued before GoCD last started, which forgot it"
        else:
            age = max(0.0, record.created_at - issued)
            refusal = Refusal(name, now, age, settings)
            why = f"the key was {format_duration(round(age))} old when the pod was created"
        reason = f"GoCD refused its registration key as unknown or expired ({why})"
        intents += [KeyRefused(name, refusal, issued), marks.retiring(name, reason)]
        told = f'pod {name}: {reason}; GoCD says "{answer}". The pod is deleted'
        if refusal is not None:
            told += (
                f"; no key that old is used any more (the cluster profile's auto_register_key_expiry is "
                f"{format_duration(settings.auto_register_key_expiry)}: it must equal the GoCD server's "
                f"gocd.ephemeral.auto.register.key.expiry.millis)"
            )
        intents.append(Say(told, job_from(pod.annotations.get(labels.ANN_CREATED_FOR))))
    return Plan(tuple(intents))


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
