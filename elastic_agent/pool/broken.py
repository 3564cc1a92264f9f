"""Whether a pod that has not registered yet is broken, and why, in Kubernetes' own words.

A pod whose image cannot be pulled, whose container cannot be configured or keeps crashing, or that no
node can take, never registers: left alone it waits for `auto_register_timeout` (ten minutes by
default) while its job waits and more pods of the same profile pile up against `pending_pods_count`.
The kubelet says so within seconds, in the container's waiting reason; the scheduler in the
`PodScheduled` condition. These functions read that (kube/pod_status.py) and return a `Breakage` or
None; they change nothing and read no clock (the caller passes the time), so the ping's decision
(pool/broken_pods.py) and the unit tests use the same rules.

Which reasons, and when (the kubelet's, pkg/kubelet/images/types.go and
pkg/kubelet/container/sync_result.go; pkg/kubelet/kuberuntime/kuberuntime_container.go for the
container configuration):
- at once: `ImagePullBackOff` (a pull failed and the kubelet backs off), `InvalidImageName`,
  `ErrImageNeverPull` (pull policy Never, image absent), `CreateContainerConfigError` (a secret or
  config map the container names is missing), `CrashLoopBackOff`, and a container that has already
  ended with a non-zero exit code (restartPolicy Never: the agent exited at start);
- once the pod is `GRACE_S` old: `ErrImagePull` and `CreateContainerError`, which a registry's or
  runtime's hiccup can cause once, and `Unschedulable`, which clears when another pod goes.

Only a pod whose agent has not registered is judged: a registered agent may be running a job, and a
pod is never deleted under a job by this rule. An evicted pod is the node's trouble, not the profile's.
The OOM kill of an agent under a job is told, not judged (`oom_killed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.kube.pod_status import ContainerView
from elastic_agent.kube.port import PodView
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.redaction import redact

AT_ONCE = frozenset(
    ("ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError",
     "CrashLoopBackOff")
)
AFTER_GRACE = frozenset({"ErrImagePull", "CreateContainerError"})
UNSCHEDULABLE = "Unschedulable"
GRACE_S = 30.0
OOM_KILLED = "OOMKilled"


@dataclass(frozen=True)
class Breakage:
    """Why a pod will not register: Kubernetes' reason and message, and the container it is about
    (None for the pod's scheduling)."""

    reason: str
    message: str
    container: str | None = None

    def text(self) -> str:
        """For consoles, health and pages: Kubernetes' message is text the backend did not write, so what
        follows a secret's name in it is hidden (a registry's error may quote a credential)."""
        where = f"container {self.container}: " if self.container else ""
        return redact(f"{where}{self.reason}: {self.message}" if self.message else f"{where}{self.reason}")


def diagnose(pod: PodView, record: PodRecord, now: float) -> Breakage | None:
    """The pod's breakage, or None while it may still come up (or has registered). `now` and the
    record's `created_at` are on the backend's clock."""
    if record.registered or record.state != PodState.BOOTING or record.deleting or pod.deleting:
        return None
    if pod.reason == "Evicted":
        return None
    old_enough = now - record.created_at >= GRACE_S
    for container in pod.container_statuses:
        found = _container_breakage(container, old_enough)
        if found is not None:
            return found
    scheduled = pod.scheduled
    said = (scheduled.status, scheduled.reason) if scheduled is not None else None
    if scheduled is not None and said == ("False", UNSCHEDULABLE) and old_enough:
        return Breakage(UNSCHEDULABLE, scheduled.message or "no node can take the pod")
    return None


def _container_breakage(container: ContainerView, old_enough: bool) -> Breakage | None:
    reason = container.waiting_reason
    if reason in AT_ONCE or (reason in AFTER_GRACE and old_enough):
        return Breakage(reason, container.waiting_message or "", container.name)
    ended = container.terminated
    if ended is not None and ended.exit_code:
        said = ended.message or f"exited with code {ended.exit_code}"
        return Breakage(ended.reason or "Error", said, container.name)
    return None


@dataclass(frozen=True)
class OomKill:
    """An agent container killed for memory: `told` is the annotation value that says it was told."""

    container: str
    exit_code: int | None
    told: str


def oom_killed(pod: PodView, record: PodRecord) -> OomKill | None:
    """A container of a pod busy with a job whose latest end was an OOM kill, not yet told for this job
    and this restart (the record's `oom_told`, an annotation: a backend restart does not repeat it)."""
    job_id = record.current_job_id
    if job_id is None or record.state not in (PodState.BUSY, PodState.RETIRING):
        return None
    for container in pod.container_statuses:
        ends = container.terminations()
        if ends and ends[0].reason == OOM_KILLED:
            mark = f"{job_id}:{container.name}:{container.restart_count}"
            if mark != record.oom_told:
                return OomKill(container.name, ends[0].exit_code, mark)
    return None
