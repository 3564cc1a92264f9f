"""Reuse under concurrency, with requests sent straight to the backend over HTTP (GoCD calls the plugin
from many threads at once: create-agent threads, the ping thread, agents polling).

GoCD's view of the agents (what list-agents answers) is a table this test controls, so every state the
backend is asked about is known exactly."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_transport import (
    create_agent_body,
    encode,
    job_completion_body,
    server_ping_body,
    should_assign_work_body,
)
from elastic_agent.simulation.stack import Stack
from tests.support.live_stack import ASSIGN, COMPLETE, CREATE, PING, wait_until

REUSE = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "Reuse": "true"}


def job_identifier(job_id: int) -> dict[str, Any]:
    return {
        "pipeline_name": "build",
        "pipeline_label": str(job_id),
        "pipeline_counter": job_id,
        "stage_name": "test",
        "stage_counter": "1",
        "job_name": "unit",
        "job_id": job_id,
    }


class Gocd:
    """Sends GoCD's requests to the backend; answers list-agents from `agents` (id -> agent_state)."""

    def __init__(self, stack: Stack, elastic: dict[str, str], cluster: dict[str, str]) -> None:
        self.stack = stack
        self.elastic = elastic
        self.cluster = cluster
        self.agents: dict[str, str] = {}
        self.deleted_while_building: list[str] = []
        self.lock = threading.Lock()

    def list_agents(self) -> list[dict[str, str]]:
        with self.lock:
            return [
                {"agent_id": name, "agent_state": state, "build_state": state, "config_state": "Enabled"}
                for name, state in self.agents.items()
            ]

    def delete_agents(self, agent_ids: Iterable[str]) -> list[str]:
        with self.lock:
            deleted = [name for name in agent_ids if name in self.agents]
            for name in deleted:
                if self.agents.pop(name) == "Building":
                    self.deleted_while_building.append(name)
            return deleted

    def set_agent(self, name: str, state: str | None) -> None:
        with self.lock:
            if state is None:
                self.agents.pop(name, None)
            else:
                self.agents[name] = state

    def create(self, job_id: int, key: str) -> None:
        body = create_agent_body(key, self.elastic, self.cluster, None, job_identifier(job_id))
        status, text = self.stack.transport.send(CREATE, encode(body))
        assert status == 200, text

    def assign(self, pod: str, job_id: int) -> bool:
        agent = {"agent_id": pod, "agent_state": "Idle", "build_state": "Idle", "config_state": "Enabled"}
        body = should_assign_work_body(agent, None, self.elastic, self.cluster, job_identifier(job_id))
        status, text = self.stack.transport.send(ASSIGN, encode(body))
        assert status == 200 and text in ("true", "false"), (status, text)
        return text == "true"

    def complete(self, pod: str, job_id: int) -> None:
        body = job_completion_body(pod, self.elastic, self.cluster, job_identifier(job_id))
        assert self.stack.transport.send(COMPLETE, encode(body))[0] == 200

    def ping(self) -> None:
        status, text = self.stack.transport.send(PING, encode(server_ping_body([self.cluster])))
        assert status == 200, text


@pytest.fixture
def gocd_for(
    make_stack: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Gocd]]:
    def make(elastic: dict[str, str], boot_delay: float = 10_000, **cluster: str) -> Gocd:
        stack = make_stack(boot_delay=boot_delay, start_gocd=False)
        gocd = Gocd(stack, elastic, stack.cluster_profile(**cluster))
        # The simulated server answers the plugin's list-agents call from list_agents_json.
        monkeypatch.setattr(stack.gocd, "list_agents_json", lambda: json.dumps(gocd.list_agents()))
        monkeypatch.setattr(stack.gocd, "delete_agents", gocd.delete_agents)
        return gocd

    yield make


def pod_annotations(stack: Stack) -> dict[str, dict[str, str]]:
    return {
        p["metadata"]["name"]: p["metadata"].get("annotations", {})
        for p in stack.pods()
        if not p["metadata"].get("deletionTimestamp")
    }


