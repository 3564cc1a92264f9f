"""Churn: hundreds of jobs across reuse profiles, environments and pipelines, in bursts, with the backend
restarted twice and idle pods evicted, in virtual time (the simulated GoCD server, the in-process backend
and the simulated cluster). Afterwards every invariant of docs/architecture.md is checked, and nothing is
left behind."""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from elastic_agent.clock import SystemClock
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.simulation.gocd_model import Job, JobState
from profiles.cluster import ClusterProfile
from profiles.fingerprint import label_form
from tests.support.doubles.harness import VirtualStack
from tests.support.virtual_helpers import virtual_stack

# Simulated seconds a ping may take to be answered and its retirements to show on the cluster.
SLACK_S = 10.0
CLUSTER_IDLE_TIMEOUT_S = 180.0
SECURITY_TOKEN = "s3cr3t-cluster-token-do-not-leak"
PROFILE_SECRET = "hunter2-resolved-secret-value"
FOREIGN_POD = "foreign-server-pod"

PROFILES: dict[str, dict[str, str]] = {
    "small": {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "Reuse": "true"},
    "big": {
        "Image": "gocd/gocd-agent-ubuntu-22.04:v24.1.0",
        "MaxMemory": "2Gi",
        "Reuse": "true",
        "MaxJobsPerPod": "3",
        "IdleTimeout": "2m",
    },
    "scoped": {
        "Image": "gocd/gocd-agent-alpine-3.19:v24.1.0",
        "MaxMemory": "512Mi",
        "Reuse": "true",
        "ReuseScope": "pipeline",
        "Environment": f"API_PASSWORD={PROFILE_SECRET}",
    },
    "single": {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "MaxMemory": "1Gi", "Reuse": "false"},
}
IDLE_TIMEOUT_S = {"small": CLUSTER_IDLE_TIMEOUT_S, "big": 120.0, "scoped": CLUSTER_IDLE_TIMEOUT_S}
PIPELINES = ("app", "lib")
ENVIRONMENTS = (None, "staging")


