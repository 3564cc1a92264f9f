"""The pod pool of one cluster, as the executors see it: one method per request, each the same three
steps. Under the pool's lock, a decision reads the state and returns a plan (decisions.py, reaping.py,
warm.py), and the Applier commits the plan's in-memory intents; after the lock, the Applier carries out
its calls to Kubernetes and GoCD (for job-completion, on the pool's `Background`: it never waits on the
network). The pool composes its parts (state, writer, applier, narrator); it decides nothing itself and
calls nothing directly.

Nothing is decided before the pool's first pod list has arrived, as client-go's informers gate work on
`HasSynced` (docs/architecture.md, "Before the first pod list"): create-agent waits for it a bounded
while, then lets the job wait without creating anything; should-assign-work says `false`;
job-completion is kept and applied once the list is there; server-ping skips the pool. When the list
arrives the pool serves what waited. New credentials are taken over the same way: the new connection
lists in the background while the pool goes on with the one it has.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from elastic_agent.background import Background
from elastic_agent.clock import Clock
from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.gocd.narrator import Narrator
from elastic_agent.gocd.server import GoCDServer
from elastic_agent.kube.port import ClusterError, ClusterPort
from elastic_agent.pool import broken_pods, decisions, key_refusals, marks, quiet, reaping, warm
from elastic_agent.pool.applier import Applier, Done
from elastic_agent.pool.holds import Hold
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


# Completions heard before the first pod list, kept until it arrives (a list takes well under a second;
# past this many the oldest goes, and the ping repairs its pod from GoCD's agent list).
MAX_EARLY_COMPLETIONS = 1000
SYNC_LOOK_S = 0.05  # how often a create-agent waiting for the first list looks for its failure


@dataclass(frozen=True)
class EarlyCompletion:
    agent_id: str
    job: JobIdentifier
    spec: JobSpec | None
    gocd: GoCDServer


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
        background: Background,
        sync_wait_s: float = 10.0,
    ) -> None:
        self.clock = clock
        self.state = PoolState(port, identity, settings, clock, keys)
        self._writer_factory = writer_factory
        self._background = background
        self._sync_wait_s = sync_wait_s  # how long create-agent waits for the first pod list
        self.applier = Applier(self.state, writer_factory(port, clock, self.state), narrator)
        # Guarded by the state's lock: the port of new credentials until its first list has arrived, and
        # the completions heard before the pool's own first list.
        self._next_port: ClusterPort | None = None
        self._early: deque[EarlyCompletion] = deque(maxlen=MAX_EARLY_COMPLETIONS)

    # -- life ------------------------------------------------------------------------------------------

    def start(self) -> None:
        port = self.state.port
        port.start()
        self.applier.writer.start()
        port.on_synced(lambda: self._background.submit("serving what waited for the first pod list",
                                                       self._after_first_list))  # fmt: skip

    def stop(self, deadline: float) -> None:
        """Write every queued state change (until `deadline`, time.monotonic()), then stop the watch."""
        self._background.stop(deadline)
        left = self.applier.writer.stop(deadline)
        if left:
            log.warning(
                "stopped before the state of %d pod(s) was written; the next backend's server-ping repairs "
                "what GoCD knows of them",
                left,
            )
        with self.state.lock:
            next_port, self._next_port = self._next_port, None
        if next_port is not None:
            next_port.stop()
        self.state.port.stop()

    @property
    def synced(self) -> bool:
        """Whether the first pod list has arrived (no decision is made before)."""
        return self.state.port.wait_synced(0)

    def sync_problem(self) -> ClusterError | None:
        """Why listing and watching the pods fails now, with the credentials in use or the new ones."""
        problem = self.state.port.sync_problem()
        with self.state.lock:
            next_port = self._next_port
        return problem if problem is not None or next_port is None else next_port.sync_problem()

    def _wait_for_the_first_list(self) -> bool:
        """Up to `sync_wait_s` of real time (the list is on the network, whatever the clock): True once
        the list is there. A list that fails (no answer, refused credentials) ends the wait with its
        error, which the request reports as it would any failure to create a pod."""
        port = self.state.port
        deadline = time.monotonic() + self._sync_wait_s
        while not port.wait_synced(min(SYNC_LOOK_S, max(0.0, deadline - time.monotonic()))):
            problem = port.sync_problem()
            if problem is not None:
                raise problem
            if time.monotonic() >= deadline:
                return False
        return True

    def _after_first_list(self) -> None:
        self._drop_official_labels()
        with self.state.lock:
            early = list(self._early)
            self._early.clear()
        for completion in early:
            self.job_completed(completion.agent_id, completion.job, completion.spec, completion.gocd)
        self.serve_waiting_jobs()
        self.top_up_warm_pool()

    def _drop_official_labels(self) -> None:
        """Once the pods are known: the labels of an earlier version that the official plugin selects on
        go from the pods that still carry them (marks.without_official_labels); the writer removes them."""
        now = self.clock.now()
        with self.state.lock:
            plan = Plan(tuple(marks.without_official_labels(self.state.port.pods())))
            self.applier.commit(plan, now)

    def update_settings(self, settings: ClusterProfile) -> None:
        self.state.commit_settings(settings)

    @property
    def settings_object(self) -> ClusterProfile:
        """The settings in use, read without the lock: only to tell whether new ones came."""
        return self.state.settings_unlocked

    def replace_port(self, port: ClusterPort) -> None:
        """New credentials for the same cluster: `port` lists the pods in the background, and once its
        first list has arrived the pool reads and writes through it; until then, through the port it
        has. Changes not yet written stay in memory and are written through the new port."""
        with self.state.lock:
            superseded, self._next_port = self._next_port, port
        if superseded is not None:
            superseded.stop()  # newer credentials came before its list did
        port.start()
        port.on_synced(lambda: self._background.submit("taking over new credentials",
                                                       lambda: self._take_over(port)))  # fmt: skip

    def _take_over(self, port: ClusterPort) -> None:
        writer = self._writer_factory(port, self.clock, self.state)
        with self.state.lock:
            if self._next_port is not port:
                return  # superseded, or the pool stopped, meanwhile
            self._next_port = None
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

    @property
    def early_completions(self) -> int:
        """Completions heard before the first pod list, kept until it arrives (at most
        MAX_EARLY_COMPLETIONS)."""
        with self.state.lock:
            return len(self._early)

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
        synced = self._wait_for_the_first_list()
        now = self.clock.now()
        with self.state.lock:
            self.state.forget_waiting(now)
            if synced:
                plan = decisions.create_agent(self.state, job, spec, key, now)
            else:
                plan = decisions.wait_for_the_list(job, spec, key, self.state.settings.namespace)
            self.applier.commit(plan, now)
        done = self.applier.carry_out(plan, gocd)
        if not done.created:
            return CreateOutcome(None, plan.message)
        said = next(i.said for i in plan.intents if isinstance(i, Create) and i.for_request)
        return CreateOutcome(done.created[0], said.format(pod=done.created[0]))

    def should_assign_work(self, agent_id: str, job: JobIdentifier, spec: JobSpec, gocd: GoCDServer) -> bool:
        """Answered from memory; a `true` makes the pod busy at once, a `false` changes nothing. Before
        the first pod list no pod is known: `false`, and the agent asks again in a few seconds."""
        if not self.synced:
            return False
        with self.state.lock:
            assigned, plan = decisions.should_assign_work(self.state, agent_id, job, spec, self.clock)
            if plan.intents:
                self.applier.commit(plan, self.clock.now())
        if assigned:
            self.applier.carry_out(plan, gocd)
            if spec.wants_warm_pods:
                # The pod taken leaves the warm pool short, and the job's key is banked now: refill at once,
                # after the answer, rather than at the next ping.
                self._background.submit("topping up the warm pool after an assignment", self.top_up_warm_pool)
        return assigned

    def job_completed(self, agent_id: str, job: JobIdentifier, spec: JobSpec | None, gocd: GoCDServer) -> str:
        """Decided and committed at once; what it calls (a retirement) is carried out in the background.
        `spec` None: the job's profile cannot be rendered without the network (a remote pod template
        not fetched yet); the pod's own annotations decide."""
        now = self.clock.now()
        with self.state.lock:
            if not self.synced:
                self._early.append(EarlyCompletion(agent_id, job, spec, gocd))
                return "the pods are still being listed: the completion counts once they are"
            plan = decisions.job_completed(self.state, agent_id, job, spec, now)
            self.applier.commit(plan, now)
        if plan.intents:
            self._background.submit(f"after the job-completion on {agent_id}",
                                    lambda: self._carry_out(plan, gocd))  # fmt: skip
        return plan.message

    def in_background(self, what: str, work: Callable[[], object]) -> None:
        """`work` on the pool's queue (it may call the cluster): for a request that must not wait."""
        self._background.submit(what, work)

    def _carry_out(self, plan: Plan, gocd: GoCDServer) -> None:
        self.applier.carry_out(plan, gocd)

    def reconcile(self, agents: Mapping[str, Agent], gocd: GoCDServer, listed_at: int) -> Done:
        """One server-ping's work. `listed_at`: the change mark taken before GoCD's agent list was asked
        for (a change made since is newer than the list)."""
        if not self.synced:
            return Done()
        refused = key_refusals.read(self.state, agents)  # the logs of pods not registered: no lock held
        # Refused and broken pods first: told and marked retiring, they go with this ping's retirements.
        steps = (lambda now: key_refusals.ping_plan(self.state, refused, now), self._broken_pods,
                 lambda now: reaping.retirements(self.state, agents, now))  # fmt: skip
        done = self._reap(agents, gocd, listed_at, *steps)
        done.created += self.serve_waiting_jobs()
        done.created += self.top_up_warm_pool()
        self.requeue_unwritten()
        return done

    def _broken_pods(self, now: float) -> Plan:
        return broken_pods.ping_plan(self.state, now)

    def wind_down(self, agents: Mapping[str, Agent], gocd: GoCDServer, listed_at: int) -> Done:
        """server-ping's work for a pool whose cluster profile is gone: GoCD's list repairs states as
        usual, then every pod retires, busy ones once their job is over (reaping.orphaned). Nothing is
        created: jobs that waited here are sent create-agent again, for the profile that names their
        cluster now."""
        if not self.synced:
            return Done()
        done = self._reap(agents, gocd, listed_at, lambda _now: reaping.orphaned(self.state))
        self.requeue_unwritten()
        return done

    def _reap(
        self, agents: Mapping[str, Agent], gocd: GoCDServer, listed_at: int, *steps: Callable[[float], Plan]
    ) -> Done:
        """GoCD's list repairs states, then each of `steps(now)` decides on the states the one before
        left (broken pods, what retires): each plan is committed before the next reads the state, and
        the calls of them all are made after the lock, in that order."""
        now = self.clock.now()
        self.state.forget_deleted()
        with self.state.lock:
            plan = reaping.what_gocd_says(self.state, agents, now, listed_at)
            self.applier.commit(plan, now)
            for step in steps:
                decided = step(now)
                self.applier.commit(decided, now)
                plan += decided
            records = self.state.records()
            self.state.forget_waiting(now, {r.fingerprint for r in records if r.fingerprint})
        return self.applier.carry_out(plan, gocd)

    def is_empty(self) -> bool:
        """No pod left, none being created, nothing unwritten: the pool can go."""
        with self.state.lock:
            return (
                not self.state.known_pod_names()
                and not self.state.in_flight(self.state.indexed())
                and next(self.state.unwritten(), None) is None
            )

    def gone_recently(self) -> set[str]:
        return self.state.gone_recently()

    def serve_waiting_jobs(self) -> list[str]:
        return self._create_for(warm.for_waiting_jobs)

    def top_up_warm_pool(self) -> list[str]:
        return self._create_for(warm.warm_pool)

    def _create_for(self, decide: Callable[[PoolState, float], Plan]) -> list[str]:
        return self.carry_out_decision(decide).created

    def carry_out_decision(self, decide: Callable[[PoolState, float], Plan]) -> Done:
        """A decision that only creates pods (the warm pool's, prediction's): decided and committed
        under the lock, carried out after it. Nothing before the first pod list."""
        if not self.synced:
            return Done()
        now = self.clock.now()
        with self.state.lock:
            plan = decide(self.state, now)
            self.applier.commit(plan, now)
        return self.applier.carry_out(plan, None)

    def requeue_unwritten(self) -> None:
        """The writer gives up on a pod after a few conflicts or an error; the ping tries again."""
        for name in self.state.unwritten():
            self.applier.writer.enqueue(name)

    # ---- ReuseSchedule periods ----------------------------------------------------------------------

    def schedules(self) -> list[tuple[str, JobSpec]]:
        """The fingerprints whose profile has a ReuseSchedule, with the spec that brought it."""
        with self.state.lock:  # the book is the state's: read under its lock
            book = self.state.book
            if not book.any_scheduled():
                return []
            return [(fp, spec) for fp, spec in book.recipes() if spec.schedule is not None]

    def next_period_change(self) -> float | None:
        """When a schedule's period may start or end next (clock seconds); None without schedules."""
        now = self.clock.now()
        changes = [spec.schedule.next_change(now) for _, spec in self.schedules() if spec.schedule]
        found = [change for change in changes if change is not None]
        return min(found) if found else None

    def quiet_until(self) -> float:
        """When a server-ping may next act on this pool if nothing else changes it (quiet.py): `now`
        while anything is under way or before the first pod list, infinity when no ping ever would."""
        now = self.clock.now()
        if not self.synced:
            return now
        with self.state.lock:
            return quiet.quiet_until(self.state, now)

    def holds(self) -> list[Hold]:
        """Fingerprints held for broken pods (holds.py), for health messages and the status pages."""
        with self.state.lock:
            return self.state.book.holds.held()

    def demand_of(self, fingerprint: str) -> tuple[int, int]:
        """(jobs waiting, pods booting or idle) of a fingerprint, for the status pages."""
        with self.state.lock:
            return self.state.demand(fingerprint, self.state.indexed())
