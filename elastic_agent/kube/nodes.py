"""The cluster's nodes as the cluster status report shows them: what each can hold and what runs it.

The official plugin's cluster report (gocd/kubernetes-elastic-agents, `model/KubernetesNode.java`) shows
per node its name, first address, total and allocatable CPU, memory and pods, OS image, operating
system, architecture, container runtime, kubelet and kube-proxy versions. The same fields are read here
from `core/v1` `Node` (staging/src/k8s.io/api/core/v1/types.go: `NodeStatus.Capacity`,
`.Allocatable`, `.Addresses`, `.NodeInfo`, `.Conditions`), plus whether the node is Ready and
schedulable, which an admin looking for room for agent pods needs first. kube-proxy's version is left
out: `NodeSystemInfo.KubeProxyVersion` is deprecated, and kubelets leave it blank since 1.33
(pkg/kubelet/nodestatus/setters.go, feature gate DisableNodeKubeProxyVersion, on by default).

Listing nodes needs cluster-scoped RBAC that the namespaced Role does not grant; the port raises
`Forbidden` then, and the report says in one line what to apply (status/nodes.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

# Kubernetes' quantity suffixes (k8s.io/apimachinery/pkg/api/resource/suffix.go): binary, then decimal.
_SUFFIXES = {
    "Ki": Decimal(1024), "Mi": Decimal(1024**2), "Gi": Decimal(1024**3), "Ti": Decimal(1024**4),
    "Pi": Decimal(1024**5), "Ei": Decimal(1024**6), "n": Decimal("1e-9"), "u": Decimal("1e-6"),
    "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
    "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity_value(text: str | None) -> Decimal | None:
    """A Kubernetes quantity ("15991304Ki", "2", "1500m", "32Gi") as a number; None if it is not one."""
    if not text:
        return None
    match = _QUANTITY.match(text.strip())
    if match is None or match.group(2) not in _SUFFIXES:
        return None
    number, suffix = match.groups()
    if suffix and "e" in number.lower():
        return None
    try:
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation:
        return None


def readable_bytes(text: str | None) -> str:
    """A memory quantity in the largest 1024-based unit under it, two decimals at most ("15.25 GiB");
    the text as given when it is not a quantity."""
    value = quantity_value(text)
    if value is None:
        return text or ""
    amount = float(value)
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if amount >= size:
            return f"{amount / size:,.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{amount:,.0f} B"


def readable_cpu(text: str | None) -> str:
    """A CPU quantity in cores ("2", "0.5"); the text as given when it is not a quantity."""
    value = quantity_value(text)
    if value is None:
        return text or ""
    return f"{float(value):.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Resources:
    cpu: str  # cores
    memory: str  # readable
    pods: str


@dataclass(frozen=True)
class NodeView:
    name: str
    address: str  # the first address the node reports (InternalIP on most clusters)
    ready: str  # the Ready condition's status: True, False, Unknown
    schedulable: bool  # not cordoned (spec.unschedulable)
    total: Resources  # status.capacity
    allocatable: Resources  # status.allocatable: what pods may use
    kubelet_version: str
    os_image: str
    operating_system: str
    architecture: str
    container_runtime: str
    kernel_version: str


def _resources(values: Mapping[str, Any]) -> Resources:
    return Resources(readable_cpu(_text(values.get("cpu"))), readable_bytes(_text(values.get("memory"))),
                     _text(values.get("pods")))  # fmt: skip


def node_view(obj: Mapping[str, Any]) -> NodeView:
    """One `Node` as served; a missing or mistyped field reads as blank, never as an error."""
    meta, spec, status = _dict(obj.get("metadata")), _dict(obj.get("spec")), _dict(obj.get("status"))
    info = _dict(status.get("nodeInfo"))
    addresses = [_dict(a) for a in _list(status.get("addresses"))]
    ready = next((_text(c.get("status")) for c in map(_dict, _list(status.get("conditions")))
                  if c.get("type") == "Ready"), "")  # fmt: skip
    return NodeView(
        name=_text(meta.get("name")),
        address=_text(addresses[0].get("address")) if addresses else "",
        ready=ready or "Unknown",
        schedulable=not spec.get("unschedulable"),
        total=_resources(_dict(status.get("capacity"))),
        allocatable=_resources(_dict(status.get("allocatable"))),
        kubelet_version=_text(info.get("kubeletVersion")),
        os_image=_text(info.get("osImage")),
        operating_system=_text(info.get("operatingSystem")),
        architecture=_text(info.get("architecture")),
        container_runtime=_text(info.get("containerRuntimeVersion")),
        kernel_version=_text(info.get("kernelVersion")),
    )


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
