"""The fake cluster's nodes, shaped as a kubelet registers and updates its `Node`.

Fields and their forms are those a kubelet writes (k8s.io/kubernetes v1.36.3,
pkg/kubelet/nodestatus/setters.go: `NodeAddress`, `MachineInfo` for capacity and allocatable, where
memory is counted in Ki and allocatable is capacity less the reserved and the eviction threshold,
`VersionInfo`, `ReadyCondition`); the values are those of a small machine. The fake runs no kubelet of
its own: these nodes exist so that pods can be bound to them and read through them (fake_kube.py), and
so that the cluster status report has nodes to list.
"""

from __future__ import annotations

from elastic_agent.simulation.fake_kube_objects import Obj

CAPACITY = {"cpu": "4", "memory": "16374584Ki", "pods": "110", "ephemeral-storage": "101430960Ki"}
# capacity less the kubelet's default hard eviction threshold (memory.available<100Mi)
ALLOCATABLE = {"cpu": "4", "memory": "16272184Ki", "pods": "110", "ephemeral-storage": "93478772582"}
KUBELET_VERSION = "v1.30.0-fake"  # the fake API server's own /version


def node_address(nodes: list[str], name: str) -> str:
    """The InternalIP of node `name` of the fake cluster's `nodes`."""
    return f"10.0.1.{nodes.index(name) + 1}" if name in nodes else ""


def node_object(name: str, index: int, at: str) -> Obj:
    """Node `name`, the `index`th of the cluster (its address), Ready since `at` (RFC 3339)."""
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "kubelet is posting ready status", "lastHeartbeatTime": at,
             "lastTransitionTime": at}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(CAPACITY),
            "allocatable": dict(ALLOCATABLE),
            "conditions": [ready],
            "addresses": [  # InternalIP: node_address
                {"type": "InternalIP", "address": f"10.0.1.{index + 1}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"{index:08x}-0000-0000-0000-000000000000",
                "bootID": f"{index:08x}-1111-1111-1111-111111111111",
                "kernelVersion": "6.1.0-28-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
