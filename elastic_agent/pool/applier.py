"""Carries out the decisions' plans (intents.py): the one place where the pool changes its state, and
the one place where it calls Kubernetes and GoCD (`remove_agents` too: the agents without pods that
server-ping removes, agents_without_pods.py).

`commit` runs under the pool's lock, right after the decision, and makes the in-memory intents count.
`carry_out` runs after the lock is let go and does the calls, in plan order, reporting back what was
created and deleted. Retiring is ordered as GoCD needs it: the pod was marked retiring by the plan (from
then on should-assign-work says no), then the agent is disabled, the pod deleted once GoCD says the
agent is not building, and the agent deleted last.

A call the cluster does not answer (`Unreachable`) is part of an outage that the port's OutageTracker
logs once; here it is a DEBUG line and no call problem of its own (GoCD shows the outage's message). A
retirement is not retried in a loop: the next ping (or the job's completion) tries it again, and pings
skip retirements while the cluster's sync problem stands, so an outage costs one try per retirement.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from elastic_agent.gocd.messages import Agent
from elastic_agent.gocd.narrator import Narrator
from elastic_agent.gocd.server import GoCDError, GoCDServer
from elastic_agent.kube.port import ClusterError, Unreachable
from elastic_agent.pool import labels
from elastic_agent.pool.intents import (
    Assign,
    Create,
    HoldBack,
    KeyAccepted,
    KeyRefused,
    KeysShort,
    Mark,
    Plan,
    Recovered,
    Release,
    Reserve,
    Retire,
    Say,
    Supersede,
    Wait,
)
from elastic_agent.pool.key_lifetime import take_key
from elastic_agent.pool.ledger import ReuseLedger
from elastic_agent.pool.pods import build_pod
from elastic_agent.pool.records import PodState
from elastic_agent.pool.state import PoolState
from elastic_agent.pool.writer import StateWriter

log = logging.getLogger(__name__)


@dataclass
class Done:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    made: dict[str, Create] = field(default_factory=dict)  # created pod -> the intent it came from


class Applier:
    def __init__(self, state: PoolState, writer: StateWriter, narrator: Narrator) -> None:
        self.state = state
        self.writer = writer  # replaced with the port when credentials change (ClusterPool.replace_port)
        self._narrator = narrator
        self.ledger = ReuseLedger()  # what reuse did, for the status report (ledger.py); has its own lock

    def commit(self, plan: Plan, now: float) -> None:
        """The in-memory intents, with the pool's lock held by the caller."""
        state = self.state
        for intent in plan.intents:
            if isinstance(intent, Mark):
                self._note_idle_end(intent, now)
                state.commit_mark(intent.pod, intent.annotations, intent.labels)
                self.writer.enqueue(intent.pod)
            elif isinstance(intent, Assign):
                self.ledger.served(intent.job_id, intent.fingerprint, now)
                state.commit_assignment(intent.pod, intent.job_id, intent.fingerprint, now)
            elif isinstance(intent, Release):
                state.commit_release(intent.pod)
            elif isinstance(intent, Reserve):
                state.commit_reservation(intent.token, intent.fingerprint)
            elif isinstance(intent, Wait):
                self.ledger.asked(intent.job.job_id, now)
                state.commit_wait(intent, now)
            elif isinstance(intent, Create) and intent.job is not None and intent.key is not None:
                if intent.for_request:  # one pod per job: the create-agent that makes its pod
                    self.ledger.asked(intent.job.job_id, now)
                state.book.key_used(intent.spec.fingerprint, intent.job.job_id, intent.key)
            elif isinstance(intent, Supersede):
                state.book.supersede(intent.fingerprint)
            elif isinstance(intent, HoldBack):
                state.book.holds.failed(intent.fingerprint, intent.pod, intent.reason, now)
            elif isinstance(intent, Recovered):
                state.book.holds.succeeded(intent.fingerprint)
            elif isinstance(intent, KeyRefused):
                state.key_lifetime.refused(intent.refusal, intent.spent)
                if intent.refusal is not None and intent.issued_at is not None:
                    state.keys.drop_issued_until(intent.issued_at)  # GoCD no longer knows them either
            elif isinstance(intent, KeyAccepted):
                state.key_lifetime.registered(intent.age_s, state.settings)
            elif isinstance(intent, KeysShort):
                state.shortages.note(intent.source, intent.pods, now)

    def _note_idle_end(self, mark: Mark, now: float) -> None:
        """A mark that takes an idle pod out of idle (busy, retiring) ends its idle time, for the ledger."""
        new_state = mark.annotations.get(labels.ANN_STATE)
        if new_state is None or new_state == PodState.IDLE.value:
            return
        record = self.state.record(mark.pod)
        if record is not None and record.state == PodState.IDLE and record.fingerprint:
            self.ledger.idled(record.fingerprint, record.state_since, now)

    def carry_out(self, plan: Plan, gocd: GoCDServer | None) -> Done:
        """The calls, in plan order. A `for_request` creation that fails raises (after its reservation is
        dropped); background creations that fail are logged and end that fingerprint's creations."""
        done = Done()
        failed: set[str] = set()  # fingerprints whose background creation failed in this plan
        background: list[str] = []  # what the background creations did, said once they are all done
        for intent in plan.intents:
            if isinstance(intent, Create):
                if intent.spec.fingerprint in failed:
                    self.state.drop_reservation(intent.token)
                    continue
                name = self._create(intent)
                if name is None:
                    failed.add(intent.spec.fingerprint)
                else:
                    done.created.append(name)
                    done.made[name] = intent
                    self.ledger.started(intent.spec.fingerprint, self.state.clock.now())
                    if not intent.for_request:
                        background.append(intent.said.format(pod=name))
            elif isinstance(intent, Retire):
                assert gocd is not None, "a retirement needs GoCD"
                done.deleted += self._retire(intent, gocd)
            elif isinstance(intent, Say):
                job = intent.job.to_json() if intent.job is not None else None
                self._narrator.decision(intent.text, gocd if job is not None else None, job)
        for text in background:
            self._narrator.decision(text)
        return done

    def _create(self, intent: Create) -> str | None:
        state = self.state
        try:
            settings, now = state.settings, state.clock.now()
            key, since = intent.key, intent.key_since
            if key is None:
                banked = take_key(state)
                if banked is None:
                    return None  # the banked keys ran out meanwhile
                key, since = banked.key, banked.since
            # When the key was issued (not the key): a refusal of it tells how long GoCD's keys live.
            issued = {labels.ANN_KEY_ISSUED_AT: f"{now if since is None else since:.3f}"}
            manifest = build_pod(
                intent.spec.template,
                identity=state.identity,
                namespace=settings.namespace,
                job=intent.job,
                spec=intent.spec,
                auto_register_key=key,
                go_server_url=intent.spec.go_server_url,
                now=now,
                extra_annotations={**intent.annotations, **issued},
            )
            state.note_pod_name(intent.token, manifest["metadata"]["name"])
            return state.port.create_pod(manifest).name
        except ClusterError as error:
            if intent.for_request:
                raise
            log.log(_level(error), "could not create a pod outside create-agent: %s", error)
            return None
        finally:
            state.drop_reservation(intent.token)

    def _retire(self, retire: Retire, gocd: GoCDServer) -> list[str]:
        state = self.state
        names = state.claim_for_retiring_now([name for name, _ in retire.pods])
        deleted: list[str] = []
        try:
            if not names:
                return []
            for name in names:
                self.writer.flush(name)
            gocd.disable_agents(names)
            building: set[str] = set()
            if not retire.agents_idle:
                building = {a.agent_id for a in gocd.list_agents() if a.agent_id in names and a.building}
            reasons = dict(retire.pods)
            port = state.port
            for name in names:
                record = state.record(name)
                if name in building and record is not None and not record.failed:
                    continue  # never delete a pod whose agent builds; its job-completion or a ping goes on
                try:
                    port.delete_pod(name)
                except ClusterError as error:
                    if not isinstance(error, Unreachable):
                        state.note_problem("delete", error)
                    raise
                state.note_problem("delete", None)
                state.note_deleted(name)
                deleted.append(name)
                self._narrator.decision(f"retired pod {name}: {reasons[name]}")
            # GoCD deletes only agents that are not building; the agent of a failed pod goes at a later ping.
            gocd.delete_agents([name for name in deleted if name not in building])
        except (GoCDError, ClusterError) as error:
            log.log(_level(error), "retiring %s must wait for the next ping: %s", ", ".join(names), error)
        finally:
            state.done_retiring(names)
        return deleted


def _level(error: Exception) -> int:
    """DEBUG for a failure of an outage (the OutageTracker has said it once), WARNING for the others."""
    return logging.DEBUG if isinstance(error, Unreachable) else logging.WARNING


def remove_agents(agents: Sequence[Agent], gocd: GoCDServer) -> None:
    """Removes from GoCD agents whose pods are gone (agents_without_pods.py): all disabled, deleted when
    not building (GoCD deletes only disabled agents that do not build; a building one goes at a later
    ping). A failure waits for the next ping."""
    if not agents:
        return
    deletable = [agent.agent_id for agent in agents if not agent.building]
    try:
        gocd.disable_agents(agent.agent_id for agent in agents)
        gocd.delete_agents(deletable)
    except GoCDError as error:
        log.warning("could not remove the agents of %d pods that are gone: %s", len(agents), error)
        return
    for agent_id in deletable:
        log.info("removed agent %s: its pod is gone", agent_id)
    for agent in agents:
        if agent.building:
            log.info(
                "disabled agent %s: its pod is gone; it is removed once it stops building", agent.agent_id
            )
