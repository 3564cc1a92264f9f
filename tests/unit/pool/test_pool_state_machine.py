"""A stateful property test of the pool: Hypothesis chooses what happens, in which order and when, and
every invariant of docs/architecture.md ("Invariants", "Where registration keys live") is checked after
each step.

The world is the in-process stack on the injected clock (`VirtualStack`): the simulated GoCD server
(which keeps scheduling, polling, completing and pinging on its own rhythm as time passes), the
simulated kubelet and the real backend in process. The rules are the events of a pool's life, each
driven through the request GoCD sends or the thing the cluster does, so that the real decision code
answers: create-agent, should-assign-work, job-completion, server-ping, pod eviction, pod boot, backend
restart, credential change, profile edit, and time passing.

The budget is fixed (`MAX_EXAMPLES` runs of at most `STEPS` steps); the search is random on every run,
so that CI keeps looking in new places, and a failure prints the seed that reproduces it
(`POOL_MACHINE_SEED=<seed>`) besides Hypothesis's `@reproduce_failure` blob. Every failure found is
kept as a plain regression test.
"""

from __future__ import annotations

import json
import math
import os
import random
import zlib
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from elastic_agent.clock import Clock
from elastic_agent.gocd.messages import cluster_profile
from elastic_agent.kube.port import ClusterPort
from elastic_agent.pool import labels
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.fingerprints import WAITING_TTL_S
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.records import PodState, job_id_of
from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import ENV_KEY, GoCDConfig, JobState
from elastic_agent.simulation.inprocess_cluster import InProcessCluster
from elastic_agent.simulation.kubelet import PodFault
from profiles.cluster import ClusterProfile
from tests.support.doubles.harness import VirtualStack
from tests.support.fuzz_strategies import LONG

# The suite's budget; HYPOTHESIS_PROFILE=long (tests/support/fuzz_strategies.py) searches twenty times as
# long.
MAX_EXAMPLES = 100 * (20 if LONG else 1)
STEPS = 80
PING_S = 60.0  # GoCDConfig.ping_interval_s
CLUSTER_IDLE_TIMEOUT_S = 180.0
EPSILON_S = 1e-3

# Each kind of job has the variants an admin may edit its profile into. Within a kind, a change of
# MinIdlePods always comes with a change of the rendered pod (MaxMemory), so all pods of one fingerprint
# keep the same number of idle pods (the reaper keeps the largest MinIdlePods of a fingerprint's pods).
IMAGE = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties"}
VARIANTS: dict[str, list[dict[str, str]]] = {
    "reuse": [
        {**IMAGE, "Reuse": "true", "IdleTimeout": "2m", "MaxJobsPerPod": "3"},
        {**IMAGE, "Reuse": "true", "IdleTimeout": "1m"},
        {**IMAGE, "Reuse": "true", "IdleTimeout": "2m", "MaxJobsPerPod": "2", "MaxMemory": "2Gi"},
    ],
    "warm": [
        {**IMAGE, "Reuse": "true", "MinIdlePods": "1", "IdleTimeout": "90s", "MaxMemory": "1Gi"},
        {**IMAGE, "Reuse": "true", "MinIdlePods": "2", "IdleTimeout": "90s", "MaxMemory": "3Gi"},
    ],
    "single": [
        {**IMAGE, "Reuse": "false"},
        {**IMAGE, "Reuse": "false", "MaxMemory": "1Gi"},
    ],
}
ENVIRONMENTS = (None, "staging")
FAULTS = (
    PodFault("fail", "Error", "the agent container exited with code 1", after=20.0),
    PodFault("no_register"),
    PodFault("image_pull", message="manifest unknown"),
)


# What the observers (`_observe`, `_heard`, `_check_after_ping`) record, by invariant.
OBSERVED = ("keys", "jobs", "busy", "idle", "answers")
# What PoolState keeps per pod (PoolState.sizes).
PER_POD = (
    "records_cached", "generations", "first_seen", "changed_at", "unwritten", "assigned", "pod_of_job",
    "deleted", "creating",
)  # fmt: skip


