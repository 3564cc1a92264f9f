"""The policy engine's pods: what the fake API server's store keeps of them in a simulation, no more.

The advisor replays a week to judge a policy. What decides a job's wait is the pool's decisions and the
server's timing; the API server in between only has to keep the pods, number their versions, refuse a
patch made against an old version, and tell who listens of every change, in order. `MemoryPods` does that
in memory, on one thread, without the store's locks, history for watches, events, logs, copies or
graceful deletions (`SimulationKubeStore`, inprocess_cluster.py, has them for the tests and the stack).

It answers the calls that the in-process port (`InProcessCluster`) and the policy engine's kubelet
(pod_lives.py) make, with the store's results: the same resourceVersions and uids for a seed, the same
object shapes (`create_pod` as `FakeKubeStore.create_pod`, a metadata merge patch as
`SimulationKubeStore.patch_pod`, a status as `SimulationKubeStore.update_status`, a deletion as
`SimulationKubeStore._remove_locked` with a grace period of zero), and kube-apiserver's rules where a
client could break them (a stale resourceVersion is a 409, metadata is validated: the same functions as
the store's). What it leaves out it refuses rather than ignores: a graceful deletion (a pod template with
`terminationGracePeriodSeconds`, which the advisor's pods never have) raises, so that a policy that needs
it cannot silently diverge from the full engine (`advise --engine full`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.simulation.fake_kube_configmaps import FakeConfigMaps
from elastic_agent.simulation.fake_kube_logs import ContainerLogs
from elastic_agent.simulation.fake_kube_nodes import node_object
from elastic_agent.simulation.fake_kube_objects import (
    POD_FIELDS,
    Obj,
    StoreError,
    parse_field_selector,
    parse_label_selector,
    selected,
    validate_metadata,
)
from elastic_agent.simulation.fake_kube_store import rfc3339, stamp_created
from elastic_agent.simulation.inprocess_cluster import json_copy, metadata_patched, removed, status_updated

Listener = Callable[[str, Obj], None]

NODES = ("fake-node-1", "fake-node-2", "fake-node-3")  # the fake store's (FakeKubeStore.nodes)


class GracefulDeletion(RuntimeError):
    """A deletion the policy engine does not model: run the full engine (`advise --engine full`)."""


class MemoryPods:
    """Pods by namespace and name, one resourceVersion counter, listeners told of every change at once.
    Stored pods are never changed in place: a change makes a new object sharing what it did not change, so
    readers (the port's cache, the kubelet, the pod tracker) may keep what they were given."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.nodes = list(NODES)
        self.logs = (
            ContainerLogs()
        )  # stays empty: the simulations keep no logs (SimulationKubeStore.keep_logs)
        self._rv = 1  # etcd's first revision, as the store's
        self._pods: dict[str, dict[str, Obj]] = {}
        self._listeners: list[Listener] = []
        self.config_maps = FakeConfigMaps(self._bump)

    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _tell(self, kind: str, obj: Obj) -> None:
        for listener in self._listeners:
            listener(kind, obj)

    def _pod(self, ns: str, name: str) -> Obj:
        pod = self._pods.get(ns, {}).get(name)
        if pod is None:
            raise StoreError(404, "NotFound", f'pods "{name}" not found')
        return pod

    # -- what the port calls -------------------------------------------------------------------------

    def create_pod(self, ns: str, body: Mapping[str, Any]) -> Obj:
        pod = json_copy(dict(body))
        meta = pod.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise StoreError(422, "Invalid", "Pod is invalid: metadata.name: Required value")
        if meta.get("namespace", ns) != ns:
            raise StoreError(400, "BadRequest", "the namespace of the object does not match the request")
        validate_metadata("Pod", name, meta)
        if (pod.get("spec") or {}).get("terminationGracePeriodSeconds"):
            raise GracefulDeletion(
                f"pod {name} asks for a graceful deletion, which only the full engine models"
            )
        if name in self._pods.get(ns, {}):
            raise StoreError(409, "AlreadyExists", f'pods "{name}" already exists')
        stamp_created(pod, ns, f"uid-{self._rv + 1}", self.clock.now(), self._bump())
        self._pods.setdefault(ns, {})[name] = pod
        self._tell("ADDED", pod)
        return pod

    def patch_pod(self, ns: str, name: str, patch: Any, content_type: str) -> Obj:
        """A merge patch of the pod's metadata, the only patch the pool sends (`metadata_patch`)."""
        if "json-patch" in content_type or not isinstance(patch, dict) or set(patch) - {"metadata"}:
            raise StoreError(422, "Invalid", "the policy engine takes merge patches of a pod's metadata only")
        return self._replace(ns, name, metadata_patched(name, self._pod(ns, name), patch))

    def delete_pod(self, ns: str, name: str) -> Obj:
        current = self._pods.get(ns, {}).pop(name, None)
        if current is None:
            raise StoreError(404, "NotFound", f'pods "{name}" not found')
        gone = removed(current, self.clock.now(), self._bump())
        self._tell("DELETED", gone)
        return gone

    def list_pods(
        self, ns: str | None, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[list[Obj], int]:
        """Matching pods by name (all namespaces when `ns` is None), with the store's selectors."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, POD_FIELDS)
        spaces = [ns] if ns is not None else sorted(self._pods)
        chosen = [
            pod
            for space in spaces
            for _, pod in sorted(self._pods.get(space, {}).items())
            if selected(pod, labels, fields)
        ]
        return chosen, self._rv

    def list_events(self, ns: str, field_selector: str | None = None) -> tuple[list[Obj], int]:
        return [], self._rv  # the simulations read no events, and the policy engine writes none

    def get_log(
        self, ns: str, pod_name: str, tail_lines: int | None = None, container: str | None = None
    ) -> str:
        return self.logs.read(self._pod(ns, pod_name), container, tail_lines)

    def list_nodes(self) -> list[Obj]:
        at = rfc3339(0)
        return [node_object(name, index, at) for index, name in enumerate(self.nodes)]

    # -- what the kubelet calls ----------------------------------------------------------------------

    def get_pod(self, ns: str, name: str) -> Obj:
        return self._pod(ns, name)  # shared: the policy engine's kubelet only reads

    def update_status(self, ns: str, name: str, uid: str | None, status: Mapping[str, Any]) -> Obj | None:
        current = self._pods.get(ns, {}).get(name)
        if current is None or (uid is not None and current["metadata"]["uid"] != uid):
            return None
        return self._replace(ns, name, status_updated(current, status))

    def tick(self) -> None:
        """No graceful deletion is ever pending (see the module's docstring)."""

    def deleting(self) -> bool:
        return False

    def _replace(self, ns: str, name: str, updated: Obj) -> Obj:
        updated["metadata"]["resourceVersion"] = str(self._bump())
        self._pods[ns][name] = updated
        self._tell("MODIFIED", updated)
        return updated
