"""A pod's events as the agent status report lists them, read from `core/v1` Events.

The official plugin's agent report (gocd/kubernetes-elastic-agents, `KubernetesPodEvent.java`) shows
first and last seen, count, the path of the container an event is about (`involvedObject.fieldPath`,
e.g. `spec.containers{agent}`, as the kubelet's `GenerateContainerRef` writes it), type, reason and
message; so do these rows. Shared by the adapter and the in-process port so that both read Events
alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from elastic_agent.kube.pod_cache import epoch


def event_rows(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`core/v1` Events as the status report lists them (ClusterPort.pod_events), oldest first. An
    event recorded with the events.k8s.io API has `eventTime` and no timestamps of the old kind."""
    rows = []
    for e in items:
        last = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        involved = e.get("involvedObject") or {}
        rows.append({
            "type": e.get("type"), "reason": e.get("reason"), "message": e.get("message"),
            "count": e.get("count") or 1, "last_seen": epoch(last),
            "first_seen": epoch(e.get("firstTimestamp") or e.get("eventTime") or last),
            "field_path": str(involved.get("fieldPath") or ""),
        })  # fmt: skip
    return sorted(rows, key=lambda e: e["last_seen"])
