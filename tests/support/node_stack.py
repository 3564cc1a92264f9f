"""The whole system on a real node: the backend (the product, over HTTP) manages pods on the real node's
control plane (tests/support/real_node.py) with a ServiceAccount token bound to exactly the project's Role;
the node's kubelet, containerd and runc run each pod, whose one container is the stand-in agent of the agent
image (tests/support/agent_image.py); the agent registers with the simulated GoCD server's agent API on
127.0.0.1 and runs its jobs there. No simulated kubelet runs, and everything is in real time (SystemClock).

The same scenarios run on the fake cluster (`fake_stack`): the project's fake API server, the simulated
kubelet and the stand-in agent as a process per pod, with the same elastic profile (`agent_profile`), so
what the plugin is shown to do on a real node keeps the fake honest. The fake's kubelet is told what the
node does with a pod that cannot run there (`as_the_node_would`): an image the node lacks, too much CPU.

Pods reach the agent API because the pods use the host's network (`hostNetwork: true`); the pod's
GO_EA_SERVER_URL names the server as a pod network would, so the profile's Environment gives
STANDIN_SERVER_URL, where the stand-in goes instead, with the stand-in's short intervals. The image is
imported into the node's containerd, and pods name it with imagePullPolicy IfNotPresent, as the plugin's
own properties mode does: nothing is ever pulled.

    stack = node_stack(real_node, agent_image)            # or fake_stack()
    job = stack.gocd.schedule_job("build", "stage", "compile", agent_profile(stack, agent_image.name),
                                  stack.cluster_profile(), duration_s=2.0)
"""

from __future__ import annotations

import itertools
import json
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from elastic_agent.clock import SystemClock
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.kubelet import PodFault
from elastic_agent.simulation.stack import Stack, StackOptions
from profiles.quantities import parse_cpu
from tests.support import node_images
from tests.support.agent_image import AgentImage, build
from tests.support.doubles.standin_agent import standin_command
from tests.support.paths import ROOT
from tests.support.real_cluster import SERVICE_ACCOUNT, project_role
from tests.support.real_node import RealNode

# The stand-in's intervals, shortened (real seconds: its defaults are GoCD's 5 s ping, 1 s to 10 s work).
FAST_AGENT = {
    "STANDIN_PING_S": "0.5",
    "STANDIN_WORK_DELAY_S": "0.1",
    "STANDIN_WORK_INTERVAL_S": "0.3",
    "STANDIN_REGISTER_RETRY_S": "0.2",
}
# The simulated server in real time, its loops shortened so that a scenario takes seconds: a server-ping
# every 2 s, an agent lost 10 s after its last ping; an in-process agent asks for work as the stand-in does.
FAST_GOCD = {
    "scheduler_interval_s": 0.5,
    "get_work_delay_s": float(FAST_AGENT["STANDIN_WORK_DELAY_S"]),
    "get_work_interval_s": float(FAST_AGENT["STANDIN_WORK_INTERVAL_S"]),
    "ping_interval_s": 2.0,
    "lost_contact_after_s": 10.0,
}
GRACE_PERIOD_S = 5  # the pods' terminationGracePeriodSeconds: the agent exits well within it
BOOT_DELAY_S = 1.0  # the fake kubelet's start of a container; the node takes about as long
# What the fake's pods name: the fake kubelet runs the stand-in whatever the image.
FAKE_IMAGE = "localhost/gocd-reuse-standin-agent:fake"
FAKE_NODE_MILLICORES = 2000  # this machine's two cores, as the real node reports them
INSUFFICIENT_CPU = (
    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No "
    "preemption victims found for incoming pod."
)
_namespaces = itertools.count(1)
BUSY_BUDGET = ROOT / "docker" / "kubernetes" / "pdb.yaml"


