"""A simulated kubelet: moves the fake cluster's pods through their lives.

It listens to the `FakeKubeStore`. A new pod is scheduled to a node at once and starts Running after a
boot delay measured on the injected clock; then its agent "starts": the AgentHost (the simulated GoCD
server) hears `agent_started` with the first container's environment. Deletion, failure and eviction
stop the agent. Faults (`PodFault`): pods that fail, agents that never register, and the statuses of
pods that cannot run, with the real kubelet's reasons, messages and back-off timing
(kubelet_troubles.py, kubelet_statuses.py): image pulls that never succeed, invalid image names,
missing configuration, no node that fits, crash loops, and OOM kills (also on demand, `oom_kill`).

Two ways to drive it: `step()` does everything due at `clock.now()` (deterministic, for virtual time),
`start()` runs a background thread that steps continuously (for real or scaled time).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from elastic_agent.clock import Clock
from elastic_agent.simulation.agents import AgentHost
from elastic_agent.simulation.fake_kube_nodes import node_address
from elastic_agent.simulation.fake_kube_store import Obj, rfc3339
from elastic_agent.simulation.kubelet_statuses import env_of, first_container, running_status
from elastic_agent.simulation.kubelet_troubles import (
    AT_ADMISSION,
    Step,
    Trouble,
    agent_exited,
    oom_killed,
    restart_policy,
)

log = logging.getLogger(__name__)

AGENT_ID_VAR = "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID"


FaultKind = Literal[
    "fail", "no_register", "image_pull", "invalid_image", "config_error", "unschedulable", "crash_loop", "oom"
]


@dataclass(frozen=True)
class PodFault:
    """What goes wrong with a pod. `fail`: it starts, then fails `after` seconds later (reason/message
    as given); `no_register`: it runs, but its agent never reaches the GoCD server; `image_pull`: it
    stays Pending, ErrImagePull and ImagePullBackOff by turns (`message`: the pull's error, if given);
    `invalid_image`, `config_error` (`message`: what is missing, if given), `unschedulable`
    (`message`: the scheduler's, if given): it stays Pending so; `crash_loop`: the agent exits with
    code 1 `after` seconds after each start (CrashLoopBackOff, or a Failed pod with restartPolicy
    Never); `oom`: its agent registers and is OOM-killed `after` seconds after the start."""

    kind: FaultKind
    reason: str = "Error"
    message: str = "the agent container exited with code 1"
    after: float = 0.0

    @property
    def own_message(self) -> str:
        """`message` when given for this kind (the default is `fail`'s): else the kubelet's own."""
        return "" if self.message == PodFault.message else self.message


class PodHost(Protocol):
    """What the kubelet drives: the fake API server's store, or a real API server through its API
    (tests/support/doubles/apiserver_node.py)."""

    nodes: list[str]

    def add_listener(self, listener: Callable[[str, Obj], None]) -> None: ...

    def list_pods(self, ns: str | None) -> tuple[list[Obj], Any]:
        """The pods of a namespace and the list's resourceVersion."""

    def get_pod(self, ns: str, name: str) -> Obj: ...

    def update_status(self, ns: str, name: str, uid: str | None, status: Mapping[str, Any]) -> Obj | None:
        """Bind the pod to `status["nodeName"]` if given, merge the rest into its status; None when it is
        gone or replaced."""

    def add_event(self, ns: str, pod_name: str, reason: str, message: str, type_: str = "Normal",
                  field_path: str = "") -> None: ...  # fmt: skip

    def append_log(self, ns: str, pod_name: str, line: str, container: str | None = None) -> None: ...

    def tick(self) -> None:
        """Finish the graceful deletions that are due."""


BootDelay = float | Callable[[Obj], float]
FaultPolicy = Callable[[Obj], PodFault | None]


@dataclass(order=True)
class _Task:
    due: float
    seq: int
    action: str = field(compare=False)  # start | fail | sync | crash | restart | oom
    namespace: str = field(compare=False)
    name: str = field(compare=False)
    uid: str = field(compare=False)


@dataclass
class _PodLife:
    namespace: str
    name: str
    uid: str
    node: str
    fault: PodFault | None
    agent_running: bool = False
    finished: bool = False  # failed, evicted or deleted: nothing more happens to it
    trouble: Trouble | None = None
    started_at: float = 0.0  # when its container last started


class SimulatedKubelet:
    def __init__(
        self,
        store: PodHost,
        clock: Clock,
        agent_host: AgentHost,
        *,
        boot_delay: BootDelay = 2.0,
        faults: FaultPolicy | None = None,
        poll_interval: float = 0.02,
    ) -> None:
        self.store = store
        self.clock = clock
        self.agent_host = agent_host
        self.boot_delay = boot_delay
        self.faults = faults
        self.poll_interval = poll_interval  # real seconds between steps of the background thread
        self._lock = threading.RLock()
        self._inbox: list[tuple[str, Obj]] = []
        self._tasks: list[_Task] = []
        self._seq = itertools.count()
        self._pods: dict[tuple[str, str], _PodLife] = {}  # by (namespace, uid)
        self._nodes = itertools.cycle(store.nodes or ["fake-node"])
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        store.add_listener(self._on_change)
        for pod in store.list_pods(None)[0]:  # pods created before this kubelet came up
            if pod["status"].get("phase") == "Pending" and not pod["spec"].get("nodeName"):
                self._on_change("ADDED", pod)

    # -- driving -------------------------------------------------------------------------------------

    def _on_change(self, kind: str, pod: Obj) -> None:
        # Only queue here: the store calls listeners from the writer's thread.
        with self._lock:
            self._inbox.append((kind, pod))
        self._wake.set()

    def step(self) -> int:
        """Handle every change heard and every task due at `clock.now()`; returns how many."""
        done = 0
        while True:
            self.store.tick()
            with self._lock:
                inbox, self._inbox = self._inbox, []
            for kind, pod in inbox:
                self._observe(kind, pod)
            done += len(inbox)
            now = self.clock.now()
            with self._lock:
                due = self._tasks[0] if self._tasks and self._tasks[0].due <= now else None
                if due is not None:
                    heapq.heappop(self._tasks)
            if due is None:
                with self._lock:
                    if not self._inbox:
                        return done
                continue
            self._run(due)
            done += 1

    def next_due(self) -> float | None:
        with self._lock:
            return self._tasks[0].due if self._tasks else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="simulated-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # a simulator bug must not silently freeze the whole cluster
                log.exception("simulated kubelet step failed")
            # Woken at once by a store change; otherwise polls, so tasks come due on any kind of clock.
            self._wake.wait(self.poll_interval)
            self._wake.clear()

    # -- pod lifecycle -------------------------------------------------------------------------------

    def _observe(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["uid"])
        with self._lock:
            life = self._pods.get(key)
        if kind == "ADDED" and life is None:
            self._admit(pod)
        elif life is not None and (kind == "DELETED" or meta.get("deletionTimestamp")):
            # Deletion sends the container SIGTERM at once; the pod object may linger for its grace.
            self._finish(life, delete=kind == "DELETED")

    def _admit(self, pod: Obj) -> None:
        meta = pod["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        fault = self.faults(pod) if self.faults is not None else None
        with self._lock:
            life = _PodLife(ns, name, uid, next(self._nodes), fault)
            if fault is not None and fault.kind in (*AT_ADMISSION, "crash_loop"):
                life.trouble = Trouble(fault.kind, pod, fault.own_message)
            self._pods[(ns, uid)] = life
        trouble = life.trouble
        if trouble is not None and trouble.kind == "unschedulable":
            self._apply(life, trouble.admitted(self.clock.now()))
            return
        at = rfc3339(self.clock.now())
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": at}
        self.store.update_status(ns, name, uid, {"nodeName": life.node, "conditions": [scheduled]})
        self.store.add_event(ns, name, "Scheduled", f"Successfully assigned {ns}/{name} to {life.node}")
        if trouble is not None and trouble.kind in AT_ADMISSION:
            self._apply(life, trouble.admitted(self.clock.now()))
            return
        first = first_container(pod)
        path = f"spec.containers{{{first.get('name', 'agent')}}}"
        self.store.add_event(ns, name, "Pulling", f'Pulling image "{first.get("image", "unknown")}"',
                             field_path=path)  # fmt: skip
        delay = self.boot_delay(pod) if callable(self.boot_delay) else self.boot_delay
        self._schedule(self.clock.now() + max(0.0, delay), "start", ns, name, uid)

    def _apply(self, life: _PodLife, step: Step) -> None:
        """Write what a trouble's step says, and look again when it asks."""
        ns, name, uid = life.namespace, life.name, life.uid
        status = dict(step.status or {})
        if step.fails:
            status |= {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}
        if status and self.store.update_status(ns, name, uid, status) is None:
            return  # gone meanwhile
        for reason, message, type_ in step.events:
            self.store.add_event(ns, name, reason, message, type_)
        if step.fails:
            self._finish(life, delete=False)
        elif step.again_at is not None:
            self._schedule(step.again_at, "sync", ns, name, uid)

    def _schedule(self, due: float, action: str, ns: str, name: str, uid: str) -> None:
        with self._lock:
            heapq.heappush(self._tasks, _Task(due, next(self._seq), action, ns, name, uid))

    def _run(self, task: _Task) -> None:
        with self._lock:
            life = self._pods.get((task.namespace, task.uid))
        if life is None or life.finished:
            return
        now, trouble = self.clock.now(), life.trouble
        if task.action == "start":
            self._start_pod(life)
        elif task.action == "fail" and life.fault is not None:
            self._fail(life, life.fault.reason, life.fault.message)
        elif task.action == "oom":
            self._oom(life)
        elif trouble is None:
            return
        elif task.action == "sync":
            self._apply(life, trouble.sync(now))
        elif task.action == "crash":
            step, restart_at = trouble.exited(now, life.started_at, restart_policy(trouble.pod))
            self._apply(life, step)
            if restart_at is not None:
                self._schedule(restart_at, "restart", life.namespace, life.name, life.uid)
        elif task.action == "restart":
            life.started_at = now
            self._apply(life, trouble.restarted(now))
            after = life.fault.after if life.fault else 0.0
            self._schedule(now + after, "crash", life.namespace, life.name, life.uid)

    def _start_pod(self, life: _PodLife) -> None:
        ns, name, uid = life.namespace, life.name, life.uid
        try:
            pod = self.store.get_pod(ns, name)
        except Exception:
            return  # deleted meanwhile
        if pod["metadata"]["uid"] != uid:
            return
        container = first_container(pod)
        cname = container.get("name", "agent")
        containers = [c for c in pod["spec"].get("containers") or [] if isinstance(c, dict)] or [container]
        for each in containers:  # every container of the pod starts; the first one is the agent
            path = f"spec.containers{{{each.get('name', 'agent')}}}"  # the kubelet's GenerateContainerRef
            self.store.add_event(ns, name, "Pulled", f'Successfully pulled image "{each.get("image")}"',
                                 field_path=path)  # fmt: skip
            self.store.add_event(ns, name, "Created", "Container created", field_path=path)
            self.store.add_event(ns, name, "Started", "Container started", field_path=path)
        now = rfc3339(self.clock.now())
        pod_ip, host_ip = f"10.0.0.{next(self._seq) % 250 + 2}", node_address(self.store.nodes, life.node)
        updated = self.store.update_status(ns, name, uid, running_status(containers, now, pod_ip, host_ip))
        if updated is None:
            return
        env = env_of(container)
        life.started_at = self.clock.now()
        self.store.append_log(ns, name, f"{now} INFO  Starting GoCD agent in container {cname}")
        self.store.append_log(ns, name, f"{now} INFO  Agent server URL: {env.get('GO_EA_SERVER_URL', '?')}")
        fault = life.fault
        if fault is not None and fault.kind == "fail":
            self._schedule(self.clock.now() + fault.after, "fail", ns, name, uid)
            return
        if fault is not None and fault.kind == "crash_loop":
            self.store.append_log(ns, name, f"{now} ERROR The agent exits: its configuration is unusable")
            self._schedule(self.clock.now() + fault.after, "crash", ns, name, uid)
            return
        if fault is not None and fault.kind == "oom":
            self._schedule(self.clock.now() + fault.after, "oom", ns, name, uid)
        if fault is not None and fault.kind == "no_register":
            self.store.append_log(ns, name, f"{now} ERROR Could not register with the GoCD server")
            return
        if AGENT_ID_VAR not in env:
            return  # not an elastic agent: nothing registers
        self.store.append_log(ns, name, f"{now} INFO  Registering elastic agent {env[AGENT_ID_VAR]}")
        with self._lock:
            life.agent_running = True
        self.agent_host.agent_started(name, env, lambda line: self.store.append_log(ns, name, line))

    def _fail(self, life: _PodLife, reason: str, message: str) -> None:
        self.store.append_log(life.namespace, life.name, f"{rfc3339(self.clock.now())} ERROR {message}")
        self.store.update_status(life.namespace, life.name, life.uid, {
            "phase": "Failed", "reason": reason, "message": message,
            "conditions": [{"type": "Ready", "status": "False"}],
        })  # fmt: skip
        self.store.add_event(life.namespace, life.name, reason, message, "Warning")
        self._finish(life, delete=False)

    def _finish(self, life: _PodLife, *, delete: bool) -> None:
        with self._lock:
            was_running, life.agent_running = life.agent_running, False
            life.finished = True
            if delete:
                self._pods.pop((life.namespace, life.uid), None)
        if was_running:
            self.agent_host.agent_stopped(life.name)

    # -- faults on demand ----------------------------------------------------------------------------

    def _life(self, name: str, namespace: str | None) -> _PodLife:
        self.step()  # make sure the pod's creation has been heard
        with self._lock:
            for life in self._pods.values():
                if life.name == name and namespace in (None, life.namespace) and not life.finished:
                    return life
        raise KeyError(f"no live pod named {name}")

    def evict(self, name: str, namespace: str | None = None) -> None:
        """The node evicts the pod (phase Failed, reason Evicted), as under memory pressure."""
        self._fail(self._life(name, namespace), "Evicted", "The node was low on resource: memory.")

    def fail(self, name: str, reason: str = "Error", message: str = "container exited with code 137",
             namespace: str | None = None) -> None:  # fmt: skip
        self._fail(self._life(name, namespace), reason, message)

    def oom_kill(self, name: str, namespace: str | None = None) -> None:
        """The kernel kills the pod's agent container for memory (exit code 137, reason OOMKilled)."""
        self._oom(self._life(name, namespace))

    def agent_exited(self, name: str, exit_code: int, namespace: str | None = None) -> None:
        """The pod's agent process ended by itself (AgentHost's exit report): its container terminated."""
        try:
            life = self._life(name, namespace)
        except KeyError:
            return  # the pod is already finished or gone: the exit was the kubelet's doing
        self._end_container(life, lambda pod: agent_exited(pod, life.started_at, self.clock.now(), exit_code))

    def _oom(self, life: _PodLife) -> None:
        self._end_container(life, lambda pod: oom_killed(pod, life.started_at, self.clock.now()))

    def _end_container(self, life: _PodLife, ending: Callable[[Obj], Step]) -> None:
        try:
            pod = self.store.get_pod(life.namespace, life.name)
        except Exception:
            return  # deleted meanwhile
        self._apply(life, ending(pod))
        with self._lock:
            was_running, life.agent_running = life.agent_running, False
        if was_running:
            self.agent_host.agent_stopped(life.name)
        if restart_policy(pod) != "Never" and was_running:
            self._agent_again(life, pod)

    def _agent_again(self, life: _PodLife, pod: Obj) -> None:
        """The container was restarted at once (kubelet_troubles.container_ended): a new agent process
        comes up and asks to register with the pod's key, which its first registration spent."""
        ns, name, env = life.namespace, life.name, env_of(first_container(pod))
        life.started_at = self.clock.now()
        self.store.append_log(ns, name, f"{rfc3339(life.started_at)} INFO  Registering elastic agent again")
        with self._lock:
            life.agent_running = True
        self.agent_host.agent_started(name, env, lambda line: self.store.append_log(ns, name, line))

    def running_agents(self) -> list[str]:
        with self._lock:
            return sorted(life.name for life in self._pods.values() if life.agent_running)
