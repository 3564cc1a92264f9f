"""Pod templates written by people: the four placeholders, parsing, checking and per-pod instantiation.

Exactly four placeholders exist, written `{{ NAME }}` with optional spaces. The official plugin renders
templates with Mustache, which silently blanks every other `{{...}}`; here anything that is not one of
the four (`{{not_a_placeholder}}`, `${HOME}`, stray braces) stays exactly as written.

How this stays safe for YAML: before parsing, each placeholder in the raw text becomes a plain
alphanumeric sentinel that no YAML context can misread (`image: {{ GOCD_AGENT_IMAGE }}:...` would
otherwise start a flow mapping). After parsing, the sentinels in string values become either the
constant (image name, tag) or the canonical symbolic token (`{{POD_POSTFIX}}`, `{{CONTAINER_POSTFIX}}`),
which `instantiate` replaces per pod. The parsed values are never re-parsed, so a postfix can never
change the structure of the document.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import string
from collections.abc import Callable
from typing import Any

import yaml

POD_POSTFIX = "POD_POSTFIX"
CONTAINER_POSTFIX = "CONTAINER_POSTFIX"
GOCD_AGENT_IMAGE = "GOCD_AGENT_IMAGE"
LATEST_VERSION = "LATEST_VERSION"
PLACEHOLDERS = (POD_POSTFIX, CONTAINER_POSTFIX, GOCD_AGENT_IMAGE, LATEST_VERSION)

# What the official plugin's current release renders for {{ GOCD_AGENT_IMAGE }} and {{ LATEST_VERSION }}:
# two constants in KubernetesInstanceFactory.getJinJavaContext of gocd/kubernetes-elastic-agents 5.0.2
# (tag v5.0.2-779, commit d8ce58a89ffb3a96db3eeb8ad3ec846257eabc87; unchanged on main at 8128178), no
# lookup. The same values here, so that a template moved over from it runs the same agent image. The
# image repository publishes no `latest` tag, so the tag is a fixed one in both plugins.
AGENT_IMAGE_NAME = "gocd/gocd-agent-wolfi"
AGENT_IMAGE_TAG = "v25.4.0"

POD_POSTFIX_TOKEN = "{{POD_POSTFIX}}"
CONTAINER_POSTFIX_TOKEN = "{{CONTAINER_POSTFIX}}"
DEFAULT_POD_NAME_PREFIX = "k8s-ea"

_PLACEHOLDER = re.compile(r"\{\{\s*(" + "|".join(PLACEHOLDERS) + r")\s*\}\}")
_POSTFIX = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

POSTFIX_LENGTH = 10
# Checks assume postfixes of POSTFIX_LENGTH characters (what new_postfix makes), so a name that passes
# validation also fits Kubernetes' limits when a real pod is made from it.
_SAMPLE_POSTFIX = "a" * POSTFIX_LENGTH

MAX_TEMPLATE_CHARS = 1024 * 1024
# A YAML alias can make a small document expand exponentially when walked; a pod spec has a few hundred
# nodes, so these bounds only ever stop abuse.
_MAX_NODES = 100_000
_MAX_DEPTH = 64


class TemplateError(ValueError):
    """A pod template that cannot be used; the message is for the person who wrote it."""


def new_postfix() -> str:
    """A fresh random postfix: lowercase letters and digits, valid inside any Kubernetes name."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(POSTFIX_LENGTH))


