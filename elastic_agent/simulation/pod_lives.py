"""The policy engine's kubelet: a pod is bound to a node, boots, runs its agent, and stops it when deleted.

That is all a pod does in the advisor's replays, where nothing fails: `SimulatedKubelet` (kubelet.py)
also models image pulls, crash loops, OOM kills, evictions, events and logs, for the tests and the stack.
For the pods it has in common with the policy engine, this one does the same things in the same order, so
that a seed gives the same run under both engines (tests/scenarios/test_engines_agree.py):

- it hears the store's changes in a queue and handles them at `step()`, the driver's call after each
  piece of work of an instant (`SimulatedKubelet.step`: the queue first, then one due task, again);
- a new pod is bound to the next node in turn (PodScheduled) and its boot delay is drawn then, once per
  pod in the order the pods were created;
- at its start the pod's containers are Running and ready (`running_status`, with the next address of a
  counter shared with the tasks' sequence, as the full kubelet's), then the first container's agent
  starts: the server (`AgentHost`) hears `agent_started` with its environment;
- a deletion stops the agent (`agent_stopped`) if it ran.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from elastic_agent.clock import Clock
from elastic_agent.simulation.agents import AgentHost
from elastic_agent.simulation.fake_kube_nodes import node_address
from elastic_agent.simulation.fake_kube_store import Obj, rfc3339
from elastic_agent.simulation.kubelet import AGENT_ID_VAR
from elastic_agent.simulation.kubelet_statuses import env_of, first_container, running_status
from elastic_agent.simulation.memory_pods import MemoryPods


@dataclass(order=True)
class _Start:
    due: float
    seq: int
    key: tuple[str, str] = field(compare=False)  # (namespace, uid)


@dataclass
class _Life:
    namespace: str
    name: str
    uid: str
    node: str
    agent_running: bool = False
    finished: bool = False


def _no_log(line: str) -> None:
    """The agent's log lines: the simulations keep none."""


class PodLives:
    """Moves `MemoryPods`' pods through booting and running; `boot_delay(pod)` says how long a new pod
    takes to start."""

    def __init__(
        self, pods: MemoryPods, clock: Clock, agent_host: AgentHost, boot_delay: Callable[[Obj], float]
    ):
        self.pods = pods
        self.clock = clock
        self.agent_host = agent_host
        self.boot_delay = boot_delay
        self._inbox: list[tuple[str, Obj]] = []
        self._starts: list[_Start] = []
        self._seq = itertools.count()
        self._lives: dict[tuple[str, str], _Life] = {}
        self._nodes = itertools.cycle(pods.nodes)
        pods.add_listener(self._hear)

    def _hear(self, kind: str, pod: Obj) -> None:
        self._inbox.append((kind, pod))

    def next_due(self) -> float | None:
        return self._starts[0].due if self._starts else None

    def step(self) -> int:
        """Handle every change heard and every start due at `clock.now()`; returns how many."""
        done = 0
        while True:
            inbox, self._inbox = self._inbox, []
            for kind, pod in inbox:
                self._observe(kind, pod)
            done += len(inbox)
            starts = self._starts
            if not starts or starts[0].due > self.clock.now():
                if not self._inbox:
                    return done
                continue
            self._start(heapq.heappop(starts).key)
            done += 1

    def _observe(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["uid"])
        life = self._lives.get(key)
        if kind == "ADDED" and life is None:
            self._admit(pod, key)
        elif life is not None and (kind == "DELETED" or meta.get("deletionTimestamp")):
            life.finished = True
            if kind == "DELETED":
                del self._lives[key]
            if life.agent_running:
                life.agent_running = False
                self.agent_host.agent_stopped(life.name)

    def _admit(self, pod: Obj, key: tuple[str, str]) -> None:
        meta = pod["metadata"]
        life = self._lives[key] = _Life(meta["namespace"], meta["name"], meta["uid"], next(self._nodes))
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastTransitionTime": rfc3339(self.clock.now()),
        }
        self.pods.update_status(
            life.namespace, life.name, life.uid, {"nodeName": life.node, "conditions": [scheduled]}
        )
        due = self.clock.now() + max(0.0, self.boot_delay(pod))
        heapq.heappush(self._starts, _Start(due, next(self._seq), key))

    def _start(self, key: tuple[str, str]) -> None:
        life = self._lives.get(key)
        if life is None or life.finished:
            return
        try:
            pod = self.pods.get_pod(life.namespace, life.name)
        except Exception:
            return  # deleted meanwhile
        if pod["metadata"]["uid"] != life.uid:
            return
        container = first_container(pod)
        containers = [c for c in pod["spec"].get("containers") or [] if isinstance(c, dict)] or [container]
        pod_ip, host_ip = f"10.0.0.{next(self._seq) % 250 + 2}", node_address(self.pods.nodes, life.node)
        now = rfc3339(self.clock.now())
        if (
            self.pods.update_status(
                life.namespace, life.name, life.uid, running_status(containers, now, pod_ip, host_ip)
            )
            is None
        ):
            return
        env = env_of(container)
        if AGENT_ID_VAR not in env:
            return  # not an elastic agent: nothing registers
        life.agent_running = True
        self.agent_host.agent_started(life.name, env, _no_log)
