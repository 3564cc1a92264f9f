"""A node for a real kube-apiserver that has no kubelet: what the simulated kubelet does to the fake
store, done through the API.

The simulated kubelet (kubelet.py) drives pods through their lives against a "pod host": hear pod
changes, bind a pod to a node, write its status, record events, finish graceful deletions. The fake API
server's store is one such host; `ApiServerNode` is the other, for a real API server without a kubelet
(tests start kube-apiserver and etcd only). It binds pods through `pods/binding` (the scheduler's call),
writes `pods/status` (the kubelet's), creates Events, and, since no kubelet confirms that containers
stopped, deletes a terminating pod with grace 0 once its grace period (capped by `finish_after_s`)
has passed, as the kubelet does after stopping the containers. Pod logs cannot be written: the real
API server proxies `pods/log` to the node's kubelet, which does not exist. The statuses of pods that
cannot run (kubelet_troubles.py: waiting reasons, terminations, restart counts, the PodScheduled
condition of a pod left unbound) go through the same `pods/status` writes, which the real server
accepts as it does the kubelet's (tests/real/test_broken_pods_real.py).

It works with admin credentials, separate from the backend's (whose RBAC the tests check). Its clock is
the real API server's: event times and grace periods are wall-clock time there, so the default is the
system clock, injected like every other clock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from elastic_agent.clock import Clock, SystemClock
from elastic_agent.simulation.fake_kube_objects import pod_event
from elastic_agent.simulation.fake_kube_store import Obj

log = logging.getLogger(__name__)

PodListener = Callable[[str, Obj], None]


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiServerNode:
    """`nodes`: the Node objects it creates and binds pods to (Ready, never heard from again: no node
    lifecycle controller runs to mind)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        *,
        nodes: tuple[str, ...] = ("standin-node-1",),
        finish_after_s: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self.namespace = namespace
        self.nodes = list(nodes)
        self.finish_after_s = finish_after_s
        self._core = client.CoreV1Api(api_client)
        self._listeners: list[PodListener] = []
        self._lock = threading.Lock()
        self._terminating: dict[tuple[str, str], tuple[str, float]] = {}  # (ns, name) -> (uid, due)
        self._stopped = threading.Event()
        self._synced = threading.Event()
        self._stream: Any = None  # the open watch response, closed by stop()
        for node in self.nodes:
            self._ensure_node(node)
        self._thread = threading.Thread(target=self._watch_loop, name="apiserver-node", daemon=True)
        self._thread.start()
        if not self._synced.wait(10):
            raise RuntimeError("the node stand-in could not list the pods of the API server")

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()  # unblocks the watch thread's read
            except Exception:  # closed already
                log.debug("closing the node stand-in's watch failed", exc_info=True)
        self._thread.join(timeout=5)

    # -- what the simulated kubelet calls -----------------------------------------------------------------

    def add_listener(self, listener: PodListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def list_pods(self, ns: str | None) -> tuple[list[Obj], str]:
        body = self._call(
            lambda: self._core.list_namespaced_pod(ns or self.namespace, _preload_content=False)
        )
        return list(body.get("items") or []), str((body.get("metadata") or {}).get("resourceVersion", ""))

    def get_pod(self, ns: str, name: str) -> Obj:
        return self._call(lambda: self._core.read_namespaced_pod(name, ns, _preload_content=False))

    def update_status(self, ns: str, name: str, uid: str | None, status: Mapping[str, Any]) -> Obj | None:
        """Bind the pod when `status` names a node, then merge the rest into `pods/status`. None when the
        pod is gone or is another pod of the same name by now."""
        status = dict(status)
        node = status.pop("nodeName", None)
        try:
            current = self.get_pod(ns, name)
            if uid is not None and current["metadata"]["uid"] != uid:
                return None
            if node and not (current.get("spec") or {}).get("nodeName"):
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "uid": current["metadata"]["uid"]},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                }
                # Unparsed: the classic client fails to read the Status this call answers with.
                self._core.create_namespaced_pod_binding(name, ns, binding, _preload_content=False)
            if not status:
                return self.get_pod(ns, name)
            patch = {"metadata": {"uid": current["metadata"]["uid"]}, "status": status}
            merge = "application/merge-patch+json"
            return self._call(
                lambda: self._core.patch_namespaced_pod_status(
                    name, ns, patch, _content_type=merge, _preload_content=False
                )
            )
        except (ApiException, LookupError) as error:
            if getattr(error, "status", None) in (404, 409, 422) or isinstance(error, LookupError):
                return None
            raise

    def add_event(self, ns: str, pod_name: str, reason: str, message: str, type_: str = "Normal",
                  field_path: str = "") -> None:  # fmt: skip
        now = _rfc3339(self.clock.now())
        meta = {"generateName": f"{pod_name}."}
        event = pod_event(ns, pod_name, reason, message, type_, now, meta, field_path)
        event["source"]["host"] = self.nodes[0]
        try:
            self._core.create_namespaced_event(ns, event, _preload_content=False)
        except ApiException as error:  # an event is a courtesy: its pod may be gone already
            log.debug("could not record event %s of %s: %s", reason, pod_name, error.status)

    def append_log(self, ns: str, pod_name: str, line: str, container: str | None = None) -> None:
        """Logs live on a node; the API server has nowhere to keep them."""

    def tick(self) -> None:
        """Finish the graceful deletions that are due, as the kubelet does once the containers stopped."""
        now = self.clock.now()
        with self._lock:
            due = [(key, uid) for key, (uid, at) in self._terminating.items() if at <= now]
            for key, _ in due:
                del self._terminating[key]
        for (ns, name), uid in due:
            options = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
            try:
                self._core.delete_namespaced_pod(name, ns, body=options, _preload_content=False)
            except ApiException as error:
                if error.status not in (404, 409):
                    log.warning("could not finish the deletion of pod %s: %s", name, error.status)

    def delete_pod(self, ns: str, name: str, grace_seconds: float | None = None) -> None:
        """Someone deletes a pod (a test, an admin with kubectl)."""
        options = {} if grace_seconds is None else {"gracePeriodSeconds": int(grace_seconds)}
        self._call(lambda: self._core.delete_namespaced_pod(name, ns, body=options, _preload_content=False))

    # -- the watch ------------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                pods, version = self.list_pods(None)
                for pod in pods:
                    self._heard("ADDED", pod)
                self._synced.set()
                self._watch(version)
            except Exception as error:  # the API server may be restarted by a test: list again
                if not self._stopped.is_set():
                    log.debug("node stand-in watch restarts: %s", error)
                    self._stopped.wait(0.2)

    def _watch(self, version: str) -> None:
        response = self._core.list_namespaced_pod(
            self.namespace, watch=True, resource_version=version, timeout_seconds=30,
            allow_watch_bookmarks=False, _preload_content=False, _request_timeout=(5, 40),
        )  # fmt: skip
        with self._lock:
            self._stream = response
        try:
            if self._stopped.is_set():
                return
            for line in iter_resp_lines(response):
                if self._stopped.is_set():
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    return  # expired: list again
                self._heard(str(event.get("type")), event.get("object") or {})
        finally:
            with self._lock:
                self._stream = None
            response.release_conn()

    def _heard(self, kind: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace", self.namespace), meta.get("name", ""))
        with self._lock:
            listeners = list(self._listeners)
            if kind == "DELETED":
                self._terminating.pop(key, None)
            elif meta.get("deletionTimestamp") and key not in self._terminating:
                grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                due = self.clock.now() + min(grace, self.finish_after_s)
                self._terminating[key] = (meta.get("uid", ""), due)
        for listener in listeners:
            listener(kind, pod)

    # -- plumbing -------------------------------------------------------------------------------------

    def _ensure_node(self, name: str) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        try:
            self._core.create_node(node, _preload_content=False)
        except ApiException as error:
            if error.status != 409:
                raise

    @staticmethod
    def _call(call: Callable[[], Any]) -> Obj:
        try:
            response = call()
        except ApiException as error:
            if error.status == 404:
                raise LookupError(str(error.reason)) from None
            raise
        result: Obj = json.loads(response.data)
        return result
