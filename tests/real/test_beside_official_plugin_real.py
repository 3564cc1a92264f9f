"""This plugin and the official Kubernetes plugin in one namespace, on a real kube-apiserver, as the
install guide's move-over has them: neither deletes, changes or stalls on the other's pods.

The official plugin is the double of tests/support/official_plugin.py: its adoption and termination rules as
its source has them, run against the API server at every simulated minute (GoCD pings each plugin every
minute). It has pods of its own: one whose agent builds until its job completes at minute 20, one whose
agent is idle, one whose agent never registers, and one it creates on the way; by its rules the idle
and the unregistered one go after its auto-register timeout, the first at its job-completion. Meanwhile
this plugin's backend, driven by the simulated GoCD, reuses pods for 30 simulated minutes: one job keeps
a pod busy for longer than that timeout, short jobs come every few minutes, pods stay idle between them.
Any pod of ours the official plugin adopted would be deleted once older than the timeout, busy or not;
one without a numeric job-id label would instead make every refresh of the official plugin fail. Our
pods come from a profile of properties and from a pod template copied from one of its pods, labels and
all.

The backend's Kubernetes client is the product's (KubeCluster), built as the product builds it, in a
subclass that records the name of every pod it creates, patches or deletes. Everything runs on one
clock at 60 times real speed; the API server's timestamps are real time, and the double maps them onto
that clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from elastic_agent.clock import Clock, ScaledClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.port import ClusterPort, PodView
from elastic_agent.pool import labels
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.stack import Stack, StackOptions
from profiles.cluster import ClusterProfile
from tests.support import official_plugin
from tests.support.control_plane import ControlPlane
from tests.support.live_stack import wait_until
from tests.support.official_plugin import OfficialAgent, OfficialPlugin, RefreshFailed
from tests.support.official_pods import COPIED_TEMPLATE, IMAGE
from tests.support.real_cluster import RealCluster
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.stack_helpers import reuse_profile, schedule

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

SPEED = 60.0
MINUTE = 60.0
RUN_MINUTES = 30

TEMPLATES = {
    "properties": {},
    "copied-from-an-official-pod": {"PodSpecType": "yaml", "PodConfiguration": COPIED_TEMPLATE},
}


class RecordingKubeCluster(KubeCluster):
    """The product's adapter, recording (verb, pod name) of every write it makes."""

    def __init__(self, writes: list[tuple[str, str]], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes = writes

    def create_pod(self, manifest: Mapping[str, Any]) -> PodView:
        self.writes.append(("create", str((manifest.get("metadata") or {}).get("name"))))
        return super().create_pod(manifest)

    def patch_pod_metadata(self, name: str, **changes: Any) -> PodView:
        self.writes.append(("patch", name))
        return super().patch_pod_metadata(name, **changes)

    def delete_pod(self, name: str) -> None:
        self.writes.append(("delete", name))
        super().delete_pod(name)


class RecordingFactory:
    """A `ClusterFactory` building RecordingKubeClusters as wsgi.kubernetes_cluster builds the product's."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    def __call__(self, profile: ClusterProfile, identity: PodIdentity, clock: Clock) -> ClusterPort:
        api_client = connect(url=profile.kubernetes_cluster_url, token=profile.security_token,
                             ca_cert=profile.kubernetes_cluster_ca_cert)  # fmt: skip
        return RecordingKubeCluster(self.writes, api_client, profile.namespace, identity.selector(), clock,
                                    request_timeout=profile.cluster_request_timeout)  # fmt: skip


class SideBySide:
    """Both plugins in one namespace of the real API server, on one scaled clock."""

    def __init__(self, plane: ControlPlane) -> None:
        wall_start = time.time()
        self.clock = ScaledClock(SPEED, start=wall_start)
        self.cluster = RealCluster(plane)
        self.factory = RecordingFactory()
        options = StackOptions(boot_delay=10.0, gocd=GoCDConfig(), namespace=self.cluster.namespace,
                               cluster_factory=self.factory)  # fmt: skip
        self.stack = Stack(self.clock, options, self.cluster)
        self.official = OfficialPlugin(
            plane.admin_api_client(), self.cluster.namespace, self.clock,
            server_time=lambda epoch: wall_start + (epoch - wall_start) * SPEED,
        )  # fmt: skip

    def pods(self) -> dict[str, dict[str, Any]]:
        return {pod["metadata"]["name"]: pod for pod in self.stack.pods()}

    def ours(self) -> set[str]:
        plugin = labels.LABEL_PLUGIN_ID
        return {name for name, pod in self.pods().items() if plugin in (pod["metadata"].get("labels") or {})}

    def stop(self) -> None:
        self.stack.stop()


@pytest.fixture
def side_by_side(real_kube: ControlPlane) -> Iterator[SideBySide]:
    world = SideBySide(real_kube)
    yield world
    world.stop()


def _metadata(pod: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    meta = pod["metadata"]
    return dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})


@pytest.mark.slow
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_the_official_plugin_deletes_none_of_our_pods_and_ours_touches_none_of_its_own(
    side_by_side: SideBySide, template: str
) -> None:
    world, official = side_by_side, side_by_side.official
    stack, clock = world.stack, world.clock
    building, idle, unregistered = (official.create_agent(n, IMAGE) for n in (1, 2, 3))
    assert building and idle and unregistered
    official.agents[building] = OfficialAgent(building, agent_state="Building")
    official.agents[idle] = OfficialAgent(idle, agent_state="Idle")
    theirs = {building, idle, unregistered}
    wait_until(lambda: all(world.pods()[name]["status"].get("phase") == "Running" for name in theirs),
               10, "the official plugin's pods to run")  # fmt: skip
    theirs_at_start = {name: _metadata(world.pods()[name]) for name in theirs}

    cluster_profile = stack.cluster_profile(idle_timeout="1h")
    profile = reuse_profile(stack, **TEMPLATES[template])
    long_job = schedule(stack, profile, cluster=cluster_profile, name="long", duration=15 * MINUTE)
    jobs = [long_job]
    seen_at: dict[str, list[int]] = {}  # our pod -> the minutes it was seen at
    start = clock.now()
    for minute in range(RUN_MINUTES):
        if minute % 3 == 0:
            jobs.append(schedule(stack, profile, cluster=cluster_profile, name=f"short-{minute}",
                                 duration=2 * MINUTE))  # fmt: skip
        clock.sleep(start + (minute + 1) * MINUTE - clock.now())
        for name in world.ours():
            seen_at.setdefault(name, []).append(minute)
        if minute == 12:  # a create-agent of its own refreshes as a ping does
            try:
                created = official.create_agent(4, IMAGE)
            except RefreshFailed:
                created = None
            if created is not None:
                official.agents[created] = OfficialAgent(created, agent_state="Building")
                theirs.add(created)
                theirs_at_start[created] = _metadata(world.pods()[created])
        if minute == 20:  # the job on its building agent completes: job-completion deletes that pod
            official.agents[building].agent_state = "Idle"
            official.job_completion(building)
        official.server_ping()

    failures = [ping.failure for ping in official.pings if ping.failure]
    assert not failures, f"{len(failures)} of its {len(official.pings)} pings failed: {failures[0]}"
    ours = set(seen_at)
    assert not set(official.deleted) & ours, "the official plugin deleted pods of ours"
    assert len(theirs) == 4, "its own create-agent worked"
    gone = {idle, unregistered, building}
    assert set(official.deleted) == gone, "it deleted exactly the pods of its own that it should"
    assert set(official.pings[-1].adopted) == theirs - gone, "it adopts its own pods only"

    wait_until(lambda: all(stack.gocd.job(job.job_id).completed_at for job in jobs), 20, "every job to end")
    done = [stack.gocd.job(job.job_id) for job in jobs]
    assert all(job.result == "Passed" and job.rescheduled_as is None for job in done)
    assert not stack.gocd.invariant_violations()
    assert len({job.agent_id for job in done}) < len(jobs) / 2, "pods were reused"
    long_lived = [name for name, minutes in seen_at.items() if minutes[-1] - minutes[0] > 20]
    assert long_lived, "some pod of ours lived far longer than the official plugin's timeout"

    touched = {name for _, name in world.factory.writes} & theirs
    assert not touched, f"this plugin wrote to pods of the official plugin: {touched}"
    pods = world.pods()
    for name in theirs - gone:
        assert _metadata(pods[name]) == theirs_at_start[name], f"pod {name} of the official plugin changed"
    for name in ours & set(pods):
        pod_labels = pods[name]["metadata"].get("labels") or {}
        assert pod_labels.get(official_plugin.KIND_LABEL) != official_plugin.KIND_VALUE
        assert not {official_plugin.CREATED_BY_LABEL, official_plugin.JOB_ID_LABEL} & set(pod_labels)
        if template == "copied-from-an-official-pod":
            assert pod_labels["app"] == "builds", "a label of the template's own stays"

