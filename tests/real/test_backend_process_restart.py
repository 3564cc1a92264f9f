"""Defect 3 of the earlier attempt (docs/architecture.md, "What the earlier attempt got wrong"), for
real: the backend runs as its own process (`python -m elastic_agent serve`), is killed with SIGKILL (no
chance to save anything) and started again; the idle pod it left behind must be reused, not replaced.
And SIGTERM, which must lose nothing.

The fake Kubernetes API server, the simulated kubelet and the simulated GoCD server (with its callback
endpoint) run in this test process. GoCD and the kubelet run on a scaled clock; the backend and the API
server's timestamps on real time (its 10-minute default idle timeout cannot pass during the test)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from elastic_agent.clock import ScaledClock, SystemClock
from elastic_agent.pool import labels
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, SimulatedGoCD
from elastic_agent.simulation.gocd_transport import (
    REQUEST_PREFIX,
    HttpPluginTransport,
    create_agent_body,
    encode,
)
from elastic_agent.simulation.kubelet import SimulatedKubelet
from elastic_agent.simulation.stack import ClusterUnderTest, FakeCluster, SwitchableTransport
from tests.support.backend_process import BackendProcess
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import SPEED, wait_until
from tests.support.real_cluster import RealCluster
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

TOKEN = "process-restart-token"
CREATE = REQUEST_PREFIX + "create-agent"
REUSE = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties", "Reuse": "true"}


class World:
    """Everything but the backend, in this process: the fake API server, or a real one (`cluster`)."""

    def __init__(self, cluster: ClusterUnderTest | None = None, namespace: str = "default") -> None:
        self.clock = ScaledClock(SPEED)
        self.cluster = cluster if cluster is not None else FakeCluster(SystemClock())
        self.namespace = namespace
        self.transport = SwitchableTransport()
        self.gocd = SimulatedGoCD(self.clock, self.transport, GoCDConfig())
        self.callbacks = CallbackServer(self.gocd, TOKEN)
        self.callback_url = self.callbacks.start()
        self.kubelet = SimulatedKubelet(self.cluster.pod_host, self.clock, self.gocd, boot_delay=10.0)
        self.kubelet.start()
        self.backends: list[BackendProcess] = []
        self.pods_created: list[str] = []
        self.cluster.pod_host.add_listener(self._on_change)

    @property
    def kube(self) -> FakeKubeServer:
        assert isinstance(self.cluster, FakeCluster), "fault injection needs the fake API server"
        return self.cluster.server

    def _on_change(self, kind: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if kind == "ADDED" and name not in self.pods_created:  # a real server's re-list repeats ADDED
            self.pods_created.append(name)

    def start_backend(self) -> BackendProcess:
        backend = BackendProcess(
            env={"GOCD_ELASTIC_AGENT_TOKEN": TOKEN, "GOCD_ELASTIC_AGENT_CALLBACK_URL": self.callback_url}
        )
        self.backends.append(backend)
        self.transport.switch(HttpPluginTransport(backend.url, TOKEN, self.callback_url))
        return backend

    def cluster_profile(self) -> dict[str, str]:
        return {
            "go_server_url": "https://gocd.example.test/go",
            **self.cluster.profile_properties(),
            "namespace": self.namespace,
        }

    def pods(self) -> dict[str, dict[str, str]]:
        pods, _ = self.cluster.pod_host.list_pods(self.namespace)
        return {p["metadata"]["name"]: p["metadata"].get("annotations", {}) for p in pods}

    def stop(self) -> None:
        self.gocd.stop()
        for backend in self.backends:
            backend.kill()
        self.transport.switch(None)
        self.kubelet.stop()
        self.callbacks.stop()
        self.cluster.stop()


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.stop()


@pytest.fixture(params=["fake", "real"])
def any_world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The fake API server, and a real kube-apiserver with the project's Role
    (tests/support/real_cluster.py)."""
    if request.param == "fake":
        w = World()
    else:
        cluster = RealCluster(request.getfixturevalue("real_kube"))
        w = World(cluster, cluster.namespace)
    yield w
    w.stop()


