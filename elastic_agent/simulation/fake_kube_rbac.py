"""Authorization in the fake Kubernetes API server, as RBAC decides it for the core API group.

A real server decides on (namespace, verb, resource[/subresource], name) against the Roles bound to the
caller; the fake does the same for service-account tokens granted a Role's rules, so that a missing
permission gets the 403 a real cluster answers (tests/real/test_rbac.py runs on the real server, the contract
tests on both). A ClusterRole bound with a ClusterRoleBinding grants its rules in every namespace and at
the cluster scope (rules kept under the namespace None); one bound with a RoleBinding is a Role there.
Groups and aggregation are not modelled: the plugin needs neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServiceAccount:
    """A bearer token's identity and the rules bound to it, per namespace (None: cluster-wide)."""

    user: str
    rules: dict[str | None, list[Mapping[str, Any]]] = field(default_factory=dict)

    def allows(self, namespace: str | None, verb: str, resource: str, name: str | None) -> bool:
        """RBAC's rule matching for the core API group: any rule bound in `namespace`, or cluster-wide
        (a Role never grants a cluster-scoped resource), that names the verb, the resource (with its
        subresource: `pods/log`) and, if it lists names, the object."""
        bound = [*self.rules.get(None, []), *(self.rules.get(namespace, []) if namespace else [])]
        for rule in bound:
            if not {"", "*"} & set(rule.get("apiGroups") or []):
                continue
            if not {verb, "*"} & set(rule.get("verbs") or []):
                continue
            if not {resource, "*"} & set(rule.get("resources") or []):
                continue
            names = rule.get("resourceNames") or []
            if names and name not in names:
                continue
            return True
        return False


# Paths any authenticated user may GET (the system:discovery and system:public-info-viewer roles).
NON_RESOURCE = ("/version", "/api", "/api/v1", "/apis", "/healthz", "/readyz", "/livez")


def request_attributes(method: str, path: str,
                       query: Mapping[str, str]) -> tuple[str | None, str, str, str | None]:  # fmt: skip
    """What RBAC decides on for an API path: (namespace, verb, resource[/subresource], name)."""
    parts = path.strip("/").split("/")[2:]  # after api/v1
    namespace = None
    if parts[:1] == ["namespaces"] and len(parts) >= 3:
        namespace, parts = parts[1], parts[2:]
    resource = parts[0] if parts else ""
    name = parts[1] if len(parts) > 1 else None
    if len(parts) > 2:
        resource = f"{resource}/{parts[2]}"
    watching = (query.get("watch") or "").lower() in ("true", "1")
    verb = {
        "GET": "get" if name else ("watch" if watching else "list"), "POST": "create", "PATCH": "patch",
        "PUT": "update", "DELETE": "delete" if name else "deletecollection",
    }.get(method, method.lower())  # fmt: skip
    return namespace, verb, resource, name
