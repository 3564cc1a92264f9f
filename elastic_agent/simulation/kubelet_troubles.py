"""What the simulated kubelet does with a pod that cannot run: when each status comes, and what it says.

Modelled on the real kubelet:
- image pulls (pkg/kubelet/images/image_manager.go, `EnsureImageExists`): a failed pull is
  `ErrImagePull` with the runtime's error and starts a back-off per pod and image; while the back-off
  runs, each sync of the pod says `ImagePullBackOff` ("Back-off pulling image ..."), and the first
  sync after it pulls again. The back-off is 10 s doubling to 5 minutes (pkg/kubelet/kubelet.go,
  `backOffPeriod` and `MaxContainerBackOff`), and a pod whose sync failed is synced again after the
  pod workers' back-off, 10 s (pkg/kubelet/pod_workers.go; its jitter is left out, so that a seed
  fixes the run);
- crash loops (pkg/kubelet/kuberuntime/kuberuntime_manager.go, `doBackOff`): a container that exits
  is restarted at once the first time; after that, while the back-off since its last exit runs, it
  waits in `CrashLoopBackOff` ("back-off 10s restarting failed container=... pod=..."), and the back-off
  doubles with each restart up to 5 minutes. With restartPolicy Never there is no restart: the pod fails;
- `InvalidImageName`, `CreateContainerConfigError` and the scheduler's `Unschedulable` stay as they are
  until the pod goes.

`Trouble` keeps one pod's progress; its methods return the `Step` for the kubelet to write (a status
patch, events, when to look again). Time is what the kubelet passes in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_agent.simulation import kubelet_statuses as st
from elastic_agent.simulation.fake_kube_store import Obj, rfc3339

SYNC_S = 10.0
BACKOFF_BASE_S = 10.0
BACKOFF_CAP_S = 300.0
AT_ADMISSION = ("image_pull", "invalid_image", "config_error", "unschedulable")

Event = tuple[str, str, str]  # (reason, message, type)


@dataclass
class Step:
    status: Obj | None = None  # merged into the pod's status (lists replace, as a merge patch does)
    events: list[Event] = field(default_factory=list)
    again_at: float | None = None  # when to call `sync` next
    bind: bool = True  # whether the pod is on a node (the scheduler placed it)
    fails: bool = False  # the pod's phase becomes Failed (restartPolicy Never)


@dataclass
class Trouble:
    kind: str
    pod: Obj
    message: str
    backoff_s: float = 0.0
    last_at: float = 0.0  # the latest pull, or the latest exit of the container
    restarts: int = 0
    crashes: int = 0
    last_end: Obj | None = None  # the container's latest end, as lastState shows it
    shown: str | None = None  # the waiting reason written last: the kubelet writes a status that changed

    @property
    def container(self) -> dict[str, Any]:
        return st.first_container(self.pod)

    @property
    def image(self) -> str:
        return str(self.container.get("image", "unknown"))

    def _waiting(self, reason: str, message: str, last: Obj | None = None) -> Obj | None:
        if reason == self.shown and last is None:
            return None
        self.shown = reason
        state = st.waiting(reason, message)
        return {"containerStatuses": [st.container_status(self.container, False, state, self.restarts, last)]}

    # -- at admission ----------------------------------------------------------------------------------

    def admitted(self, now: float) -> Step:
        if self.kind == "unschedulable":
            message = self.message or st.INSUFFICIENT
            condition = st.unschedulable(message, rfc3339(now))
            return Step({"conditions": [condition]}, [("FailedScheduling", message, "Warning")], bind=False)
        if self.kind == "invalid_image":
            message = st.invalid_image_message(self.image)
            events = [("InspectFailed", message, "Warning"), ("Failed", "Error: InvalidImageName", "Warning")]
            return Step(self._waiting("InvalidImageName", message), events)
        if self.kind == "config_error":
            message = self.message or st.CONFIG_MISSING
            pulled = f'Container image "{self.image}" already present on machine'
            events = [("Pulled", pulled, "Normal"), ("Failed", f"Error: {message}", "Warning")]
            return Step(self._waiting("CreateContainerConfigError", message), events)
        return self._pull(now)  # image_pull

    def _pull(self, now: float) -> Step:
        message = self.message or st.PULL_NOT_FOUND
        self.backoff_s = BACKOFF_BASE_S if not self.backoff_s else min(BACKOFF_CAP_S, self.backoff_s * 2)
        self.last_at = now
        events = [("Pulling", f'Pulling image "{self.image}"', "Normal"),
                  ("Failed", f'Failed to pull image "{self.image}": {message}', "Warning"),
                  ("Failed", "Error: ErrImagePull", "Warning")]  # fmt: skip
        return Step(self._waiting("ErrImagePull", message), events, again_at=now + SYNC_S)

    # -- later syncs -------------------------------------------------------------------------------------

    def sync(self, now: float) -> Step:
        """The pod worker's next sync of a pod whose last sync failed."""
        if self.kind == "image_pull":
            if now - self.last_at < self.backoff_s:
                message = f'Back-off pulling image "{self.image}"'
                events = [("BackOff", message, "Normal"), ("Failed", "Error: ImagePullBackOff", "Warning")]
                return Step(self._waiting("ImagePullBackOff", message), events, again_at=now + SYNC_S)
            return self._pull(now)
        return Step()  # a crash loop is driven by `exited` and `restarted`

    def exited(self, now: float, started_at: float, restart_policy: str) -> tuple[Step, float | None]:
        """The container exited with code 1; returns the step and when it starts again (None: never)."""
        self.crashes += 1
        ended = self.last_end = st.terminated("Error", 1, rfc3339(started_at), rfc3339(now))
        if restart_policy == "Never":
            status = {"containerStatuses": [st.container_status(self.container, False, ended, self.restarts)]}
            return Step(status, [], fails=True), None
        if self.crashes == 1:  # no back-off yet: restarted at once, and the back-off starts
            self.backoff_s = BACKOFF_BASE_S
            return Step(), now
        name = str(self.container.get("name", "agent"))
        message = st.crash_loop_message(self.backoff_s, name, self.pod)
        event = f"Back-off restarting failed container {name} in pod {st.pod_full_name(self.pod)}"
        step = Step(self._waiting("CrashLoopBackOff", message, ended), [("BackOff", event, "Warning")])
        restart_at = now + self.backoff_s
        self.backoff_s = min(BACKOFF_CAP_S, self.backoff_s * 2)
        return step, restart_at

    def restarted(self, now: float) -> Step:
        """The container runs again (it will exit again)."""
        self.restarts += 1
        state = {"running": {"startedAt": rfc3339(now)}}
        status = st.container_status(self.container, True, state, self.restarts, self.last_end)
        name = self.container.get("name", "agent")
        return Step({"containerStatuses": [status]}, [("Started", f"Started container {name}", "Normal")])


