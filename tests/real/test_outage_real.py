"""An operator's outage on a real kube-apiserver: a busy pool, kube-apiserver killed and started again
after 20 s, and the backend (its own process, as deployed) writes a handful of warning lines, not one
per pod per retry (the annotation writer per pod and per change, urllib3 per reconnect, the watch per
retry, create-agent per job). What the backend does while the API is away is in docs/architecture.md,
"When the Kubernetes API is away"; the lines of a one-minute outage counted with and without the outage
tracker in benchmarks/RESULTS.md section 7.

Every log line of the backend process counts, from every logger (urllib3's included): its stderr is its
whole log. The simulated GoCD and kubelet run in this process on a scaled clock, the backend on real
time. The control plane is this test's own: it is killed and restarted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_agent.clock import ScaledClock
from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, Job, JobState, SimulatedGoCD
from elastic_agent.simulation.gocd_transport import HttpPluginTransport
from elastic_agent.simulation.kubelet import SimulatedKubelet
from elastic_agent.simulation.stack import SwitchableTransport
from tests.support.backend_process import BackendProcess
from tests.support.control_plane import Binaries, ControlPlane
from tests.support.live_stack import wait_until
from tests.support.real_cluster import SPEED, RealCluster
from tests.support.real_kube_fixtures import real_kube_binaries

__all__ = ["real_kube_binaries"]  # fixture, used by name

TOKEN = "outage-test-token"
REUSE = {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "PodSpecType": "properties", "Reuse": "true"}
PODS = 12
OUTAGE_S = 20.0  # real seconds without the API: long enough for every retry loop to spin many times


class Busy:
    """A pool of PODS reuse pods kept busy by the simulated GoCD, the backend as a process."""

    def __init__(self, plane: ControlPlane) -> None:
        self.cluster = RealCluster(plane)
        self.clock = ScaledClock(SPEED)
        self.transport = SwitchableTransport()
        self.gocd = SimulatedGoCD(self.clock, self.transport, GoCDConfig())
        self.callbacks = CallbackServer(self.gocd, TOKEN)
        url = self.callbacks.start()
        self.kubelet = SimulatedKubelet(self.cluster.pod_host, self.clock, self.gocd, boot_delay=10.0)
        self.kubelet.start()
        self.backend = BackendProcess(
            env={"GOCD_ELASTIC_AGENT_TOKEN": TOKEN, "GOCD_ELASTIC_AGENT_CALLBACK_URL": url}
        )
        self.transport.switch(HttpPluginTransport(self.backend.url, TOKEN, url))
        self.profile = {
            "go_server_url": "https://gocd.example.test/go",
            **self.cluster.profile_properties(),
            "namespace": self.cluster.namespace,
            "pending_pods_count": str(PODS),
        }
        self.jobs: list[Job] = []
        self.gocd.start()

    def schedule(self, count: int, duration_s: float = 60.0) -> None:
        for _ in range(count):
            job = self.gocd.schedule_job("p", "s", "j", REUSE, self.profile, None, duration_s)
            self.jobs.append(job)

    def all_done(self) -> bool:
        return all(self.gocd.job(job.job_id).state is JobState.COMPLETED for job in self.jobs)

    def pod_states(self) -> dict[str, str | None]:
        pods, _ = self.cluster.pod_host.list_pods(self.cluster.namespace)
        return {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(labels.ANN_STATE)
                for p in pods}  # fmt: skip

    def stop(self) -> None:
        self.gocd.stop()
        self.backend.kill()
        self.transport.switch(None)
        self.kubelet.stop()
        self.callbacks.stop()
        self.cluster.stop()


@pytest.fixture
def plane(real_kube_binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    with ControlPlane.start(real_kube_binaries, tmp_path / "plane") as own:
        yield own


def warning_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if " WARNING " in line or " ERROR " in line or " CRITICAL " in line]


@pytest.mark.slow
def test_a_kube_apiserver_restart_under_a_busy_pool_is_a_few_log_lines_and_everything_recovers(
    plane: ControlPlane,
) -> None:
    busy = Busy(plane)
    try:
        busy.schedule(PODS)
        wait_until(lambda: len(busy.pod_states()) == PODS, 90, "the pool's pods")
        wait_until(busy.all_done, 90, "the first jobs to complete")
        busy.schedule(2 * PODS)
        logged_before = len(busy.backend.stderr)
        assigned_before = len(busy.gocd.assignments)
        pool = set(busy.pod_states())
        plane.kill_apiserver()
        started = time.monotonic()
        while time.monotonic() - started < OUTAGE_S:
            time.sleep(2)
            busy.schedule(2)
        assigned_during = len(busy.gocd.assignments) - assigned_before
        plane.restart_apiserver()
        wait_until(busy.all_done, 120, "every job to complete after the outage")
        # The pool's pods changed state many times in the outage: the last change is on each of them.
        # (Pods created after it for the jobs that waited may still be booting.)
        idle = lambda: all(busy.pod_states().get(name) == "idle" for name in pool)  # noqa: E731
        wait_until(idle, 60, "every pod of the pool to show its last state")
        said = lambda: busy.backend.stderr[logged_before:]  # noqa: E731
        wait_until(lambda: any("reachable again after" in line for line in said()), 60, "the recovery line")
        time.sleep(5)  # what the backend still has to say about the outage
        lines = warning_lines(busy.backend.stderr[logged_before:])
        assert assigned_during >= PODS, "jobs go on being assigned from memory"
        assert len(lines) <= 3, "".join(lines)  # unreachable, reachable again, and room for one more
        assert any("is unreachable" in line for line in lines)
        assert "reachable again after" in lines[-1]
        assert not busy.gocd.health_messages
        assert not busy.gocd.invariant_violations()
    finally:
        busy.stop()