@pytest.mark.slow
def test_idle_pod_is_reused_after_the_backend_process_is_killed_and_restarted(any_world: World) -> None:
    world = any_world
    first_backend = world.start_backend()
    world.gocd.start()
    first = world.gocd.schedule_job("build", "test", "unit", REUSE, world.cluster_profile(), None, 30)
    wait_until(lambda: world.gocd.job(first.job_id).completed_at, 30, "the first job to complete")
    pod = world.gocd.job(first.job_id).agent_id
    assert pod is not None and world.pods_created == [pod]
    wait_until(lambda: world.pods().get(pod, {}).get(labels.ANN_STATE) == "idle", 10, "the pod to be idle")

    first_backend.kill()
    assert first_backend.process.returncode == -signal.SIGKILL
    world.start_backend()

    second = world.gocd.schedule_job("build", "test", "unit", REUSE, world.cluster_profile(), None, 30)
    wait_until(lambda: world.gocd.job(second.job_id).completed_at, 30, "the second job to complete")
    assert world.gocd.job(second.job_id).agent_id == pod, "the job ran on the pod left idle before the kill"
    assert world.pods_created == [pod], "no new pod was created"
    assert world.gocd.stats.registrations_accepted == 1
    wait_until(
        lambda: world.pods().get(pod, {}).get(labels.ANN_JOBS_RUN) == "2", 10, "the pod to count two jobs"
    )
    assert not world.gocd.invariant_violations()
    assert "reused pod" in world.gocd.job(second.job_id).console_text


@pytest.mark.slow
def test_sigterm_answers_the_request_in_flight_writes_the_queued_pod_states_and_exits_0(world: World) -> None:
    backend = world.start_backend()
    world.gocd.start()
    firsts = [world.gocd.schedule_job("build", "test", f"unit-{n}", REUSE, world.cluster_profile(), None, 30)
              for n in range(2)]  # fmt: skip
    for job in firsts:
        wait_until(lambda job=job: world.gocd.job(job.job_id).completed_at, 30, "the first jobs to complete")
    pods = {world.gocd.job(job.job_id).agent_id for job in firsts}
    assert len(pods) == 2 and None not in pods
    idle = lambda: all(world.pods().get(p or "", {}).get(labels.ANN_STATE) == "idle" for p in pods)  # noqa: E731
    wait_until(idle, 10, "both pods to be idle")
    # The writer is slow on purpose: the next patch takes 3 s, so a second pod's change still waits in
    # its queue behind it when the service has answered the request in flight (a creation of 0.5 s).
    faults_of(world.kube).add("PATCH", r"/pods/", status=None, delay=3.0, times=1)
    faults_of(world.kube).add("POST", r"/pods$", status=None, delay=0.5, times=1)

    cluster = world.cluster_profile()
    seconds = [
        world.gocd.schedule_job("build", "test", f"long-{n}", REUSE, cluster, None, 3600) for n in range(2)
    ]
    for job in seconds:
        wait_until(lambda job=job: world.gocd.job(job.job_id).agent_id, 20, "the second jobs to be assigned")
    world.gocd.stop()  # GoCD asks nothing more; what follows is the bridge's own request and the signal
    one_per_job = {**REUSE, "Reuse": "false"}
    job = {**seconds[0].identifier(), "job_id": 999_999}
    create = encode(create_agent_body("a-key", one_per_job, world.cluster_profile(), None, job))
    answers: list[tuple[int, str]] = []
    transport = HttpPluginTransport(backend.url, TOKEN, world.callback_url)
    in_flight = threading.Thread(target=lambda: answers.append(transport.send(CREATE, create)))
    in_flight.start()
    time.sleep(0.2)  # the creation is on its way to the (slow) API server

    signalled = time.monotonic()
    backend.process.send_signal(signal.SIGTERM)
    returncode = backend.process.wait(15)
    took = time.monotonic() - signalled
    in_flight.join(10)

    assert returncode == 0 and took < 10, (returncode, took, backend.stderr[-5:])
    assert answers and answers[0][0] == 200, answers
    for job in seconds:
        annotations = world.pods()[world.gocd.job(job.job_id).agent_id or ""]
        assert annotations.get(labels.ANN_STATE) == "busy", "a state change made before SIGTERM is on the pod"
        assert f'"job_id":{job.job_id}' in annotations.get(labels.ANN_CURRENT_JOB, "")
    assert len(world.pods()) == 3, "the pod of the request in flight was created"
