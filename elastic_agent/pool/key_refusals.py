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

GoCD revokes the key before it checks the agent (`validateAndRevoke` comes first), so a registration
refused for another cause has spent its key, and the retries read "not provided or expired" however
young the key; so does an agent container restarted after it registered.

At each server-ping the last lines of the log of every pod that runs and whose agent has not registered
(GoCD does not list it), at most `pending_pods_count` pods, and of the registered pods whose agent
container restarted, are read outside the pool's lock. A pod found refused is deleted (retired in the
usual order) and, once, replaced with a banked key. What the refusal is taken to be (`judge`): spent
(the agent had registered; the first refusal the log shows was for another cause; the key was younger
than one GoCD accepted), forgotten (issued before GoCD last started: keys.py) or expired, which drops
every banked key as old or older and bounds the keys used for a while (key_lifetime.py); the ping tells
GoCD's health messages (pool/key_health.py). The lines echo the key: only the lines with the key hidden
are kept, logged or shown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from elastic_agent.kube.port import ClusterError
from elastic_agent.pool import labels, marks
from elastic_agent.pool.broken_pods import job_from
from elastic_agent.pool.intents import NOTHING, Create, Intent, KeyRefused, Plan, Reserve, Say
from elastic_agent.pool.key_lifetime import REFUSAL_HELD_S, Refusal, Spent, key_issued_at, usable_keys
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.pool.state import PoolState
from elastic_agent.redaction import HIDDEN, redact
from profiles.quantities import format_duration

log = logging.getLogger(__name__)

REFUSED = "[Agent Registration] Error occurred during agent registration process:"
NOT_KNOWN = "is either not provided or expired"
LOG_LINES = 50  # the agent repeats the line every 5 s and logs nothing else meanwhile
READS_PER_RESTART = 3  # a restarted agent asks to register within seconds: three pings find it or nothing
# GoCD's `[%s]` around the key: up to the words that follow it, whatever the key holds.
_ECHOED_KEY = re.compile(r"(agentAutoRegisterKey: \[).*(\] is either not provided or expired)")

EXPIRED, SPENT, UNKNOWN = "expired", "spent", "unknown"  # what a refusal was taken to be
TAKEN_AS = {EXPIRED: "taken as expired", SPENT: "taken as spent before, not expired",
            UNKNOWN: "taken as forgotten by GoCD"}  # fmt: skip


@dataclass(frozen=True)
class Refused:
    """What a pod's log says of GoCD's refusals: the latest answer, and the first one the log still
    shows when GoCD gave it for another cause than the key (the key was spent by that attempt)."""

    answer: str
    first_cause: str | None = None


def refusals_in(log_text: str) -> Refused | None:
    """The refusals the log shows (answers with the key hidden), or None when it shows none."""
    answers = [_answer(line) for line in log_text.splitlines() if REFUSED in line]
    if not answers:
        return None
    first = answers[0]
    return Refused(answers[-1], None if NOT_KNOWN in first else first)


def _answer(line: str) -> str:
    answer = line[line.index(REFUSED) + len(REFUSED) :].strip()
    return redact(_ECHOED_KEY.sub(rf"\g<1>{HIDDEN}\g<2>", answer))


def read(state: PoolState, agents: Collection[str]) -> dict[str, Refused]:
    """Pod -> GoCD's refusals, for the pods whose agents GoCD refused, read after the lock is let go:
    the logs of the pods that run and have not registered (`agents`: GoCD's list), and of the registered
    pods whose agent container restarted (a new agent presents the spent key again), each restart read
    at most READS_PER_RESTART times. A refusal learned under a profile that has changed since is
    forgotten first."""
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
        to_read += _restarted(state)
    found: dict[str, Refused] = {}
    for name, container in to_read:
        try:
            refused = refusals_in(port.pod_log(name, tail_lines=LOG_LINES, container=container))
        except ClusterError as error:  # the RBAC may lack pods/log, the API may be away: the next ping
            log.debug("could not read the log of pod %s: %s", name, redact(str(error)))
            continue
        if refused is not None:
            found[name] = refused
    return found


def _restarted(state: PoolState) -> list[tuple[str, str | None]]:
    """Registered pods, not busy, whose agent container restarted and was not read often enough since."""
    reads, port = state.restart_reads, state.port
    chosen: list[tuple[str, str | None]] = []
    records = {record.name: record for record in state.records()}
    for name in [name for name in reads if name not in records]:
        del reads[name]
    for record in records.values():
        if not record.registered or record.deleting or record.state in (PodState.BUSY, PodState.RETIRING):
            continue
        pod = port.get(record.name)
        agent = next((c for c in pod.container_statuses if not c.init), None) if pod is not None else None
        if pod is None or agent is None or agent.restart_count == 0 or pod.phase != "Running":
            continue
        seen, times = reads.get(record.name, (0, 0))
        if seen == agent.restart_count and times >= READS_PER_RESTART:
            continue
        reads[record.name] = (agent.restart_count, times + 1 if seen == agent.restart_count else 1)
        chosen.append((record.name, agent.name))
    return chosen