class _Loader(yaml.SafeLoader):
    """Safe YAML, except that unquoted dates stay text, as they do for kubectl (a date object is not a
    valid pod field value and could not be sent as JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_pod_template(text: str, file_type: str = "auto") -> dict[str, Any]:
    """Parse a template (`yaml`, `json`, or `auto`: JSON when it looks like JSON, else YAML) into a pod
    manifest with the per-pod placeholders left symbolic. Raises TemplateError."""
    if len(text) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"the pod template is larger than {MAX_TEMPLATE_CHARS // 1024} KiB")
    if _flow_depth(text) > _MAX_DEPTH:
        raise TemplateError("the pod template is too large or too deeply nested to be a pod spec")
    n = 0
    while f"gocdph{n}x" in text:
        n += 1
    sentinels = {name: f"gocdph{n}x{i}x" for i, name in enumerate(PLACEHOLDERS)}
    masked = _PLACEHOLDER.sub(lambda m: sentinels[m.group(1)], text)
    document = _load(masked, file_type)
    replacements = {
        sentinels[POD_POSTFIX]: POD_POSTFIX_TOKEN,
        sentinels[CONTAINER_POSTFIX]: CONTAINER_POSTFIX_TOKEN,
        sentinels[GOCD_AGENT_IMAGE]: AGENT_IMAGE_NAME,
        sentinels[LATEST_VERSION]: AGENT_IMAGE_TAG,
    }
    pattern = re.compile("|".join(re.escape(s) for s in replacements))
    pod: dict[str, Any] = _copy(document, lambda s: pattern.sub(lambda m: replacements[m.group(0)], s))
    check_pod_manifest(pod)
    return pod


def _flow_depth(text: str) -> int:
    """The deepest run of unclosed [ and { (quotes ignored, so an over-estimate). PyYAML takes seconds
    on deeply nested flow collections before giving up, so such text is refused before parsing."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def _load(text: str, file_type: str) -> Any:
    if file_type == "json" or (file_type == "auto" and text.lstrip().startswith("{")):
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as error:
            if file_type == "json":
                raise TemplateError(f"the pod template is not valid JSON: {error}") from None
    try:
        return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = _unquoted(error.problem)
        raise TemplateError(f"the pod template is not valid YAML{where}: {problem}") from None
    except (yaml.YAMLError, RecursionError) as error:
        raise TemplateError(f"the pod template is not valid YAML: {_unquoted(str(error))}") from None
    except ValueError:
        # PyYAML's constructors call int() and float() as they are: a number of more than 4,300 digits.
        raise TemplateError("the pod template is not valid YAML: a number in it is too long") from None


# What PyYAML quotes in a message: a tag, an alias, an anchor, a character.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _unquoted(problem: str | None) -> str:
    """PyYAML's sentence without the template text it quotes (a single character excepted): a
    resolved {{SECRET:...}} written unquoted, `value: !s3cret` or `value: *s3cret`, is read as a tag or
    an alias, and the message would quote the secret into the job's console."""
    return _QUOTED.sub(lambda m: m.group(0) if len(m.group(0)) <= 4 else "(text not shown)", problem or "")


def _copy(value: Any, on_text: Callable[[str], str]) -> Any:
    """A deep copy made of plain JSON types with `on_text` applied to every string (keys included),
    refusing what Kubernetes could not take and documents too big or too deep to be pod specs."""
    budget = [_MAX_NODES]

    def walk(node: Any, depth: int, path: str) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > _MAX_DEPTH:
            raise TemplateError("the pod template is too large or too deeply nested to be a pod spec")
        if isinstance(node, str):
            return on_text(node)
        if isinstance(node, float) and not math.isfinite(node):
            # JSON's NaN and YAML's .nan/.inf parse, but no Kubernetes object can hold them.
            raise TemplateError(f"the value at {path or 'the top'} is not a finite number")
        if node is None or isinstance(node, bool | int | float):
            return node
        if isinstance(node, dict):
            copied = {}
            for key, item in node.items():
                if not isinstance(key, str):
                    raise TemplateError(
                        f"the key {key!r} at {path or 'the top'} is not text: quote it "
                        "(YAML reads unquoted yes/no/on/off and numbers as other types)"
                    )
                copied[on_text(key)] = walk(item, depth + 1, f"{path}.{key}" if path else key)
            return copied
        if isinstance(node, list):
            return [walk(item, depth + 1, f"{path}[{i}]") for i, item in enumerate(node)]
        raise TemplateError(f"the value at {path or 'the top'} is a {type(node).__name__}, not plain data")

    return walk(value, 0, "")


def check_pod_manifest(pod: Any) -> None:
    """Raise TemplateError unless `pod` (placeholders symbolic) can become a pod of this plugin."""
    if not isinstance(pod, dict):
        raise TemplateError("the pod template must be a mapping describing one Pod (metadata, spec)")
    if pod.get("kind", "Pod") != "Pod":
        raise TemplateError(f"the template describes a {pod.get('kind')!r}; only kind: Pod is supported")
    if pod.get("apiVersion", "v1") != "v1":
        raise TemplateError(f"apiVersion {pod.get('apiVersion')!r} is not a Pod's; write apiVersion: v1")
    metadata = pod.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TemplateError("metadata must be a mapping")
    if "generateName" in metadata:
        raise TemplateError(
            "metadata.generateName is not supported: put {{ POD_POSTFIX }} in metadata.name instead"
        )
    if "namespace" in metadata:
        raise TemplateError(
            "metadata.namespace must not be set: the cluster profile's namespace decides where pods run"
        )
    name = metadata.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TemplateError("metadata.name must be text (or left out for a generated name)")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise TemplateError("the pod template needs a spec with at least one container")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise TemplateError("spec.containers must list at least one container")
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            raise TemplateError(f"spec.containers[{i}] must be a mapping with a name and an image")
        for field, what in (("name", "a name"), ("image", "an image")):
            if not isinstance(container.get(field), str) or not container[field].strip():
                raise TemplateError(f"spec.containers[{i}] needs {what}")
    sample = instantiate(pod, _SAMPLE_POSTFIX, _SAMPLE_POSTFIX)
    pod_name = sample["metadata"]["name"]
    if len(pod_name) > 253 or not _DNS_SUBDOMAIN.match(pod_name):
        raise TemplateError(
            f"metadata.name {name!r} does not make a valid pod name: use lowercase letters, digits, "
            "'-' and '.', start and end with a letter or digit, and stay under 240 characters"
        )
    for i, container in enumerate(sample["spec"]["containers"]):
        if len(container["name"]) > 63 or not _DNS_LABEL.match(container["name"]):
            raise TemplateError(
                f"spec.containers[{i}].name {containers[i]['name']!r} does not make a valid container name: "
                f"use lowercase letters, digits and '-', at most {63 - POSTFIX_LENGTH} characters "
                "besides {{ CONTAINER_POSTFIX }}"
            )


def instantiate(template: dict[str, Any], pod_postfix: str, container_postfix: str) -> dict[str, Any]:
    """A new pod manifest from a template: the two per-pod placeholders replaced by the given postfixes
    (lowercase letters, digits, '-'); a name without {{POD_POSTFIX}} gets `-<pod_postfix>` appended so
    that no two pods collide, and a template without a name gets `k8s-ea-<pod_postfix>`."""
    for label, postfix in (("pod", pod_postfix), ("container", container_postfix)):
        if not _POSTFIX.match(postfix):
            raise ValueError(f"the {label} postfix {postfix!r} must be lowercase letters, digits and '-'")

    def substitute(text: str) -> str:
        with_pod = text.replace(POD_POSTFIX_TOKEN, pod_postfix)
        return with_pod.replace(CONTAINER_POSTFIX_TOKEN, container_postfix)

    pod: dict[str, Any] = _copy(template, substitute)
    template_metadata = template.get("metadata")
    template_name = template_metadata.get("name") if isinstance(template_metadata, dict) else None
    metadata = pod.setdefault("metadata", {})
    if not isinstance(template_name, str) or not template_name.strip():
        metadata["name"] = f"{DEFAULT_POD_NAME_PREFIX}-{pod_postfix}"
    elif POD_POSTFIX_TOKEN not in template_name:
        metadata["name"] = f"{metadata['name']}-{pod_postfix}"
    return pod
