"""The nodes of the cluster status report: what each node can hold, what runs it, and how many of this
plugin's pods it runs; or one line saying why they are not shown.

The official plugin's cluster report is its nodes (gocd/kubernetes-elastic-agents,
`ClusterStatusReportExecutor`, `model/KubernetesCluster.java`, `status-report.template.ftlh`), listed
with the plugin's credentials, which the official Helm chart's ClusterRole grants. Listing nodes is
cluster-scoped, and this plugin's Role is namespaced on purpose: the optional ClusterRole beside it
(`NODES_RBAC`) grants `list` on nodes and nothing else. Without it the API answers 403, and the report
says in one line what to apply; any other failure (an outage, a timeout) is one line too, never an
error page: the rest of the report is read from memory and still shown. During an outage the call is
not made at all, so that the page does not wait for a timeout it knows will come.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from elastic_agent.kube.nodes import NodeView
from elastic_agent.kube.port import ClusterError, ClusterPort, Forbidden
from elastic_agent.redaction import redact

NODES_RBAC = "docker/kubernetes/rbac-nodes"
NO_RIGHT = (
    "Nodes are not shown: this plugin's service account may not list them (the API answered {status}). "
    f"To see them, apply the optional ClusterRole: kubectl apply -k {NODES_RBAC} (docs/install.md, step 2)."
)


@dataclass(frozen=True)
class NodeSection:
    nodes: tuple[NodeView, ...] = ()
    pods_on: dict[str, int] = field(default_factory=dict)  # this plugin's pods per node name
    note: str = ""  # one line when the nodes are not shown


def node_section(port: ClusterPort, pod_nodes: Iterable[str]) -> NodeSection:
    """The cluster's nodes, with the number of this plugin's pods on each (`pod_nodes`: each pod's
    node, "" for none)."""
    outage = port.outage.problem()
    if outage is not None:
        return NodeSection(note=f"Nodes are not shown: {redact(str(outage))}.")
    try:
        nodes = port.nodes()
    except Forbidden as error:
        return NodeSection(note=NO_RIGHT.format(status=error.status))
    except ClusterError as error:
        return NodeSection(note=f"Nodes are not shown: {redact(str(error))}.")
    pods_on: dict[str, int] = {}
    for node in pod_nodes:
        if node:
            pods_on[node] = pods_on.get(node, 0) + 1
    return NodeSection(tuple(sorted(nodes, key=lambda n: n.name)), pods_on)
