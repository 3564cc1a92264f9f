"""The pod pool of one cluster, as the executors see it: one method per request, each the same three
steps. Under the pool's lock, a decision reads the state and returns a plan (decisions.py, reaping.py,
warm.py), and the Applier commits the plan's in-memory intents; after the lock, the Applier carries out
its calls to Kubernetes and GoCD. The pool composes its parts (state, writer, applier, narrator); it
decides nothing itself and calls nothing directly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from elastic_agent.clock import Clock
from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.gocd.narrator import Narrator
from elastic_agent.gocd.server import GoCDServer
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool import decisions, reaping, warm
from elastic_agent.pool.applier import Applier, Done
from elastic_agent.pool.intents import Create, Plan
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.records import PodRecord
from elastic_agent.pool.state import PoolState
from elastic_agent.pool.writer import WriterFactory
from profiles.cluster import ClusterProfile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CreateOutcome:
    created: str | None  # the new pod's name
    message: str  # why, in words fit for the job's console


class ClusterPool:
    def __init__(
        self,
        port: ClusterPort,
        identity: PodIdentity,
        settings: ClusterProfile,
        clock: Clock,
        narrator: Narrator,
        keys: RegistrationKeys,
        writer_factory: WriterFactory,
    ) -> None:
        self.clock = clock
        self.state = PoolState(port, identity, settings, clock, keys)
        self._writer_factory = writer_factory
        self.applier = Applier(self.state, writer_factory(port, clock, self.state), narrator)

    # -- life ------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.state.port.start()
        self.applier.writer.start()

    def stop(self, deadline: float) -> None:
        """Write every queued state change (until `deadline`, time.monotonic()), then stop the watch."""
        left = self.applier.writer.stop(deadline)
        if left:
            log.warning(
                "stopped before the state of %d pod(s) was written; the next backend's server-ping repairs "
                "what GoCD knows of them",
                left,
            )
        self.state.port.stop()

    def update_settings(self, settings: ClusterProfile) -> None:
        self.state.commit_settings(settings)

    @property
    def settings_object(self) -> ClusterProfile:
        """The settings in use, read without the lock: only to tell whether new ones came."""
        return self.state.settings_unlocked

    def replace_port(self, port: ClusterPort, sync_timeout_s: float) -> None:
        """New credentials for the same cluster: read and write through `port` from now on. Changes not
        yet written stay in memory and are written through the new port."""
        writer = self._writer_factory(port, self.clock, self.state)
        port.start()
        if not port.wait_synced(sync_timeout_s):
            log.warning("the pods are not listed yet with the new credentials; going on")
        with self.state.lock:
            old_port, old_writer = self.state.port, self.applier.writer
            self.state.commit_port(port)
            self.applier.writer = writer
        old_writer.stop(deadline=0.0)  # what it had queued is still unwritten in the state
        old_port.stop()
        writer.start()
        self.requeue_unwritten()

    # -- what status pages, metrics and executors read -------------------------------------------------

    @property
    def settings(self) -> ClusterProfile:
        return self.state.settings

    @property
    def identity(self) -> PodIdentity:
        return self.state.identity

    @property
    def port(self) -> ClusterPort:
        return self.state.port

    def record(self, name: str) -> PodRecord | None:
        return self.state.record(name)

    def records(self) -> list[PodRecord]:
        return self.state.records()

    def known_pod_names(self) -> set[str]:
        return self.state.known_pod_names()

    def waiting_jobs(self) -> dict[str, int]:
        with self.state.lock:
            return self.state.book.waiting_counts()

    def change_mark(self) -> int:
        return self.state.change_mark()

    def problems(self) -> dict[str, str]:
        """Kinds of cluster calls failing now ("write", "delete") and what that means, in a sentence."""
        return self.state.problems()

    # -- the requests ----------------------------------------------------------------------------------

    def create_agent(self, job: JobIdentifier, spec: JobSpec, key: str, gocd: GoCDServer) -> CreateOutcome:
        now = self.clock.now()
        with self.state.lock:
            self.state.forget_waiting(now)
            plan = decisions.create_agent(self.state, job, spec, key, now)
            self.applier.commit(plan, now)
        done = self.applier.carry_out(plan, gocd)
        if not done.created:
            return CreateOutcome(None, plan.message)
        said = next(i.said for i in plan.intents if isinstance(i, Create) and i.for_request)
        return CreateOutcome(done.created[0], said.format(pod=done.created[0]))

    def should_assign_work(self, agent_id: str, job: JobIdentifier, spec: JobSpec, gocd: GoCDServer) -> bool:
        """Answered from memory; a `true` makes the pod busy at once, a `false` changes nothing."""
        with self.state.lock:
            assigned, plan = decisions.should_assign_work(self.state, agent_id, job, spec, self.clock)
            if plan.intents:
                self.applier.commit(plan, self.clock.now())
        if assigned:
            self.applier.carry_out(plan, gocd)
        return assigned

    def job_completed(self, agent_id: str, job: JobIdentifier, spec: JobSpec, gocd: GoCDServer) -> str:
        now = self.clock.now()
        with self.state.lock:
            plan = decisions.job_completed(self.state, agent_id, job, spec, now)
            self.applier.commit(plan, now)
        self.applier.carry_out(plan, gocd)
        return plan.message

    def reconcile(self, agents: Mapping[str, Agent], gocd: GoCDServer, listed_at: int) -> Done:
        """One server-ping's work. `listed_at`: the change mark taken before GoCD's agent list was asked
        for (a change made since is newer than the list)."""
        now = self.clock.now()
        self.state.forget_deleted()
        with self.state.lock:
            repairs = reaping.what_gocd_says(self.state, agents, now, listed_at)
            self.applier.commit(repairs, now)
            retirements = reaping.retirements(self.state, agents, now)
            self.applier.commit(retirements, now)
            records = self.state.records()
            self.state.forget_waiting(now, {r.fingerprint for r in records if r.fingerprint})
        done = self.applier.carry_out(repairs + retirements, gocd)
        done.created += self.serve_waiting_jobs()
        done.created += self.top_up_warm_pool()
        self.requeue_unwritten()
        return done

    def serve_waiting_jobs(self) -> list[str]:
        return self._background(lambda state, _now: warm.for_waiting_jobs(state))

    def top_up_warm_pool(self) -> list[str]:
        return self._background(warm.warm_pool)

    def _background(self, decide: Callable[[PoolState, float], Plan]) -> list[str]:
        now = self.clock.now()
        with self.state.lock:
            plan = decide(self.state, now)
            self.applier.commit(plan, now)
        return self.applier.carry_out(plan, None).created

    def requeue_unwritten(self) -> None:
        """The writer gives up on a pod after a few conflicts or an error; the ping tries again."""
        for name in self.state.unwritten():
            self.applier.writer.enqueue(name)

    # ---- ReuseSchedule periods ----------------------------------------------------------------------

    def schedules(self) -> list[tuple[str, JobSpec]]:
        """The fingerprints whose profile has a ReuseSchedule, with the spec that brought it."""
        with self.state.lock:  # the book is the state's: read under its lock
            return [(fp, spec) for fp, spec in self.state.book.recipes() if spec.schedule is not None]

    def next_period_change(self) -> float | None:
        """When a schedule's period may start or end next (clock seconds); None without schedules."""
        now = self.clock.now()
        changes = [spec.schedule.next_change(now) for _, spec in self.schedules() if spec.schedule]
        found = [change for change in changes if change is not None]
        return min(found) if found else None

    def demand_of(self, fingerprint: str) -> tuple[int, int]:
        """(jobs waiting, pods booting or idle) of a fingerprint, for the status pages."""
        with self.state.lock:
            return self.state.demand(fingerprint, self.state.indexed())