def state_of(stack: Stack, pod: str) -> str | None:
    return pod_annotations(stack).get(pod, {}).get(labels.ANN_STATE)


def make_idle_pods(gocd: Gocd, job_ids: list[int]) -> list[str]:
    """Pods of the REUSE fingerprint, one per job, that ran their job and are idle now."""
    before = set(pod_annotations(gocd.stack))
    for job_id in job_ids:
        gocd.create(job_id, f"key-{job_id}")
    created_for = {
        json.loads(ann[labels.ANN_CREATED_FOR])["job_id"]: name
        for name, ann in pod_annotations(gocd.stack).items()
        if name not in before
    }
    assert sorted(created_for) == sorted(job_ids)
    for job_id, pod in created_for.items():
        assert gocd.assign(pod, job_id)
        gocd.complete(pod, job_id)
    pods = list(created_for.values())
    wait_until(lambda: all(state_of(gocd.stack, pod) == "idle" for pod in pods), 5, "the pods to be idle")
    return pods


@pytest.mark.parametrize(("pending_pods_count", "expected_new_pods"), [("50", 39), ("10", 10)])
def test_create_agent_from_many_threads_creates_exactly_the_missing_pods(
    gocd_for: Callable[..., Gocd], pending_pods_count: str, expected_new_pods: int
) -> None:
    """40 waiting jobs of one fingerprint and one idle pod: 39 pods are missing (or as many as
    pending_pods_count allows), whatever the interleaving of 20 threads and of GoCD's re-sends."""
    gocd = gocd_for(REUSE, pending_pods_count=pending_pods_count)
    (idle,) = make_idle_pods(gocd, [1])
    sends = [(job_id, f"key-{job_id}-a") for job_id in range(100, 140)]
    sends += [(job_id, f"key-{job_id}-b") for job_id in range(100, 140, 2)]  # re-sends with new keys
    sends += [(job_id, f"key-{job_id}-c") for job_id in range(100, 140, 5)]
    random.Random(4).shuffle(sends)
    start = threading.Barrier(20)

    def worker(part: list[tuple[int, str]]) -> None:
        start.wait()
        for job_id, key in part:
            gocd.create(job_id, key)

    with ThreadPoolExecutor(20) as pool:
        for future in [pool.submit(worker, sends[n::20]) for n in range(20)]:
            future.result()

    pods = pod_annotations(gocd.stack)
    new = {name: ann for name, ann in pods.items() if name != idle}
    assert len(new) == expected_new_pods
    assert state_of(gocd.stack, idle) == "idle", "create-agent gives no job to the idle pod"
    if expected_new_pods == 39:  # every job has its pod: none was created twice for a re-sent job
        created_for = Counter(ann[labels.ANN_CREATED_FOR] for ann in new.values())
        assert max(created_for.values()) == 1
    # GoCD keeps re-sending the same 40 jobs: still nothing more than the missing pods.
    for job_id in range(100, 140):
        gocd.create(job_id, f"key-{job_id}-d")
    assert len(pod_annotations(gocd.stack)) == expected_new_pods + 1


def race_assignments_against_pings(gocd: Gocd, pod: str, job_id: int, poll_delay: float) -> list[bool]:
    """12 threads ask should-assign-work (3 times each) while 4 threads ping (twice each), all at once.
    A `true` makes GoCD hand the job over: from then on list-agents shows the agent Building."""
    answers: list[bool] = []
    start = threading.Barrier(16)

    def ask() -> None:
        start.wait()
        time.sleep(random.uniform(0, poll_delay))
        for _ in range(3):
            given = gocd.assign(pod, job_id)
            if given:
                gocd.set_agent(pod, "Building")
            answers.append(given)

    def ping() -> None:
        start.wait()
        for _ in range(2):
            gocd.ping()

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(ask) for _ in range(12)] + [pool.submit(ping) for _ in range(4)]
        for future in futures:
            future.result()
    return answers


