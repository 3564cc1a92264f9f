"""PodDisruptionBudgets (policy/v1) and the pods/eviction subresource of the fake API server.

The Eviction API is how `kubectl drain`, the cluster autoscaler and node upgrades remove pods: unlike a
DELETE it honours the budgets that select the pod, and nothing else (the autoscalers' annotations are
theirs alone). The rules are kube-apiserver's, pkg/registry/core/pod/storage/eviction.go,
`EvictionREST.Create` and `checkAndDecrement`: a pod that is Pending, Succeeded, Failed or already
terminating is deleted without looking at budgets; more than one budget selecting the pod is a 500; a
budget whose status the disruption controller has not yet written (observedGeneration < generation) or
that allows no disruption is a 429 with the real messages; otherwise the pod is deleted with the
eviction's deleteOptions. A budget with an empty selector selects nothing (`getPodDisruptionBudgets`).

The fake stands for a cluster with a controller-manager, whose disruption controller
(pkg/controller/disruption/disruption.go, `getExpectedPodCount`, `getExpectedScale`, `countHealthyPods`,
`updatePdbStatus`) the status is computed like, at once, whenever it is read: pods without a controller
count for no expected pods, so a maxUnavailable budget over bare pods allows no disruption. Deciding
(`verdict`, `budget_status`) is kept apart from the store's doing.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_agent.simulation.fake_kube_objects import Obj, Requirement, StoreError, status_body
from elastic_agent.simulation.fake_kube_store import FakeKubeStore, rfc3339

TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


def selector_requirements(selector: Mapping[str, Any] | None) -> list[Requirement]:
    """A LabelSelector (matchLabels, matchExpressions) as requirements; empty for a selector that
    selects nothing."""
    selector = selector or {}
    found = [Requirement(k, "=", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expression in selector.get("matchExpressions") or []:
        op = ops.get(str(expression.get("operator")))
        if op is None:
            raise StoreError(422, "Invalid", f"PodDisruptionBudget is invalid: operator {expression!r}")
        found.append(Requirement(str(expression["key"]), op, frozenset(expression.get("values") or [])))
    return found


def selects(budget: Obj, pod: Obj) -> bool:
    requirements = selector_requirements(budget.get("spec", {}).get("selector"))
    pod_labels = pod.get("metadata", {}).get("labels") or {}
    return bool(requirements) and all(r.matches(pod_labels) for r in requirements)


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def budget_status(budget: Obj, pods: list[Obj]) -> Obj:
    """The status the disruption controller writes for `budget` over its namespace's `pods`."""
    spec = budget.get("spec") or {}
    covered = [p for p in pods if selects(budget, p)]
    healthy = sum(1 for p in covered if not p["metadata"].get("deletionTimestamp") and is_ready(p))
    # Only pods with a controller (ownerReferences controller: true) bring an expected scale; the fake
    # knows no controllers' scales, so each such pod counts for one.
    expected = sum(1 for p in covered if _controller(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        minimum = spec.get("minAvailable", 0)
        desired = int(minimum) if isinstance(minimum, int) else _scaled(minimum, expected)
        expected = len(covered) if isinstance(minimum, int) else expected
    allowed = healthy - desired
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed if expected > 0 and allowed > 0 else 0,
        "observedGeneration": budget["metadata"]["generation"],
    }


def _controller(pod: Obj) -> bool:
    return any(owner.get("controller") for owner in pod["metadata"].get("ownerReferences") or [])


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    percent = int(str(value).rstrip("%"))
    return -(-percent * total // 100)  # rounded up, as GetScaledValueFromIntOrPercent(..., true)


@dataclass(frozen=True)
class Verdict:
    """What an eviction comes to: delete the pod, or answer `status` with `body`."""

    delete: bool
    status: int = 201
    body: Obj | None = None


def verdict(pod: Obj, budgets: list[Obj]) -> Verdict:
    """EvictionREST.Create's decision for `pod`, given the budgets (with their status) that select it."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
        return Verdict(delete=True)
    if len(budgets) > 1:
        return Verdict(False, 500, {**status_body(500, "InternalError", MORE_THAN_ONE), "reason": ""})
    if not budgets:
        return Verdict(delete=True)
    budget = budgets[0]
    name, status = budget["metadata"]["name"], budget.get("status") or {}
    if status.get("observedGeneration", 0) < budget["metadata"]["generation"]:
        processing = f"The disruption budget {name} is still being processed by the server."
        return Verdict(False, 429, _too_many(processing, 10))
    if status.get("disruptionsAllowed", 0) <= 0:
        cause = (f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                 f"{status.get('currentHealthy', 0)} currently")  # fmt: skip
        return Verdict(False, 429, _too_many(cause, 0))
    return Verdict(delete=True)


def _too_many(cause: str, retry_after: int) -> Obj:
    body = status_body(429, "TooManyRequests", TOO_MANY)
    body["details"] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        body["details"]["retryAfterSeconds"] = retry_after
    return body


class Disruptions:
    """The budgets of the fake cluster, by (namespace, name), beside the pods of `store`."""

    def __init__(self, store: FakeKubeStore) -> None:
        self.store = store
        self._budgets: dict[tuple[str, str], Obj] = {}
        self._lock = threading.Lock()

    def create(self, ns: str, body: Mapping[str, Any]) -> Obj:
        budget = copy.deepcopy(dict(body))
        meta = budget.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise StoreError(422, "Invalid", "PodDisruptionBudget is invalid: metadata.name: Required value")
        selector_requirements(budget.get("spec", {}).get("selector"))
        with self._lock:
            if (ns, name) in self._budgets:
                message = f'poddisruptionbudgets.policy "{name}" already exists'
                raise StoreError(409, "AlreadyExists", message)
            meta.update(namespace=ns, generation=1, uid=f"pdb-{len(self._budgets) + 1}",
                        creationTimestamp=rfc3339(self.store.clock.now()))  # fmt: skip
            budget.update(apiVersion="policy/v1", kind="PodDisruptionBudget")
            self._budgets[(ns, name)] = budget
        return self.get(ns, name)

    def get(self, ns: str, name: str) -> Obj:
        with self._lock:
            budget = self._budgets.get((ns, name))
            if budget is None:
                raise StoreError(404, "NotFound", f'poddisruptionbudgets.policy "{name}" not found')
            budget = copy.deepcopy(budget)
        budget["status"] = budget_status(budget, self.store.list_pods(ns)[0])
        return budget

    def list(self, ns: str) -> list[Obj]:
        with self._lock:
            names = sorted(name for space, name in self._budgets if space == ns)
        return [self.get(ns, name) for name in names]

    def delete(self, ns: str, name: str) -> Obj:
        found = self.get(ns, name)
        with self._lock:
            self._budgets.pop((ns, name), None)
        return found

    def evict(self, ns: str, name: str, body: Any) -> tuple[int, Obj]:
        """POST pods/{name}/eviction with a policy/v1 Eviction."""
        eviction = body if isinstance(body, dict) else {}
        if (eviction.get("metadata") or {}).get("name") != name:
            raise StoreError(400, "BadRequest", "name in URL does not match name in Eviction object")
        pod = self.store.get_pod(ns, name)
        decided = verdict(pod, [b for b in self.list(ns) if selects(b, pod)])
        if not decided.delete:
            assert decided.body is not None
            return decided.status, decided.body
        options = eviction.get("deleteOptions") or {}
        grace = options.get("gracePeriodSeconds")
        uid = (options.get("preconditions") or {}).get("uid")
        self.store.delete_pod(ns, name, None if grace is None else float(grace), uid=uid)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
