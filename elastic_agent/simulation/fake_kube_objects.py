"""Pure functions on the fake cluster's API objects (plain JSON-shaped dicts): label and field
selectors, merge and JSON patches, the validation of labels and annotations, and the error that becomes
a Kubernetes Status. Where the real kube-apiserver answers otherwise, tests/contracts/test_kube_contract.py
finds it."""

from __future__ import annotations

import copy
import functools
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


# The fields each kind can be selected by: kube-apiserver refuses any other with 400 (its pod and event
# strategies' selectable fields), so a fake that matched any path would hide a selector the real server
# refuses.
POD_FIELDS = frozenset({
    "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
    "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
    "status.nominatedNodeName",
})  # fmt: skip
EVENT_FIELDS = frozenset({
    "metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
    "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
    "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent", "source",
    "type",
})  # fmt: skip


def parse_field_selector(selector: str | None, supported: frozenset[str] | None = None) -> dict[str, str]:
    """Only equality on a field path (`metadata.name=x`, `involvedObject.name=x`) is supported; with
    `supported`, another field is refused with 400 as the real server refuses it."""
    fields: dict[str, str] = {}
    for part in _split_top_level(selector or ""):
        key, sep, value = part.partition("=")
        if not sep:
            raise StoreError(400, "BadRequest", f"invalid field selector: {part!r}")
        key = key.strip()
        if supported is not None and key not in supported:
            raise StoreError(400, "BadRequest", f"field label not supported: {key}")
        fields[key] = value.lstrip("=").strip()
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
        # A string or number is immutable: deepcopy would return it as it is, after a dispatch.
        return patch if isinstance(patch, str | int | float) else copy.deepcopy(patch)
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


# Validation of metadata (apimachinery's ValidateLabels and ValidateAnnotations)

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAME_PART_MAX = 63  # a label value, and the name part of a label or annotation key
PREFIX_MAX = 253  # the DNS-subdomain prefix of a key
TOTAL_ANNOTATION_SIZE_MAX = 256 * 1024  # all annotation keys and values of an object together, bytes


@functools.lru_cache(maxsize=4096)  # a few keys recur on every pod: each is checked once
def _key_problem(key: str) -> str | None:
    """Why `key` is not a qualified name (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix:
        if len(prefix) > PREFIX_MAX:
            return f"prefix part must be no more than {PREFIX_MAX} bytes"
        if not _DNS_SUBDOMAIN.match(prefix):
            return (
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
    if not name:
        return "name part must be non-empty"
    if len(name.encode()) > NAME_PART_MAX:
        return f"name part must be no more than {NAME_PART_MAX} bytes"
    if not _NAME_PART.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character"
        )
    return None


@functools.lru_cache(maxsize=4096)
def _label_value_problem(value: str) -> str | None:
    if len(value.encode()) > NAME_PART_MAX:
        return f"must be no more than {NAME_PART_MAX} bytes"
    if value and not _NAME_PART.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character"
        )
    return None


def _annotations_size(annotations: Mapping[str, str]) -> int:
    """Bytes of all keys and values; counted in characters first, as a UTF-8 character has at most 4
    bytes: only annotations near the limit are encoded."""
    chars = sum(map(len, annotations)) + sum(map(len, annotations.values()))
    if chars * 4 <= TOTAL_ANNOTATION_SIZE_MAX:
        return chars
    return sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())


def metadata_problems(meta: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> list[str]:
    """What kube-apiserver would refuse in an object's labels and annotations (its 422 causes). With
    `previous` (the stored metadata, checked when written), only the entries that changed are checked."""
    problems = []
    old_labels = (previous or {}).get("labels") or {}
    labels = meta.get("labels") or {}
    if previous is not None and labels is old_labels:
        labels = {}  # unchanged (a merge patch that does not touch them keeps the very same mapping)
    for key, value in labels.items():
        if key in old_labels and old_labels[key] == value:
            continue
        if _key_problem(key):
            problems.append(f'metadata.labels: Invalid value: "{key}": {_key_problem(key)}')
        elif not isinstance(value, str):
            problems.append(f'metadata.labels: Invalid value: "{value}": must be a string')
        elif _label_value_problem(value):
            problems.append(f'metadata.labels: Invalid value: "{value}": {_label_value_problem(value)}')
    old_annotations = (previous or {}).get("annotations") or {}
    annotations = meta.get("annotations") or {}
    if previous is not None and annotations is old_annotations:
        return problems
    for key, value in annotations.items():
        if key in old_annotations and old_annotations[key] == value:
            continue
        if not isinstance(value, str):
            problems.append(f'metadata.annotations: Invalid value: "{key}": must be a string')
            return problems  # no size to count
        problem = _key_problem(key.lower())  # sic: kube-apiserver allows capitals in annotation prefixes
        if problem:
            problems.append(f'metadata.annotations: Invalid value: "{key}": {problem}')
    if annotations and _annotations_size(annotations) > TOTAL_ANNOTATION_SIZE_MAX:
        problems.append(f"metadata.annotations: Too long: may not be more than {TOTAL_ANNOTATION_SIZE_MAX} "
                        "bytes")  # fmt: skip
    return problems


def validate_metadata(
    kind: str, name: str, meta: Mapping[str, Any], previous: Mapping[str, Any] | None = None
) -> None:
    """Raise the 422 kube-apiserver answers for invalid labels or annotations (see metadata_problems)."""
    problems = metadata_problems(meta, previous)
    if problems:
        raise StoreError(422, "Invalid", f'{kind} "{name}" is invalid: ' + ", ".join(problems))


# API object shapes


def pod_event(
    ns: str, pod_name: str, reason: str, message: str, type_: str, now: str, metadata: Mapping[str, Any],
    field_path: str = "",
) -> Obj:
    """A kubelet's Event about a pod or one of its containers (`field_path`), shaped as the API server
    stores one; `metadata` names it the way its store does (a generated name, a resourceVersion)."""
    involved = {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "namespace": ns}
    if field_path:
        involved["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**metadata, "namespace": ns},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "kubelet"},
    }


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
        200: "OK", 201: "Created", 204: "No Content", 400: "BadRequest", 401: "Unauthorized",
        403: "Forbidden", 404: "NotFound", 409: "Conflict", 410: "Gone", 422: "Invalid",
        429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
    }.get(status, "Error")  # fmt: skip