@dataclass(frozen=True)
class BootPlan:
    """How the next pod boots: after `delay_s`, or with a fault."""

    delay_s: float
    fault: PodFault | None = None


@dataclass(frozen=True)
class Ping:
    at: float
    effective: bool  # the pool existed, had its first pod list and could reach the cluster


def usual_boot(name: str, salt: int) -> BootPlan:
    """5 to 35 s, and one pod in six slow (an image pulled on a fresh node: 5 to 9 minutes, within
    auto_register_timeout); fixed by the pod's name and the run's salt, so that a seed gives the same
    run and runs differ in which pods are slow."""
    digest = zlib.crc32(f"{salt}/{name}".encode())
    return BootPlan(300.0 + digest % 240 if digest % 6 == 0 else 5.0 + digest % 30)


class PoolMachine(RuleBasedStateMachine):
    """One cluster, three kinds of jobs (reuse, reuse with a warm pool, one pod per job) in two GoCD
    environments, `max_pods` and `pending_pods_count` small enough to bite.

    Observers see what happens as it happens, where an invariant could break and heal again between two
    steps: every request and its answer (the plugin transport), every change of every pod (the cluster
    store's listener), the pool right after every ping. The invariants read what they recorded, the
    cluster and the pool after each step."""

    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.plans: deque[BootPlan] = deque()
        self.boot_salt = 0
        self.boot_of: dict[str, BootPlan] = {}
        self.stack = VirtualStack(boot_delay=self._boot_delay, gocd=GoCDConfig(seed=1), faults=self._fault)
        self.token = 0
        self.cluster = self._cluster_properties()
        # Configured before any job, as an admin does: GoCD's own pings carry it from the start (a ping
        # without it would tell the backend the profile was deleted).
        self.stack.gocd.create_cluster_profile(self.cluster)
        self.profiles = {kind: variants[0] for kind, variants in VARIANTS.items()}
        # What the observers saw break as it happened, by invariant (the names of the invariants below).
        self.seen: dict[str, list[str]] = {name: [] for name in OBSERVED}
        self.pings: list[Ping] = []
        self.given: dict[int, str] = {}  # job id -> the agent that said `true` to it
        self.create_agents: list[tuple[float, str]] = []  # (when, key) of every create-agent answered
        self.asked_for: set[tuple[str, str | None]] = set()  # (profile, environment) create-agent named
        self.completions_since_start = 0
        self.keys_in_pods: dict[str, str] = {}  # registration key -> the pod created with it
        self.deleted: set[str] = set()
        self.gone_at: dict[str, float] = {}  # pods the cluster no longer shows, and since when
        self.crash_after_request = False
        # GoCD's requests: as values from the simulated server, as text from the rules that write them.
        self._send, self._send_value = self.stack.transport.send, self.stack.transport.send_value
        self.stack.transport.send = self._observed_send  # type: ignore[method-assign]
        self.stack.transport.send_value = self._observed_send_value  # type: ignore[method-assign]
        self.stack.store.add_listener(self._heard)
        self.lists_late = False  # new connections' first lists wait for `first_list_arrives`
        self.late_lists: list[InProcessCluster] = []
        self.new_connections: list[InProcessCluster] = []
        self._watch_connections()

    def _start_backend(self) -> None:
        self.late_lists.clear()  # the connections of the backend that died
        self.stack.start_backend()
        self._watch_connections()

    def _watch_connections(self) -> None:
        """Keep the connections the backend makes for new credentials of a pool it has (the first
        connection of a pool lists as usual)."""
        backend = self.stack.backend
        connect = backend.cluster_factory

        def factory(profile: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
            port = connect(profile, identity, clock)
            if backend.known_pool(profile) is not None and isinstance(port, InProcessCluster):
                self.new_connections.append(port)
            return port

        backend.cluster_factory = factory

    # -- the world's seams -------------------------------------------------------------------------

    def _cluster_properties(self) -> dict[str, str]:
        return self.stack.cluster_profile(
            idle_timeout=f"{CLUSTER_IDLE_TIMEOUT_S:g}s",
            pending_pods_count="3",
            max_pods="5",
            security_token=f"token-{self.token}",
        )

    def _fault(self, pod: Obj) -> PodFault | None:
        """The kubelet's first look at a new pod: its boot plan is the one the machine chose, else the
        usual one (the kubelet asks for the fault first, then for the boot delay)."""
        name = pod["metadata"]["name"]
        plan = self.plans.popleft() if self.plans else usual_boot(name, self.boot_salt)
        self.boot_of[name] = plan
        return plan.fault

    def _boot_delay(self, pod: Obj) -> float:
        return self.boot_of[pod["metadata"]["name"]].delay_s

    def _pool(self) -> ClusterPool | None:
        if self.stack.transport.plugin is None:
            return None
        return self.stack.backend.known_pool(cluster_profile(self.cluster))

    def _pool_ready(self) -> bool:
        pool = self._pool()
        return pool is not None and pool.synced and pool.sync_problem() is None

    def _observed_send(self, name: str, body: str) -> tuple[int, str]:
        return self._observed(name, lambda: json.loads(body), lambda: self._send(name, body))

    def _observed_send_value(self, name: str, body: dict[str, Any]) -> tuple[int, str]:
        return self._observed(name, lambda: body, lambda: self._send_value(name, body))

    def _observed(
        self, name: str, parsed: Callable[[], Any], send: Callable[[], tuple[int, str]]
    ) -> tuple[int, str]:
        running = self.stack.transport.plugin is not None
        ready = self._pool_ready()
        now = self.stack.clock.now()
        status, answer = send()
        self._hold_late_lists()
        if running and status != 200:
            self.seen["answers"].append(f"{name} answered {status}: {answer[:200]}")
        if running and status == 200:
            self._observe(name, parsed(), answer, now, ready)
        if running and self.crash_after_request:
            self.crash_after_request = False
            self.stack.stop_backend()
        return status, answer

    def _hold_late_lists(self) -> None:
        """The first lists of the connections this request made wait, if they are to be late: taken off
        the in-process backend's lists before the end of the instant answers them."""
        made, self.new_connections = self.new_connections, []
        plugin = self.stack.transport.plugin
        if not self.lists_late or plugin is None:
            return
        for port in made:
            if port in plugin.backend.lists:
                plugin.backend.lists.remove(port)
                self.late_lists.append(port)

    def _observe(self, name: str, parsed: Any, answer: str, now: float, ready: bool) -> None:
        request = name.removeprefix(wire.REQUEST_PREFIX)
        if request == "create-agent":
            self.create_agents.append((now, parsed["auto_register_key"]))
            properties = json.dumps(parsed["elastic_agent_profile_properties"], sort_keys=True)
            self.asked_for.add((properties, parsed.get("environment")))
        elif request == "should-assign-work" and answer.strip() == "true":
            job_id, agent_id = parsed["job_identifier"]["job_id"], parsed["agent"]["agent_id"]
            earlier = self.given.setdefault(job_id, agent_id)
            if earlier != agent_id:
                self.seen["jobs"].append(f"job {job_id} given to {earlier} and then to {agent_id}")
        elif request == "job-completion":
            self.completions_since_start += 1
        elif request == "server-ping":
            self.pings.append(Ping(now, ready))
            if ready:
                self._check_after_ping(now)

    def _heard(self, kind: str, pod: Obj) -> None:
        """Every change of every pod, as it happens: keys of new pods, and what was running on a pod at the
        moment it was deleted."""
        meta = pod["metadata"]
        name = meta["name"]
        if kind == "ADDED":
            for container in pod["spec"].get("containers") or []:
                for env in container.get("env") or []:
                    if env["name"] == ENV_KEY:
                        other = self.keys_in_pods.setdefault(env["value"], name)
                        if other != name:
                            self.seen["keys"].append(f"one registration key in pods {other} and {name}")
        if kind == "DELETED":
            self.gone_at[name] = self.stack.clock.now()
        if (kind == "DELETED" or meta.get("deletionTimestamp")) and name not in self.deleted:
            self.deleted.add(name)
            agent = self.stack.gocd.agent(name)
            failed = pod["status"].get("phase") == "Failed"
            if agent is not None and agent.running_job_id is not None and agent.process_alive and not failed:
                self.seen["busy"].append(
                    f"pod {name} deleted while its agent builds job {agent.running_job_id}"
                )

    def _check_after_ping(self, now: float) -> None:
        """Right after a ping that reached a synced pool: no idle reuse pod is past its idle timeout, but for
        the MinIdlePods its fingerprint keeps (reaping._idle_too_long)."""
        pool = self._pool()
        assert pool is not None
        default = pool.settings.idle_timeout
        groups: dict[str, list[tuple[bool, int]]] = {}
        for record in pool.records():
            if not record.reuse or record.state != PodState.IDLE or not pool.state.alive(record):
                continue
            expired = now - record.state_since > record.knobs(now, default).idle_timeout + EPSILON_S
            groups.setdefault(record.fingerprint or "", []).append((expired, record.min_idle))
        for fingerprint, group in groups.items():
            keep = max(min_idle for _, min_idle in group)
            expired = sum(1 for is_expired, _ in group if is_expired)
            fresh = len(group) - expired
            if expired > max(0, keep - fresh):
                self.seen["idle"].append(
                    f"after the ping at {now:.0f}: {expired} idle pods of {fingerprint[:12]} past their idle "
                    f"timeout, {fresh} fresh, MinIdlePods {keep}"
                )

    # -- rules ---------------------------------------------------------------------------------------

    @initialize(salt=st.integers(min_value=0, max_value=2**16))
    def which_pods_boot_slowly(self, salt: int) -> None:
        """Each run has pods of its own that boot slowly (usual_boot)."""
        self.boot_salt = salt

    @rule(
        target=jobs,
        kind=st.sampled_from(sorted(VARIANTS)),
        environment=st.sampled_from(ENVIRONMENTS),
        duration=st.sampled_from([10.0, 40.0, 200.0]),
        count=st.integers(min_value=1, max_value=4),
    )
    def schedule_jobs(
        self, kind: str, environment: str | None, duration: float, count: int
    ) -> MultipleResults[int]:
        """Jobs are scheduled, one or a burst: GoCD's scheduler sends their create-agents at its next tick."""
        return multiple(
            *(
                self.stack.gocd.schedule_job(
                    "build", "stage", f"{kind}-{n}", self.profiles[kind], self.cluster, environment, duration
                ).job_id
                for n in range(count)
            )
        )

    @rule(job_id=jobs)
    def create_agent(self, job_id: int) -> None:
        """GoCD (re-)sends create-agent for a waiting job, with a fresh single-use key."""
        job = self.stack.gocd.job(job_id)
        if job.state is not JobState.SCHEDULED:
            return
        key = self.stack.gocd.issue_key(job_id)
        body = wire.create_agent_body(key, *job.profiles(), job.environment, job.identifier())
        self.stack.send(wire.REQUEST_PREFIX + "create-agent", wire.encode(body))

    @rule(pick=st.integers(min_value=0, max_value=50))
    def should_assign_work(self, pick: int) -> None:
        """An idle agent polls now: should-assign-work for each waiting job of its environments."""
        agents = [a for a in self.stack.gocd.agents() if a.can_poll]
        if agents:
            self.stack.gocd.poll_now(agents[pick % len(agents)].agent_id)
            self.stack.settle()

    @rule(job_id=jobs)
    def job_completion(self, job_id: int) -> None:
        """A building job ends now (cancelled: the agent stops at once, and job-completion follows)."""
        if self.stack.gocd.job(job_id).state is JobState.BUILDING:
            self.stack.gocd.cancel_job(job_id)
            self.stack.run_for(0.0)

    @rule(job_id=jobs)
    def cancel_waiting_job(self, job_id: int) -> None:
        """A waiting job is cancelled: GoCD just stops offering it (the plugin hears nothing)."""
        if self.stack.gocd.job(job_id).state is JobState.SCHEDULED:
            self.stack.gocd.cancel_job(job_id)

    @rule()
    def server_ping(self) -> None:
        """A server-ping out of GoCD's rhythm (GoCD pings every minute on its own as time passes)."""
        body = wire.server_ping_body([self.cluster])
        self.stack.send(wire.REQUEST_PREFIX + "server-ping", wire.encode(body))

    @rule(pick=st.integers(min_value=0, max_value=50))
    def evict_pod(self, pick: int) -> None:
        """The node evicts a pod, whatever its state (a busy pod's job is lost, and GoCD reschedules it)."""
        live = [
            p["metadata"]["name"]
            for p in self.stack.pods()
            if p["status"].get("phase") in ("Pending", "Running")
            and not p["metadata"].get("deletionTimestamp")
        ]
        if live:
            self.stack.kubelet.evict(live[pick % len(live)])
            self.stack.settle()

    @rule(
        delay=st.sampled_from([1.0, 5.0, 30.0, 90.0, 400.0, 700.0]),
        fault=st.none() | st.sampled_from(FAULTS),
    )
    def pod_boot(self, delay: float, fault: PodFault | None) -> None:
        """How the next pod created boots: slowly or at once, or failing, never registering, never pulled."""
        self.plans.append(BootPlan(delay, fault))

    @rule(down_s=st.sampled_from([0.0, 5.0, 70.0]), mid_request=st.booleans())
    def backend_restart(self, down_s: float, mid_request: bool) -> None:
        """The backend is killed and started again (memory lost, pods kept); meanwhile GoCD's requests
        fail, and the job-completions sent then are lost for good. `mid_request`: it dies right after
        answering GoCD's next request, before what it does right after (the state writes, the retirement
        a job-completion started): what a kill -9 loses (docs/architecture.md, "What a restart loses")."""
        if mid_request:
            self.crash_after_request = True  # GoCD pings every minute: a request comes
            self.stack.run_until(lambda: self.stack.transport.plugin is None, 2 * PING_S, "a request")
        else:
            self.stack.stop_backend()
        self.stack.run_for(down_s)
        self._start_backend()
        self.completions_since_start = 0

    @rule(first_list_late=st.booleans())
    def credential_change(self, first_list_late: bool) -> None:
        """An admin rotates the cluster profile's token: the next request brings it, and the pool takes a
        new connection over once that connection's first pod list has arrived; with `first_list_late`,
        that list comes only at `first_list_arrives`, and the pool goes on with the connection it has
        meanwhile (docs/architecture.md, "Before the first pod list")."""
        self.token += 1
        new = self._cluster_properties()
        self.stack.gocd.edit_cluster_profile(self.cluster, new)
        self.cluster = new
        self.lists_late = first_list_late

    @precondition(lambda self: self.late_lists)
    @rule()
    def first_list_arrives(self) -> None:
        """The late first pod lists of new connections arrive."""
        self.stack.plugin.backend.lists.extend(self.late_lists)
        self.late_lists.clear()
        self.stack.settle()

    @rule(kind=st.sampled_from(sorted(VARIANTS)), variant=st.integers(min_value=0, max_value=2))
    def profile_edit(self, kind: str, variant: int) -> None:
        """An admin edits an elastic profile: the jobs scheduled from now on carry the new properties;
        those scheduled before keep theirs (GoCD stores a job's profiles with it: the simulated GoCD's
        `edit_cluster_profile` says where), so old and new fingerprints are asked for side by side."""
        self.profiles[kind] = VARIANTS[kind][variant % len(VARIANTS[kind])]

    @rule(seconds=st.sampled_from([1.0, 4.0, 15.0, 30.0, 45.0, 61.0]))
    def seconds_pass(self, seconds: float) -> None:
        """GoCD schedules, polls, completes and pings on its own; pods boot; the backend answers."""
        self.stack.run_for(seconds)

    @rule(seconds=st.sampled_from([90.0, 150.0, 240.0, 400.0, 900.0]))
    def minutes_pass(self, seconds: float) -> None:
        """Long enough for idle timeouts, re-sends and forgetting (a second rule of time, so that time
        passes in about one step of six)."""
        self.stack.run_for(seconds)

    # -- invariants ----------------------------------------------------------------------------------

    @invariant()
    def no_key_in_two_pods(self) -> None:
        """A registration key goes into one pod at most (docs/architecture.md, "Where registration keys
        live"), and none is refused: spent, expired or unknown (SimulatedGoCD.invariant_violations)."""
        assert not self.seen["keys"], self.seen["keys"]
        refused = [r for r in self.stack.gocd.invariant_violations() if r.startswith("registration of pod")]
        assert not refused, refused

    @invariant()
    def no_job_on_two_pods(self) -> None:
        """No job is ever assigned to two pods, and no pod runs two jobs at once: no job had `true` from
        two agents, and busy pods, as the cluster shows them and as the pool holds them, each run a job of
        their own; GoCD assigned no job twice and gave no agent a job while it built another."""
        assert not self.seen["jobs"], self.seen["jobs"]
        shown = Counter(
            job_id_of(annotations.get(labels.ANN_CURRENT_JOB))
            for pod in self._live_pods()
            if (annotations := pod["metadata"].get("annotations") or {}).get(labels.ANN_STATE) == "busy"
        )
        assert all(count == 1 for job, count in shown.items() if job is not None), shown
        pool = self._pool()
        if pool is not None:
            held = Counter(
                r.current_job_id for r in pool.records() if r.state == PodState.BUSY and pool.state.alive(r)
            )
            assert all(count == 1 for job, count in held.items() if job is not None), held
        twice = [v for v in self.stack.gocd.invariant_violations() if not v.startswith("registration of pod")]
        assert not twice, twice

    @invariant()
    def no_busy_pod_deleted(self) -> None:
        """No pod is deleted while GoCD has its agent building a job. The exception docs/architecture.md
        makes: a failed pod (evicted, or its container died) goes even if busy, its job died with it. A pod
        whose agent GoCD no longer lists is not building, whatever the pool thought."""
        assert not self.seen["busy"], self.seen["busy"]

    @invariant()
    def every_request_answered(self) -> None:
        """While it runs, the backend answers every request 200 (no cluster faults here: nothing may
        fail), and GoCD saw no protocol error (a `should-assign-work` neither true nor false, a transport
        that raised)."""
        assert not self.seen["answers"], self.seen["answers"]
        assert self.stack.gocd.stats.protocol_errors == [], self.stack.gocd.stats.protocol_errors

    @invariant()
    def no_idle_pod_past_its_timeout_plus_one_ping(self) -> None:
        """No reuse pod stays idle longer than its idle timeout plus one ping interval, but for the
        MinIdlePods of its fingerprint; a ping that could not reach a synced pool (the backend down, or its
        first pod list still on its way: docs/architecture.md, "Before the first pod list") does not
        count, so the clock for an overstay starts at the first ping that could act."""
        assert not self.seen["idle"], self.seen["idle"]
        now = self.stack.clock.now()
        default = CLUSTER_IDLE_TIMEOUT_S
        groups: dict[str, list[bool]] = {}
        keep: dict[str, int] = {}
        for pod in self._live_pods():
            annotations = pod["metadata"].get("annotations") or {}
            if annotations.get(labels.ANN_STATE) != "idle" or annotations.get(labels.ANN_REUSE) != "true":
                continue
            if pod["status"].get("phase") == "Failed":
                continue
            since = float(annotations[labels.ANN_STATE_SINCE])
            timeout = float(annotations.get(labels.ANN_IDLE_TIMEOUT) or default)
            due = since + timeout
            acted = next((p.at for p in self.pings if p.effective and p.at > due + EPSILON_S), None)
            fingerprint = annotations.get(labels.ANN_FINGERPRINT, "")
            keep[fingerprint] = max(keep.get(fingerprint, 0), int(annotations.get(labels.ANN_MIN_IDLE) or 0))
            groups.setdefault(fingerprint, []).append(acted is not None and now > due + PING_S)
        for fingerprint, overstays in groups.items():
            over = sum(overstays)
            assert over <= keep[fingerprint], (
                f"{over} idle pods of {fingerprint[:12]} past their timeout plus a ping, MinIdlePods "
                f"{keep[fingerprint]}"
            )

    @invariant()
    def bounded_state(self) -> None:
        """What the backend keeps stays within what brought it: per-pod entries within the pods the
        cluster shows, waiting jobs within the create-agents of the last WAITING_TTL_S (and a ping to
        forget them), banked keys within the keys create-agent brought in their lifetime, recipes and
        superseded marks within the profiles asked for, completions kept for the first list only while
        it has not arrived; and the pods within max_pods and pending_pods_count."""
        pods = self.stack.pods()
        usable = [p for p in pods if _usable(p)]
        assert len(usable) <= int(self.cluster["max_pods"]), f"{len(usable)} pods over max_pods"
        pending = [
            p for p in usable if (p["metadata"].get("annotations") or {}).get(labels.ANN_STATE) == "booting"
        ]
        assert len(pending) <= int(self.cluster["pending_pods_count"]), f"{len(pending)} pods booting"
        if self.stack.transport.plugin is None:
            return
        backend = self.stack.backend
        now = self.stack.clock.now()
        recent = [key for at, key in self.create_agents if now - at <= WAITING_TTL_S + PING_S + EPSILON_S]
        young = [key for at, key in self.create_agents if now - at <= backend.keys.max_age_s]
        assert len(backend.keys) <= min(backend.keys.capacity, len(young))
        assert len(backend.job_specs) <= JobSpecs.MAX_ENTRIES
        for pool in backend.pools():
            sizes = pool.state.sizes()
            per_pod = {name: sizes[name] for name in PER_POD}
            # A pod the pool deleted is remembered until the next ping sees the watch no longer show it.
            last_ping = max((p.at for p in self.pings if p.effective), default=-math.inf)
            lately_gone = sum(1 for at in self.gone_at.values() if at >= last_ping)
            assert all(count <= len(pods) + lately_gone for count in per_pod.values()), (
                f"{per_pod}: {len(pods)} pods, {lately_gone} gone since the last ping"
            )
            assert len(pool.records()) <= len(pods)
            assert sizes["waiting_jobs"] <= len(recent), (sizes, len(recent))
            assert sizes["recipes"] <= len(self.asked_for), (sizes, len(self.asked_for))
            assert sizes["superseded"] <= len(self.asked_for), (sizes, len(self.asked_for))
            early = pool.early_completions
            assert early == 0 if pool.synced else early <= self.completions_since_start, early

    def _live_pods(self) -> list[Obj]:
        return [p for p in self.stack.pods() if not p["metadata"].get("deletionTimestamp")]


def _usable(pod: Obj) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    return (
        not pod["metadata"].get("deletionTimestamp")
        and pod["status"].get("phase") not in ("Failed", "Succeeded")
        and annotations.get(labels.ANN_STATE) != "retiring"
    )


# Random on every run (CI keeps looking in new places), no example database (a CI run is the seed and
# nothing else), no deadline (the machine is shared: slowness is not what this looks for).
MACHINE_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=False,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_pool_keeps_every_invariant_whatever_happens_in_whatever_order() -> None:
    """The seed is chosen here, not by Hypothesis, so that it is printed for every failure (Hypothesis
    prints only the `@reproduce_failure` blob of a plain failure, which goes on `PoolMachine`):
    `POOL_MACHINE_SEED=<seed>` runs the same search again."""
    chosen = int(os.environ.get("POOL_MACHINE_SEED") or random.SystemRandom().randrange(2**32))
    try:
        run_state_machine_as_test(seed(chosen)(PoolMachine), settings=MACHINE_SETTINGS)
    except BaseException as error:
        error.add_note(
            f"pool state machine: the search was seed {chosen}; POOL_MACHINE_SEED={chosen} repeats it"
        )
        print(f"pool state machine seed: {chosen}")
        raise