def apply_busy_budget(api: client.ApiClient, namespace: str) -> None:
    """The install's PodDisruptionBudget (docker/kubernetes/pdb.yaml), as shipped, in `namespace`."""
    budget = yaml.safe_load(BUSY_BUDGET.read_text())
    budget["metadata"]["namespace"] = namespace
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(namespace, budget)


def fake_admin(url: str) -> client.ApiClient:
    """An admin's client of the fake API server: the cluster profile's token (the fake demands none)."""
    configuration = client.Configuration(host=url)
    configuration.api_key = {"BearerToken": "cluster-token"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


class NodeCluster:
    """The real node's control plane, as the backend sees it: a namespace of its own and a ServiceAccount
    bound to the project's Role, whose token and the plane's CA make the cluster profile. Pods are read
    with the admin's credentials, as the JSON the API serves."""

    def __init__(self, node: RealNode, namespace: str | None = None) -> None:
        self.node = node
        self.namespace = namespace or f"node-e2e-{next(_namespaces)}"
        node.plane.create_namespace(self.namespace)
        node.plane.apply_role(self.namespace, project_role(), SERVICE_ACCOUNT)
        self.token = node.plane.service_account_token(self.namespace, SERVICE_ACCOUNT, 3600)
        self.url = node.plane.url
        self.core = node.core()
        apply_busy_budget(self.core.api_client, self.namespace)

    def profile_properties(self) -> dict[str, str]:
        return {
            "kubernetes_cluster_url": self.url,
            "security_token": self.token,
            "kubernetes_cluster_ca_cert": self.node.plane.ca_pem,
        }

    def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        answer = self.core.list_namespaced_pod(namespace, _preload_content=False)
        items: list[dict[str, Any]] = json.loads(answer.data)["items"]
        return items

    def stop(self) -> None:
        """The namespace's pods go at once, so that the next scenario's node runs nothing of this one."""
        self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)


def imported_agent_image(node: RealNode) -> AgentImage:
    """The agent image, built (a lookup once scripts/test.sh has built it) and imported into the node."""
    built = build()
    node.import_image(node_images.ImageArchive(built.name, built.archive))
    return built


def node_stack(node: RealNode, **gocd: Any) -> Stack:
    """A stack whose pods the real node runs; `gocd` overrides FAST_GOCD."""
    cluster = NodeCluster(node)
    options = StackOptions(gocd=GoCDConfig(**{**FAST_GOCD, **gocd}), namespace=cluster.namespace,
                           agent_api=True)  # fmt: skip
    return Stack(SystemClock(), options, cluster)


def as_the_node_would(pod: Obj) -> PodFault | None:
    """What the real node does with a pod that cannot run there, for the fake's kubelet: an image it does
    not have cannot be pulled (no registry is reachable), and a pod asking more CPU than the node has
    stays unscheduled, with the scheduler's words for one node (pkg/scheduler/framework/plugins/
    noderesources/fit.go, "Insufficient cpu"; the preemption's line of pkg/scheduler/framework/
    preemption/preemption.go)."""
    container = pod["spec"]["containers"][0]
    if container.get("image") != FAKE_IMAGE:
        return PodFault("image_pull")
    cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
    if cpu is not None and parse_cpu(str(cpu)).millicores > FAKE_NODE_MILLICORES:
        return PodFault("unschedulable", message=INSUFFICIENT_CPU)
    return None


def fake_stack(**gocd: Any) -> Stack:
    """The same on the fake cluster: the simulated kubelet starts each pod's stand-in agent as a process."""
    options = StackOptions(boot_delay=BOOT_DELAY_S, gocd=GoCDConfig(**{**FAST_GOCD, **gocd}),
                           agent_processes={}, agent_command=standin_command,
                           faults=as_the_node_would)  # fmt: skip
    stack = Stack(SystemClock(), options)
    apply_busy_budget(fake_admin(stack.kube.url), options.namespace)
    return stack