def oom_killed(pod: Mapping[str, Any], started_at: float, now: float) -> Step:
    """The kernel kills the agent container for memory (exit code 137, reason OOMKilled)."""
    name = st.first_container(pod).get("name", "agent")
    events = [("Killing", f"Container {name} was OOM-killed", "Warning")]
    return container_ended(pod, started_at, now, "OOMKilled", st.OOM_EXIT_CODE, events)


def agent_exited(pod: Mapping[str, Any], started_at: float, now: float, exit_code: int) -> Step:
    """The agent's process ended on its own (it exited, or was killed by a signal: 128 + the signal).
    The reason is the container runtime's: containerd's CRI (pkg/cri/server/container_status.go,
    `toCRIContainerStatus`) says Completed for exit code 0 and Error for any other."""
    return container_ended(pod, started_at, now, "Completed" if exit_code == 0 else "Error", exit_code, [])


def container_ended(
    pod: Mapping[str, Any], started_at: float, now: float, reason: str, exit_code: int, events: list[Event]
) -> Step:
    """With restartPolicy Never the pod fails; else the container is restarted at once, as a first exit
    is (the kubelet then starts the agent again: its key is spent, and GoCD refuses it)."""
    container = st.first_container(pod)
    ended = st.terminated(reason, exit_code, rfc3339(started_at), rfc3339(now))
    if restart_policy(pod) == "Never":
        return Step({"containerStatuses": [st.container_status(container, False, ended)]}, events, fails=True)
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    restarts = int(statuses[0].get("restartCount", 0)) + 1
    running = {"running": {"startedAt": rfc3339(now)}}
    status = st.container_status(container, True, running, restarts, ended)
    return Step({"containerStatuses": [status]}, events)


def restart_policy(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("restartPolicy") or "Always")