@dataclass
class PodHistory:
    """What the cluster showed of one pod, in the order the store changed it."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    env: dict[str, str]
    resource_version: int = 0
    state: str | None = None
    state_changed_at: float = 0.0  # clock time the store first showed the current state
    state_since: float | None = None
    values_seen: set[str] = field(default_factory=set)  # every label and annotation value ever
    gone_at: float | None = None
    timeline: list[tuple[float, str | None]] = field(default_factory=list)


class ClusterWatcher:
    """Listens to the fake cluster's store (every version of every pod, as it happens) and to the pings
    GoCD sent, to hold the backend to "no pod outlives its idle timeout by more than one ping".

    The simulated GoCD pings every 60 s of its clock, but a busy machine can delay a ping by many
    simulated seconds; so the rule is checked against the pings really answered: an idle pod whose idle
    timeout had passed when a ping began must be gone (or busy again) once that ping is answered."""

    def __init__(self, stack: VirtualStack, timeout_of: Callable[[PodHistory], float]) -> None:
        self.stack = stack
        self.timeout_of = timeout_of
        self.pods: dict[str, PodHistory] = {}
        self.pings: list[tuple[float, float]] = []  # (sent, answered 200) in clock time
        self.violations: list[str] = []
        self.checking = True
        self._lock = threading.Lock()
        stack.store.add_listener(self._on_change)

    def ping_answered(self, sent_at: float, answered_at: float) -> None:
        with self._lock:
            self.pings.append((sent_at, answered_at))

    def _on_change(self, kind: str, pod: dict[str, Any]) -> None:
        now = self.stack.clock.now()
        meta = pod["metadata"]
        version = int(meta["resourceVersion"])
        with self._lock:
            history = self.pods.get(meta["name"])
            if history is None:
                containers = pod.get("spec", {}).get("containers") or [{}]
                env = {e["name"]: e.get("value", "") for e in containers[0].get("env") or []}
                history = PodHistory(meta["name"], {}, {}, env)
                self.pods[meta["name"]] = history
            if version < history.resource_version:
                return  # an older version delivered late by another thread
            if self.checking:
                self._check_overstay(history, now)
            history.resource_version = version
            history.labels = dict(meta.get("labels") or {})
            history.annotations = dict(meta.get("annotations") or {})
            history.values_seen |= set(history.labels.values()) | set(history.annotations.values())
            state = history.annotations.get(labels.ANN_STATE)
            if state != history.state:
                history.state, history.state_changed_at = state, now
                history.timeline.append((round(now), state))
            since = history.annotations.get(labels.ANN_STATE_SINCE)
            history.state_since = float(since) if since else None
            if kind == "DELETED" or meta.get("deletionTimestamp"):
                history.gone_at = history.gone_at or now

    def _missed_by_a_ping(self, due: float, now: float) -> tuple[float, float] | None:
        """A ping sent after `due` and answered (with time to spare) before `now`."""
        return next(((s, a) for s, a in self.pings if s > due + 1.0 and a + SLACK_S < now), None)

    def _check_overstay(self, history: PodHistory, now: float) -> None:
        if history.gone_at is not None or history.name == FOREIGN_POD:
            return
        if history.state == "idle" and history.state_since is not None:
            expired = history.state_since + self.timeout_of(history)
            ping = self._missed_by_a_ping(expired, now)
            if ping is not None:
                self.violations.append(
                    f"pod {history.name} idle since {history.state_since:.0f} (expired {expired:.0f}) "
                    f"survived the ping of {ping[0]:.0f}-{ping[1]:.0f}; seen at {now:.0f}: {history.timeline}"
                )
        if history.state == "retiring":
            ping = self._missed_by_a_ping(history.state_changed_at, now)
            if ping is not None:
                self.violations.append(
                    f"pod {history.name} retiring since {history.state_changed_at:.0f} survived the ping "
                    f"of {ping[0]:.0f}-{ping[1]:.0f}: {history.timeline}"
                )

    def check_all_now(self) -> None:
        now = self.stack.clock.now()
        with self._lock:
            if self.checking:
                for history in self.pods.values():
                    self._check_overstay(history, now)

    def stop_checking(self) -> None:
        with self._lock:
            self.checking = False


def profile_of(job: Job) -> str:
    return next(name for name, props in PROFILES.items() if props == job.elastic_profile_properties)


def expected_fingerprint(specs: JobSpecs, job: Job) -> str:
    cluster = ClusterProfile.from_properties(job.cluster_profile_properties)
    return specs.spec(job.elastic_profile_properties, cluster, job.environment, job.pipeline).fingerprint


def add_foreign_pod(stack: VirtualStack, fingerprint: str) -> dict[str, Any]:
    """A pod of another GoCD server in the same namespace, idle for hours, of a fingerprint our jobs use:
    everything about it invites reuse or reaping except its server-id label."""
    ours = next(pod for pod in stack.pods() if pod["metadata"]["name"] != FOREIGN_POD)
    metadata = {
        "name": FOREIGN_POD,
        "labels": {**ours["metadata"]["labels"], labels.LABEL_SERVER_ID: "another-gocd-server"},
        "annotations": {
            labels.ANN_STATE: "idle",
            labels.ANN_STATE_SINCE: f"{stack.clock.now() - 7200:.3f}",
            labels.ANN_REUSE: "true",
            labels.ANN_REGISTERED: "true",
            labels.ANN_FINGERPRINT: fingerprint,
            labels.ANN_ENVIRONMENT: "",
            labels.ANN_JOBS_RUN: "4",
        },
    }
    # No GO_EA_* variables: the simulated kubelet runs it, but nothing registers with our GoCD server.
    spec = {"containers": [{"name": "agent", "image": "gocd/gocd-agent-alpine-3.19:v24.1.0"}]}
    stack.store.create_pod(
        stack.namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    )
    return metadata


def evict_one_idle_pod(stack: VirtualStack) -> str | None:
    """Evict an idle pod whose agent is idle, at a moment no job waits (so none can be assigned to it
    between the look and the eviction: only this test schedules jobs)."""
    if any(job.state is JobState.SCHEDULED for job in stack.gocd.jobs()):
        return None
    for pod in stack.pods():
        meta = pod["metadata"]
        agent = stack.gocd.agent(meta["name"])
        if (
            meta["name"] != FOREIGN_POD
            and meta.get("annotations", {}).get(labels.ANN_STATE) == "idle"
            and not meta.get("deletionTimestamp")
            and pod["status"].get("phase") == "Running"
            and agent is not None
            and agent.running_job_id is None
        ):
            stack.kubelet.evict(meta["name"])
            return str(meta["name"])
    return None


@pytest.mark.slow
def test_churn_with_restarts_and_evictions_keeps_every_invariant_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = virtual_stack(boot_delay=10.0)
    rng = random.Random(20240611)
    cluster = stack.cluster_profile(idle_timeout="3m", pending_pods_count="20", security_token=SECURITY_TOKEN)
    specs = JobSpecs(SystemClock(), lambda url: "")

    def timeout_of(history: PodHistory) -> float:
        seconds = history.annotations.get(labels.ANN_IDLE_TIMEOUT)
        by_fingerprint = fingerprint_timeouts.get(history.annotations.get(labels.ANN_FINGERPRINT, ""))
        return by_fingerprint or (float(seconds) if seconds else CLUSTER_IDLE_TIMEOUT_S)

    fingerprint_timeouts: dict[str, float] = {}
    watcher = ClusterWatcher(stack, timeout_of)

    # Every registration key GoCD hands out, to look for it where it must never be.
    issued_keys: set[str] = set()
    send = stack.transport.send_value  # the simulated server's requests, as values

    def recording_send(name: str, body: dict[str, Any]) -> tuple[int, str]:
        if name.endswith(".server-ping"):
            sent_at = stack.clock.now()
            answer = send(name, body)
            if answer[0] == 200:
                watcher.ping_answered(sent_at, stack.clock.now())
            return answer
        if name.endswith(".create-agent"):
            issued_keys.add(body["auto_register_key"])
        return send(name, body)

    monkeypatch.setattr(stack.transport, "send_value", recording_send)

    bursts, per_burst = 15, 20
    restart_after = {4, 9}
    evict_after = {2, 6, 11}
    long_gap_after = {7}
    evictions: list[str] = []
    foreign: dict[str, Any] | None = None
    for burst in range(bursts):
        for _ in range(per_burst):
            name = rng.choices(list(PROFILES), weights=[6, 2, 2, 1])[0]
            environment = rng.choice(ENVIRONMENTS)
            pipeline = rng.choice(PIPELINES)
            job = stack.gocd.schedule_job(
                pipeline, "test", f"{name}-{burst}", PROFILES[name], cluster, environment, rng.uniform(10, 45)
            )
            stack.run_for(rng.uniform(0.0, 5.0))  # a burst arrives over a minute or so
            if name != "single":
                fingerprint_timeouts[expected_fingerprint(specs, job)] = IDLE_TIMEOUT_S[name]
        if burst in restart_after:
            stack.run_for(rng.uniform(5, 40))  # mid-flight: agents polling, jobs running, pods booting
            stack.restart_backend()
        if foreign is None and stack.pods():
            small = next(j for j in stack.gocd.jobs() if profile_of(j) == "small" and not j.environment)
            foreign = add_foreign_pod(stack, expected_fingerprint(specs, small))
        # Now and then a gap longer than the idle timeout: pods idle out mid-run, new ones come after.
        gap = 150.0 if burst in evict_after else 330.0 if burst in long_gap_after else rng.uniform(30, 120)
        waited = 0.0
        while waited < gap:
            stack.run_for(15.0)
            waited += 15.0
            watcher.check_all_now()
            if burst in evict_after and waited in (90.0, 105.0):
                evicted = evict_one_idle_pod(stack)
                if evicted:
                    evictions.append(evicted)

    jobs = stack.gocd.jobs()

    def all_completed() -> bool:
        watcher.check_all_now()
        return all(j.state is JobState.COMPLETED for j in stack.gocd.jobs())

    stack.run_until(all_completed, 3600, "every job to complete")
    watcher.check_all_now()
    # Settle: the last idle pods time out at their pace, checked on the way.
    stack.run_for(60.0)
    watcher.check_all_now()
    watcher.stop_checking()
    assert not watcher.violations, watcher.violations[:10]

    # ---- no job twice, no agent with two jobs at once, no busy pod deleted -------------------------
    assert not stack.gocd.invariant_violations()
    assert not stack.gocd.stats.deleted_while_building
    assert stack.gocd.stats.jobs_rescheduled == 0, "a job lost its pod while building"
    assert len(jobs) == bursts * per_burst
    assignments = stack.gocd.assignments
    assert Counter(a.job_id for a in assignments) == Counter(j.job_id for j in jobs), "each job exactly once"
    by_agent: dict[str, list[Any]] = defaultdict(list)
    for assignment in assignments:
        by_agent[assignment.agent_id].append(assignment)
    for agent_id, runs in by_agent.items():
        runs.sort(key=lambda a: a.assigned_at)
        for earlier, later in itertools.pairwise(runs):
            assert earlier.finished_at is not None and earlier.finished_at <= later.assigned_at, (
                f"{agent_id} took job {later.job_id} while running {earlier.job_id}"
            )

    # ---- every job ran on a pod of its environment and fingerprint ---------------------------------
    registered_env = {r.pod_name: r.environments for r in stack.gocd.registrations}
    for job in jobs:
        assert job.agent_id is not None
        pod = watcher.pods[job.agent_id]
        fingerprint = expected_fingerprint(specs, job)
        assert pod.annotations[labels.ANN_FINGERPRINT] == fingerprint, f"job {job.job_id} on a foreign pod"
        assert pod.labels[labels.LABEL_FINGERPRINT] == label_form(fingerprint)
        assert pod.annotations[labels.ANN_ENVIRONMENT] == (job.environment or "")
        assert pod.env["GO_EA_AUTO_REGISTER_ENVIRONMENT"] == (job.environment or "")
        assert registered_env[job.agent_id] == frozenset({job.environment} if job.environment else ())

    jobs_by_agent: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        jobs_by_agent[job.agent_id or ""].append(job)
    for agent_id, ran in jobs_by_agent.items():
        kinds = {profile_of(j) for j in ran}
        assert len(kinds) == 1, f"{agent_id} ran jobs of {kinds}"
        kind = kinds.pop()
        if kind == "single":
            assert len(ran) == 1, f"Reuse=false pod {agent_id} ran {len(ran)} jobs"
        if kind == "big":
            assert len(ran) <= 3, f"MaxJobsPerPod=3 pod {agent_id} ran {len(ran)} jobs"
        if kind == "scoped":
            assert len({j.pipeline for j in ran}) == 1, (
                f"ReuseScope=pipeline pod {agent_id} crossed pipelines"
            )

    # ---- reuse: far fewer pods than jobs; one pod per job without it ----------------------------------
    ours = {name: h for name, h in watcher.pods.items() if name != FOREIGN_POD}
    reuse_pods = [h for h in ours.values() if h.annotations.get(labels.ANN_REUSE) == "true"]
    single_pods = [h for h in ours.values() if h.annotations.get(labels.ANN_REUSE) == "false"]
    reuse_jobs = [j for j in jobs if profile_of(j) != "single"]
    single_jobs = [j for j in jobs if profile_of(j) == "single"]
    per_profile = {
        kind: (
            sum(1 for j in jobs if profile_of(j) == kind),
            len({j.agent_id for j in jobs if profile_of(j) == kind}),
        )
        for kind in PROFILES
    }
    assert len(reuse_pods) * 2 < len(reuse_jobs), f"(jobs, pods) per profile: {per_profile}"
    assert per_profile["small"][1] * 3 < per_profile["small"][0], f"(jobs, pods) per profile: {per_profile}"
    assert len(single_pods) == len(single_jobs)
    assert max(len(ran) for ran in jobs_by_agent.values()) >= 4, "some pod ran several jobs"
    assert len(evictions) >= 2, "the run evicted idle pods"

    # ---- the backend itself never failed: non-200 answers only while it was down ---------------------
    failures = stack.gocd.stats.non_200_answers
    assert all(f.status in (502, 503) for f in failures), [(f.request_name, f.status) for f in failures]

    # ---- no secret on any pod --------------------------------------------------------------------
    assert issued_keys
    secrets = issued_keys | {SECURITY_TOKEN, PROFILE_SECRET}
    for history in ours.values():
        for value in history.values_seen:
            leaked = [s for s in secrets if s in value]
            assert not leaked, f"pod {history.name} shows a secret in a label or annotation"

    # ---- after the idle timeout and a couple of pings: nothing left but the other server's pod ----------
    stack.run_for(CLUSTER_IDLE_TIMEOUT_S + 1)
    stack.run_until(
        lambda: [p["metadata"]["name"] for p in stack.pods()] == [FOREIGN_POD] and not stack.gocd.agents(),
        600,
        "every pod and agent to be removed",
    )
    assert foreign is not None
    survivor = stack.pods()[0]["metadata"]
    assert survivor["labels"] == foreign["labels"] and survivor["annotations"] == foreign["annotations"]
    assert not survivor.get("deletionTimestamp")
    assert FOREIGN_POD not in by_agent


# ---- what the churn found: job-completions lost while the backend was down ---------------------------
# GoCD sends job-completion once and never again (docs/architecture.md, "Requests"); a restart at the
# wrong moment loses it, and the ping must make up for it from GoCD's list of agents.


COMPLETION = "cd.go.elastic-agent.job-completion"


def lose_every_job_completion(stack: VirtualStack, monkeypatch: pytest.MonkeyPatch) -> None:
    send = stack.transport.send_value  # the simulated server's requests, as values

    def lossy(name: str, body: dict[str, Any]) -> tuple[int, str]:
        if name == COMPLETION:
            return 502, "backend unreachable: ConnectionError"
        return send(name, body)

    monkeypatch.setattr(stack.transport, "send_value", lossy)


def run_one_after_another(stack: VirtualStack, profile: dict[str, str], count: int) -> list[Job]:
    """Each job once the ping has noticed (from GoCD's list of agents) that the one before is done."""
    jobs = []
    for n in range(count):
        job = stack.gocd.schedule_job("p", "s", f"j{n}", profile, stack.cluster_profile(), None, 10)
        stack.run_until(lambda job=job: stack.gocd.job(job.job_id).completed_at, 900, f"job {n} to complete")
        jobs.append(stack.gocd.job(job.job_id))
        stack.run_until(
            lambda: all(
                p["metadata"].get("annotations", {}).get(labels.ANN_STATE) != "busy" for p in stack.pods()
            ),
            900,
            "the ping to see the pod is no longer busy",
        )
    return jobs


def test_a_job_whose_completion_was_lost_still_counts_toward_max_jobs_per_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = virtual_stack(boot_delay=5.0)
    lose_every_job_completion(stack, monkeypatch)
    jobs = run_one_after_another(stack, stack.elastic_profile(Reuse="true", MaxJobsPerPod="2"), 4)
    assert [f.request_name for f in stack.gocd.stats.non_200_answers].count(COMPLETION) == 4, "all lost"
    per_pod = Counter(job.agent_id for job in jobs)
    assert sorted(per_pod.values()) == [2, 2], f"MaxJobsPerPod=2: {per_pod}"
    assert not stack.gocd.invariant_violations()


def test_a_one_job_pod_whose_completion_was_lost_is_removed_at_a_ping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = virtual_stack(boot_delay=5.0)
    lose_every_job_completion(stack, monkeypatch)
    jobs = run_one_after_another(stack, stack.elastic_profile(Reuse="false"), 2)
    assert [f.request_name for f in stack.gocd.stats.non_200_answers].count(COMPLETION) == 2, "all lost"
    assert len({job.agent_id for job in jobs}) == 2
    stack.run_until(lambda: not stack.pods() and not stack.gocd.agents(), 600, "the pods and agents to go")
    assert not stack.gocd.stats.deleted_while_building