def test_a_retiring_pod_is_never_given_a_job_and_a_pod_given_a_job_is_never_retired(
    gocd_for: Callable[..., Gocd],
) -> None:
    """The ping/assign race (docs/architecture.md, "What the earlier attempt got wrong", item 9), 16
    rounds with a fresh pod each: an idle pod past its idle timeout, asked for work by many threads while
    many pings want to retire it. Each round ends one of two ways: the pod took the job (once) and
    survives every ping until its job-completion, or it was retired and never said `true`."""
    gocd = gocd_for({**REUSE, "MaxJobsPerPod": "1"}, boot_delay=1.0, idle_timeout="10m")
    stack = gocd.stack
    retiring_seen: set[str] = set()

    def on_change(kind: str, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("annotations", {}).get(labels.ANN_STATE) == "retiring":
            retiring_seen.add(pod["metadata"]["name"])

    stack.kube.store.add_listener(on_change)
    outcomes: Counter[str] = Counter()
    for round_ in range(16):
        job_id = 1000 + round_
        before = set(pod_annotations(stack))
        gocd.create(job_id, f"key-{job_id}")
        (pod,) = set(pod_annotations(stack)) - before
        gocd.set_agent(pod, "Idle")
        gocd.ping()  # GoCD lists the agent: the pod is registered and idle
        wait_until(lambda pod=pod: state_of(stack, pod) == "idle", 5, "the pod to be idle")
        stack.clock.advance(11 * 60)  # type: ignore[attr-defined]
        # Pings need a list-agents call before they decide; in every other round the polls start a
        # little later, so both sides win the race now and then.
        answers = race_assignments_against_pings(gocd, pod, job_id, 0.0 if round_ % 2 == 0 else 0.15)

        if any(answers):
            outcomes["given"] += 1
            assert answers.count(True) == 1, "the job was given once"
            gocd.ping()
            assert state_of(stack, pod) == "busy", "a pod that took a job is not retired under it"
            assert pod not in retiring_seen, "a pod that took a job was marked retiring"
            gocd.set_agent(pod, "Idle")
            gocd.complete(pod, job_id)  # MaxJobsPerPod=1: it retires now
        else:
            outcomes["retired"] += 1
        wait_until(lambda pod=pod: pod not in pod_annotations(stack), 5, f"pod {pod} to be removed")
        gocd.set_agent(pod, None)
    assert not gocd.deleted_while_building
    assert sum(outcomes.values()) == 16, outcomes


def test_should_assign_work_from_many_threads_gives_each_job_to_one_pod_and_each_pod_one_job(
    gocd_for: Callable[..., Gocd],
) -> None:
    gocd = gocd_for(REUSE)
    stack = gocd.stack
    pods = make_idle_pods(gocd, list(range(1, 9)))
    jobs = list(range(100, 116))
    pairs = [(pod, job) for pod in pods for job in jobs]
    given: list[tuple[str, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def worker(seed: int) -> None:
        order = list(pairs)
        random.Random(seed).shuffle(order)
        start.wait()
        for pod, job in order:
            if gocd.assign(pod, job):
                with lock:
                    given.append((pod, job))

    with ThreadPoolExecutor(12) as pool:
        for future in [pool.submit(worker, seed) for seed in range(12)]:
            future.result()

    by_job = Counter(job for _, job in given)
    by_pod = Counter(pod for pod, _ in given)
    assert max(by_job.values()) == 1, f"jobs given to more than one pod: {by_job.most_common(3)}"
    assert by_pod == Counter(pods), "every idle pod took exactly one job"
    wait_until(lambda: all(state_of(stack, pod) == "busy" for pod in pods), 5, "all pods busy")
    current = {pod: ann[labels.ANN_CURRENT_JOB] for pod, ann in pod_annotations(stack).items() if pod in pods}
    assert len(set(current.values())) == len(pods), "each pod shows its own job"