def agent_pod_template(image: str, container: Mapping[str, Any] | None = None) -> str:
    """The profile's pod: one agent container of `image` on the host's network, never restarted in place
    (an agent that exits is done); `container` adds or replaces fields of the container."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "e2e-agent-{{ POD_POSTFIX }}"},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": GRACE_PERIOD_S,
            "containers": [
                {"name": "agent", "image": image, "imagePullPolicy": "IfNotPresent", **(container or {})}
            ],
        },
    }
    return yaml.safe_dump(pod, sort_keys=False)


def agent_profile(
    stack: Stack, image: str, container: Mapping[str, Any] | None = None, **overrides: str
) -> dict[str, str]:
    """A reusing elastic profile whose pods run the stand-in agent of `image`, reaching this stack's agent
    API on loopback; `overrides` are further profile properties (IdleTimeout, Environment...)."""
    assert stack.agent_api is not None, "the stack serves no agent API"
    environment = {"STANDIN_SERVER_URL": stack.agent_api.url, **FAST_AGENT}
    profile = stack.elastic_profile(
        Reuse="true",
        PodSpecType="yaml",
        PodConfiguration=agent_pod_template(image, container),
        Environment="\n".join(f"{name}={value}" for name, value in environment.items()),
    )
    profile.pop("Image")
    profile.update(overrides)
    return profile


@dataclass
class World:
    """A scenario's stack and what it needs to name: the agent image, and the real node (None on the
    fake cluster)."""

    stack: Stack
    image: str
    node: RealNode | None

    def profile(self, container: Mapping[str, Any] | None = None, **overrides: str) -> dict[str, str]:
        return agent_profile(self.stack, self.image, container, **overrides)


WorldMaker = Callable[..., World]


@pytest.fixture(params=["fake", "node"])
def make_world(request: pytest.FixtureRequest) -> Iterator[WorldMaker]:
    """Worlds of the parameter's kind (`make_world(**gocd)`), stopped after the test. The node's fixture
    is asked for only by the node's runs, so the fake's runs need no node."""
    stacks: list[Stack] = []
    node: RealNode | None = None
    image = FAKE_IMAGE
    if request.param == "node":
        node = request.getfixturevalue("real_node")
        image = request.getfixturevalue("agent_image_on_node").name

    def make(**gocd: Any) -> World:
        stack = fake_stack(**gocd) if node is None else node_stack(node, **gocd)
        stacks.append(stack)
        return World(stack, image, node)

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture(scope="session")
def agent_image_on_node(real_node: RealNode) -> AgentImage:
    return imported_agent_image(real_node)


def container_pids(pod_uid: str, container_id: str) -> list[int]:
    """The host's pids of one container of a pod: the processes in that container's cgroup (the kubelet's
    cgroupfs layout, kubepods/<qos>/pod<uid>/<container id>)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue  # gone meanwhile
        if f"pod{pod_uid}/{container_id}" in cgroups:
            pids.append(int(entry.name))
    return pids


def kill_agent(world: World, pod: Mapping[str, Any]) -> None:
    """SIGKILL the agent in the pod's container, as the kernel or an operator would: on the node the
    container's processes, found by its cgroup; on the fake the agent process."""
    name = pod["metadata"]["name"]
    if world.node is None:
        processes = world.stack.agent_processes
        process = processes.process(name) if processes is not None else None
        assert process is not None, f"no agent process for pod {name}"
        process.send_signal(signal.SIGKILL)
        return
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    pids = container_pids(pod["metadata"]["uid"], container_id)
    assert pids, f"no process in the cgroup of pod {name}'s container"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def admin_core(world: World) -> client.CoreV1Api:
    if world.node is not None:
        return world.node.core()
    return client.CoreV1Api(fake_admin(world.stack.kube.url))


def evict(world: World, name: str) -> None:
    """What `kubectl drain` and the cluster autoscaler send: a policy/v1 Eviction of the pod."""
    namespace = world.stack.options.namespace
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    admin_core(world).create_namespaced_pod_eviction(name, namespace, eviction)