def ping_plan(state: PoolState, found: Mapping[str, Refused], now: float) -> Plan:
    """For each pod `read` found refused that still waits for its agent (or whose restarted agent GoCD
    refused): what the refusal was taken to be (expiry, which bounds the keys; a spent key; a key GoCD
    forgot), the pod marked retiring, one replacement with a banked key unless the pod was itself one,
    and a line for the log and its job's console."""
    if not found:
        return NOTHING
    view, port, settings = state.indexed(), state.port, state.settings
    intents: list[Intent] = []
    keys = usable_keys(state)
    for name, refused in found.items():
        record, pod = view.by_name.get(name), port.get(name)
        if record is None or pod is None or state.deleted_by_us(name):
            continue
        waiting = record.state == PodState.BOOTING and not record.registered
        restarted = record.state == PodState.IDLE and record.registered
        if not (waiting or restarted):
            continue  # a booting pod that registered meanwhile, or a restarted one that took a job
        issued = key_issued_at(pod.annotations)
        taken, why, refusal = judge(state, record, refused, issued, now)
        reason = f"GoCD refused its registration key, {TAKEN_AS[taken]} ({why})"
        spent = Spent(name, now, why) if taken == SPENT else None
        intents += [KeyRefused(name, refusal, issued, spent), marks.retiring(name, reason)]
        told = f'pod {name}: {reason}; GoCD says "{refused.answer}". The pod is deleted'
        if refusal is not None:
            told += (
                f"; for the next {format_duration(REFUSAL_HELD_S)} no key that old is used (the cluster "
                f"profile's auto_register_key_expiry is {format_duration(settings.auto_register_key_expiry)}"
                f": it must equal the GoCD server's gocd.ephemeral.auto.register.key.expiry.millis)"
            )
        replacement, keys = _replacement(state, record, pod.annotations, keys)
        intents += replacement
        told += "; a pod with a banked key replaces it" if replacement else _no_replacement(pod.annotations)
        intents.append(Say(told, job_from(pod.annotations.get(labels.ANN_CREATED_FOR))))
    return Plan(tuple(intents))


def judge(
    state: PoolState, record: PodRecord, refused: Refused, issued: float | None, now: float
) -> tuple[str, str, Refusal | None]:
    """What a refusal was taken to be, why, and the bound it sets on keys (expiry only). GoCD revokes a
    key before it checks the agent (`AgentRegistrationController.agentRequest`), so "not provided or
    expired" proves expiry only when nothing else can have spent the key."""
    settings, lifetime, started = state.settings, state.key_lifetime, state.keys.started_at
    if record.registered:
        return SPENT, "its agent container restarted after the agent registered: a key registers one", None
    if refused.first_cause is not None:
        return SPENT, f'GoCD refused its first registration for another cause: "{refused.first_cause}"', None
    if issued is None:
        return UNKNOWN, "its pod does not say when its key was issued", None
    if started is not None and issued <= started:
        return UNKNOWN, "the key was issued before GoCD last started, which forgot it", None
    confirmed, oldest = lifetime.confirmed_s(settings), now - issued
    if oldest < confirmed:
        return SPENT, (
            f"it was at most {format_duration(round(oldest))} old, younger than a key GoCD accepted "
            f"({format_duration(round(confirmed))}), so it cannot have expired"
        ), None
    age = max(0.0, record.created_at - issued)
    return EXPIRED, f"it was {format_duration(round(age))} old when the pod was created", Refusal(
        record.name, now, age, settings
    )


def _replacement(
    state: PoolState, record: PodRecord, annotations: Mapping[str, str], keys: int
) -> tuple[tuple[Intent, ...], int]:
    """One pod in place of the refused one, with a banked key, unless it replaced one itself (no chain of
    refusals), its profile's recipe is not known (one pod per job: GoCD's re-send brings a key) or no
    banked key may be used."""
    spec = state.book.recipe(record.fingerprint or "")
    if labels.ANN_REPLACES in annotations or spec is None or keys <= 0:
        return (), keys
    job = job_from(annotations.get(labels.ANN_CREATED_FOR))
    job = job if job is not None and state.book.is_waiting(spec.fingerprint, job.job_id) else None
    token = ("replacing", record.name)
    kept = {k: v for k, v in annotations.items() if k in (labels.ANN_WARM, labels.ANN_PREDICTED_FOR)}
    said = f"created pod {{pod}} in place of {record.name}, whose key GoCD refused"
    create = Create(token, job, spec, None, said, annotations={**kept, labels.ANN_REPLACES: record.name})
    return (Reserve(token, spec.fingerprint), create), keys - 1


def _no_replacement(annotations: Mapping[str, str]) -> str:
    if labels.ANN_REPLACES in annotations:
        return f" and not replaced again (it replaced {annotations[labels.ANN_REPLACES]})"
    return "; no banked key can replace it now"

