"""The official Kubernetes elastic-agent plugin (gocd/kubernetes-elastic-agents, plugin id
`cd.go.contrib.elasticagent.kubernetes`) as far as it finds and deletes pods: a test double that runs its
rules against a real API server, for tests where both plugins share a namespace, as they do while users
move over from it to this plugin.

Written from its source at commit 81281781f9e4318c06ceacec20ba9190f5a35bf4, under
src/main/java/cd/go/contrib/elasticagent/:

- `KubernetesPlugin.handle`: every server-ping first runs `refreshInstancesForCluster`, that is
  `KubernetesAgentInstances.refreshAll`, for each of its cluster profiles, then `ServerPingRequestExecutor`.
  An exception anywhere is caught there, logged, and answered with an error: the ping does nothing more.
  create-agent (`KubernetesAgentInstances.create`) and the status reports refresh the same way.
- `KubernetesAgentInstances.refreshAll`: lists *all* pods of the cluster profile's namespace (fabric8's
  `client.pods().list()`, no label selector; the namespace is the profile's, else the client's default),
  empties its map of instances, and adopts every pod whose label `kind` is `kubernetes-elastic-agent`
  (`Constants.KUBERNETES_POD_KIND_LABEL_KEY`/`_VALUE`), whoever created it. Adopting goes through
  `KubernetesInstanceFactory.fromKubernetesPod`, which parses the label `Elastic-Agent-Job-Id` with
  `Long.valueOf`: on an adopted pod without a numeric one that throws `NumberFormatException`, which
  nothing in `refreshAll` catches, so the refresh fails (with the pods listed before it adopted) and so
  does the request. When the list itself fails, the map is left as it was.
- `ServerPingRequestExecutor.performCleanupForACluster`: from GoCD's `list-agents` (GoCD answers a plugin
  with its own agents only, so never with this plugin's), agents whose instance is older than the
  auto-register timeout (`instancesCreatedAfterTimeout`) and that are Enabled and Idle, Missing or
  LostContact are disabled (`Agents.findInstancesToDisable`); then, from the agents listed again, those
  Disabled and Idle, Missing or LostContact (`findInstancesToTerminate`) are terminated and deleted;
  then `KubernetesAgentInstances.terminateUnregisteredInstances` with that second list.
- `terminateUnregisteredInstances` / `unregisteredAfterTimeout`: every adopted pod whose name is not an
  agent of that list is read again by name (`getPod`; gone: skipped), and deleted when now is after its
  `creationTimestamp` plus the auto-register timeout (`PluginSettings.getAutoRegisterPeriod`:
  `auto_register_timeout` minutes, 10 by default). Nothing asks what the pod is doing: busy pods go too.
- `KubernetesAgentInstances.terminate` (used by the two paths above and by `JobCompletionRequestExecutor`
  for the agent GoCD names, always one of its own): deletes the pod of that name if it is in the map of
  adopted instances (`KubernetesInstance.terminate`: a plain delete by name, default grace period), and
  forgets it. Every pod it ever deletes is therefore an adopted one.
- `ServerPingRequestExecutor.CheckForPossiblyMissingAgents`: its agents without an instance are disabled
  and deleted in GoCD; no pod is touched.
- Elsewhere it selects pods on `Elastic-Agent-Created-By` (`KubernetesCluster.fetchPods`, cluster status
  report) and `Elastic-Agent-Job-Id` (`AgentStatusReportExecutor`), read-only; it creates pods with those
  labels, `kind` and `Elastic-Agent-Environment-Name` (`KubernetesInstanceFactory.labelsFrom`).

Unclear from the source, and how the double decides: `Long.valueOf` also takes a leading `+` and
non-ASCII digits, the double only ASCII digits with an optional sign; fabric8 lists pods in the order the
API server answers (the double: the same order); what fabric8's `delete()` does with a pod already gone
(the double: nothing); the order of `instances.keySet()` (a `ConcurrentHashMap`; the double: list order,
which only matters for the order of deletions). The Java plugin reads its clock and the API server's
timestamps on one wall clock; the double reads `clock` and maps the server's timestamps onto it with
`server_time`, so that it can run in scaled time (the timestamps have whole seconds only).

Pods it creates (`create_agent`) are built as `KubernetesInstanceFactory.createUsingProperties` builds
them, except that the four `GO_EA_AUTO_REGISTER_*` variables are left out: its agents would register with
GoCD under its own plugin id, which the simulated GoCD (this plugin's) does not serve. The double holds
that plugin's agents itself (`agents`), as GoCD's list-agents for its plugin id would answer.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from elastic_agent.clock import Clock

log = logging.getLogger(__name__)

PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes"
# Constants.java
KIND_LABEL = "kind"
KIND_VALUE = "kubernetes-elastic-agent"
CREATED_BY_LABEL = "Elastic-Agent-Created-By"
ENVIRONMENT_LABEL = "Elastic-Agent-Environment-Name"
JOB_ID_LABEL = "Elastic-Agent-Job-Id"
JOB_IDENTIFIER_ANNOTATION = "Elastic-Agent-Job-Identifier"
POD_NAME_PREFIX = "k8s-ea"
DEFAULT_AUTO_REGISTER_TIMEOUT_S = 10 * 60.0

# Agents.findInstancesToDisable / findInstancesToTerminate
_NOT_WORKING = ("Idle", "Missing", "LostContact")
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


class RefreshFailed(Exception):
    """`refreshAll` threw: the request that refreshed (a ping, a create-agent) failed and did nothing."""


@dataclass
class OfficialAgent:
    """One of its agents as GoCD's list-agents describes it."""

    agent_id: str
    agent_state: str = "Idle"  # Idle, Building, LostContact, Missing, Unknown
    config_state: str = "Enabled"  # Pending, Enabled, Disabled


