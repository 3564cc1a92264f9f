"""ConfigMaps in the fake cluster, as kube-apiserver serves them to this project: get, create (409
AlreadyExists when the name is taken) and update (404 NotFound when it is not; 409 Conflict when the body
names a resourceVersion that is no longer current; no resourceVersion: the update is unconditional).
Only string data is accepted, as the real server's validation does for `data`.

Modelled on kubernetes/kubernetes: `pkg/registry/core/configmap/strategy.go` (`AllowCreateOnUpdate` is
false, so an update of a missing ConfigMap is NotFound) and the generic registry's
`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`Store.Create`: AlreadyExists;
`Store.Update`: a stale resourceVersion is a Conflict). Named from the source as read in earlier work, not
re-read with fetch; tests/contracts/test_kube_contract.py runs the same calls against the real kube-apiserver.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from typing import Any

from elastic_agent.simulation.fake_kube_objects import Obj, StoreError


class FakeConfigMaps:
    def __init__(self, next_version: Callable[[], int]) -> None:
        self._next_version = next_version
        self._maps: dict[tuple[str, str], Obj] = {}
        self._lock = threading.Lock()

    def get(self, ns: str, name: str) -> Obj:
        with self._lock:
            found = self._maps.get((ns, name))
            if found is None:
                raise StoreError(404, "NotFound", f'configmaps "{name}" not found')
            return copy.deepcopy(found)

    def create(self, ns: str, body: Mapping[str, Any]) -> Obj:
        obj = self._checked(ns, body)
        name = obj["metadata"]["name"]
        with self._lock:
            if (ns, name) in self._maps:
                raise StoreError(409, "AlreadyExists", f'configmaps "{name}" already exists')
            obj["metadata"]["resourceVersion"] = str(self._next_version())
            self._maps[(ns, name)] = obj
            return copy.deepcopy(obj)

    def replace(self, ns: str, name: str, body: Mapping[str, Any]) -> Obj:
        obj = self._checked(ns, body)
        if obj["metadata"]["name"] != name:
            raise StoreError(400, "BadRequest", "the name of the object does not match the name on the URL")
        with self._lock:
            current = self._maps.get((ns, name))
            if current is None:
                raise StoreError(404, "NotFound", f'configmaps "{name}" not found')
            asked = obj["metadata"].get("resourceVersion")
            if asked and asked != current["metadata"]["resourceVersion"]:
                raise StoreError(
                    409, "Conflict",
                    f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )  # fmt: skip
            obj["metadata"]["resourceVersion"] = str(self._next_version())
            self._maps[(ns, name)] = obj
            return copy.deepcopy(obj)

    @staticmethod
    def _checked(ns: str, body: Mapping[str, Any]) -> Obj:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise StoreError(422, "Invalid", "ConfigMap is invalid: metadata.name: Required value")
        if meta.get("namespace", ns) != ns:
            raise StoreError(
                400, "BadRequest", "the namespace of the object does not match the namespace on the URL"
            )
        data = obj.get("data") or {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise StoreError(400, "BadRequest", "ConfigMap data values must be strings")
        meta["namespace"] = ns
        obj.update({"apiVersion": "v1", "kind": "ConfigMap", "data": data})
        return obj
