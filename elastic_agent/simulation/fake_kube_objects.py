"""Pure functions on the fake cluster's API objects (plain JSON-shaped dicts): label and field
selectors, merge and JSON patches, and the error that becomes a Kubernetes Status."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


class StoreError(Exception):
    """Becomes a Kubernetes Status object with this code and reason."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


# Label selectors (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" also match objects without the label, as Kubernetes does.
        return not present or value not in self.values


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\((.*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(selector: str) -> list[str]:
    """Split on commas that are not inside the parentheses of a set (`a in (x,y),b`)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(selector: str | None) -> list[Requirement]:
    """Parse a label selector; raises StoreError(400) for text Kubernetes would also reject."""
    requirements: list[Requirement] = []
    for part in _split_top_level(selector or ""):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ_RE.match(part):
            op = "!=" if m.group(2) == "!=" else "="
            requirements.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise StoreError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")
    return requirements


def parse_field_selector(selector: str | None) -> dict[str, str]:
    """Only equality on a field path (`metadata.name=x`, `involvedObject.name=x`) is supported."""
    fields: dict[str, str] = {}
    for part in _split_top_level(selector or ""):
        key, sep, value = part.partition("=")
        if not sep:
            raise StoreError(400, "BadRequest", f"invalid field selector: {part!r}")
        fields[key.strip()] = value.lstrip("=").strip()
    return fields


def field_value(obj: Mapping[str, Any], path: str) -> str | None:
    node: Any = obj
    for step in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(step)
    return None if node is None else str(node)


def selected(obj: Mapping[str, Any] | None, labels: list[Requirement], fields: Mapping[str, str]) -> bool:
    if obj is None:
        return False
    obj_labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(obj_labels) for r in labels) and all(
        field_value(obj, path) == value for path, value in fields.items()
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Obj, ops: list[Any]) -> Obj:
    """The subset of RFC 6902 a client uses on metadata: add, replace, remove, test."""
    doc = copy.deepcopy(target)
    for op in ops:
        path = [p.replace("~1", "/").replace("~0", "~") for p in str(op.get("path", "")).split("/")[1:]]
        if not path:
            raise StoreError(422, "Invalid", "a JSON patch may not replace the whole object")
        parent: Any = doc
        for step in path[:-1]:
            parent = parent[int(step)] if isinstance(parent, list) else parent.setdefault(step, {})
        last, kind = path[-1], op.get("op")
        if kind in ("add", "replace"):
            parent[last] = copy.deepcopy(op.get("value"))
        elif kind == "remove":
            if last not in parent:
                raise StoreError(422, "Invalid", f"path {op.get('path')} does not exist")
            del parent[last]
        elif kind == "test":
            if parent.get(last) != op.get("value"):
                raise StoreError(422, "Invalid", f"test operation failed at {op.get('path')}")
        else:
            raise StoreError(422, "Invalid", f"unsupported JSON patch operation {kind!r}")
    return doc


# API object shapes


def status_body(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def watch_event(kind: str, obj: Obj) -> bytes:
    return (json.dumps({"type": kind, "object": obj}) + "\n").encode()


def list_body(kind: str, items: list[Obj], rv: int) -> Obj:
    return {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": items}


def reason_for(status: int) -> str:
    return {
        200: "OK", 201: "Created", 400: "BadRequest", 401: "Unauthorized", 403: "Forbidden",
        404: "NotFound", 409: "Conflict", 410: "Gone", 422: "Invalid", 429: "TooManyRequests",
        500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
    }.get(status, "Error")  # fmt: skip