@dataclass(frozen=True)
class Instance:
    """KubernetesInstance: an adopted pod."""

    name: str
    created_at: float  # on the double's clock
    job_id: int
    environment: str | None
    pending: bool  # PodState.fromPod: not Running


@dataclass
class PingOutcome:
    at: float
    adopted: tuple[str, ...] = ()
    deleted: list[str] = field(default_factory=list)
    failure: str | None = None


def _java_long(text: str | None) -> int | None:
    if text is None or not _JAVA_LONG.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


class OfficialPlugin:
    """The official plugin with one cluster profile for `namespace`. `agents` is what GoCD lists as its
    agents; `deleted` every pod it deleted, in order; `pings` the outcome of every server-ping."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        clock: Clock,
        *,
        server_time: Callable[[float], float] = lambda epoch: epoch,
        auto_register_timeout_s: float = DEFAULT_AUTO_REGISTER_TIMEOUT_S,
        max_pending_pods: int = 10,  # PluginSettings.getMaxPendingPods
    ) -> None:
        self.max_pending_pods = max_pending_pods
        self.namespace = namespace
        self.clock = clock
        self.server_time = server_time
        self.timeout_s = auto_register_timeout_s
        self.agents: dict[str, OfficialAgent] = {}
        self.instances: dict[str, Instance] = {}
        self.deleted: list[str] = []
        self.created: list[str] = []
        self.pings: list[PingOutcome] = []
        self._core = client.CoreV1Api(api_client)

    # -- requests from GoCD ---------------------------------------------------------------------------

    def create_agent(self, job_id: int, image: str, environment: str | None = None) -> str | None:
        """create-agent with an elastic profile of properties (`KubernetesAgentInstances.create`): refresh
        (raising RefreshFailed as the request would fail), then one pod for the job, unless an adopted pod
        carries the job's id already (`isAgentCreatedForJob`) or the adopted pods not yet Running reach
        `max_pending_pods` (`SetupSemaphore`): then None. Adopted pods count, whoever created them."""
        self.refresh_all()
        if any(instance.job_id == job_id for instance in self.instances.values()):
            return None
        if sum(1 for instance in self.instances.values() if instance.pending) >= self.max_pending_pods:
            return None
        name = f"{POD_NAME_PREFIX}-{uuid.uuid4()}"
        pod_labels = {CREATED_BY_LABEL: PLUGIN_ID, JOB_ID_LABEL: str(job_id), KIND_LABEL: KIND_VALUE}
        if environment:
            pod_labels[ENVIRONMENT_LABEL] = environment
        job = {"pipeline_name": "official", "pipeline_counter": 1, "pipeline_label": "1",
               "stage_name": "stage", "stage_counter": "1", "job_name": f"job-{job_id}",
               "job_id": job_id}  # fmt: skip
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": pod_labels,
                "annotations": {"Image": image, JOB_IDENTIFIER_ANNOTATION: json.dumps(job)},
            },
            "spec": {"containers": [{
                "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                "securityContext": {"privileged": False}, "resources": {"limits": {}},
                "env": [{"name": "GO_EA_SERVER_URL", "value": "https://gocd.example.test/go"}],
            }]},
        }  # fmt: skip
        created = self._call(
            lambda: self._core.create_namespaced_pod(self.namespace, pod, _preload_content=False)
        )
        self.instances[name] = self._instance(created)
        self.created.append(name)
        return name

    def server_ping(self) -> PingOutcome:
        outcome = PingOutcome(self.clock.now())
        self.pings.append(outcome)
        try:
            self.refresh_all()
        except RefreshFailed as error:
            outcome.failure = str(error)
            return outcome
        outcome.adopted = tuple(self.instances)
        now = self.clock.now()
        for agent in self.agents.values():  # instancesCreatedAfterTimeout, then disableIdleAgents
            instance = self.instances.get(agent.agent_id)
            if instance is None or not now > instance.created_at + self.timeout_s:
                continue
            if agent.config_state == "Enabled" and agent.agent_state in _NOT_WORKING:
                agent.config_state = "Disabled"
        listed = set(self.agents)  # listAgents() again
        for agent in list(self.agents.values()):  # terminateDisabledAgents
            if agent.config_state == "Disabled" and agent.agent_state in _NOT_WORKING:
                outcome.deleted += self._terminate(agent.agent_id)
                del self.agents[agent.agent_id]
        for name in list(self.instances):  # terminateUnregisteredInstances, with the second list
            if name in listed:
                continue
            pod = self._get(name)
            if pod is None:
                continue
            if now > self.server_time(_epoch(pod["metadata"]["creationTimestamp"])) + self.timeout_s:
                outcome.deleted += self._terminate(name)
        for agent_id in [a for a in self.agents if a not in self.instances]:  # CheckForPossiblyMissingAgents
            del self.agents[agent_id]
        return outcome

    def job_completion(self, agent_id: str) -> list[str]:
        """JobCompletionRequestExecutor: disable the agent, terminate its pod, delete the agent."""
        deleted = self._terminate(agent_id)
        self.agents.pop(agent_id, None)
        return deleted

    # -- KubernetesAgentInstances ---------------------------------------------------------------------

    def refresh_all(self) -> None:
        try:
            listed = self._call(
                lambda: self._core.list_namespaced_pod(self.namespace, _preload_content=False)
            )
        except ApiException as error:
            log.info("the official plugin could not list pods: %s", error.status)
            return
        self.instances.clear()
        for pod in listed.get("items") or []:
            pod_labels = pod["metadata"].get("labels")
            if pod_labels is not None and pod_labels.get(KIND_LABEL) == KIND_VALUE:
                instance = self._instance(pod)
                self.instances[instance.name] = instance

    def _instance(self, pod: Mapping[str, Any]) -> Instance:
        """KubernetesInstanceFactory.fromKubernetesPod."""
        meta = pod["metadata"]
        pod_labels = meta.get("labels") or {}
        job_id = _java_long(pod_labels.get(JOB_ID_LABEL))
        if job_id is None:
            raise RefreshFailed(
                f"NumberFormatException adopting pod {meta['name']}: label {JOB_ID_LABEL} is "
                f"{pod_labels.get(JOB_ID_LABEL)!r}"
            )
        created = self.server_time(_epoch(meta["creationTimestamp"]))
        pending = (pod.get("status") or {}).get("phase") != "Running"
        return Instance(meta["name"], created, job_id, pod_labels.get(ENVIRONMENT_LABEL), pending)

    def _terminate(self, name: str) -> list[str]:
        instance = self.instances.pop(name, None)
        if instance is None:
            log.warning("the official plugin was asked to terminate %s, which it does not know", name)
            return []
        try:
            self._core.delete_namespaced_pod(name, self.namespace, _preload_content=False)
        except ApiException as error:
            if error.status != 404:
                raise
        self.deleted.append(name)
        return [name]

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return self._call(
                lambda: self._core.read_namespaced_pod(name, self.namespace, _preload_content=False)
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    @staticmethod
    def _call(call: Callable[[], Any]) -> dict[str, Any]:
        response = call()
        answer: dict[str, Any] = json.loads(response.data)
        return answer
