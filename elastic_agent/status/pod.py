"""What the agent status report shows of the pod object itself: its details, every container, and the
pod's YAML; with every value that may be secret hidden.

Modelled on the official plugin's agent report (gocd/kubernetes-elastic-agents,
`model/reports/agent/KubernetesPodDetails.java`: name, node, namespace, created, started, conditions,
phase, pod IP, host IP; `GoCDContainerDetails.java`: per container its name, image, pull policy, ready,
restart count, command and environment; `KubernetesElasticAgent.getPodConfiguration`: the pod as YAML).
Unlike it, init containers (native sidecars such as Docker-in-Docker among them) are listed too, each
container says its state with the kubelet's reason, and no secret is shown: the official report prints
every environment variable's value, GO_EA_AUTO_REGISTER_KEY included, and the whole pod.

The rule for environment values (`ENV_RULE`, said on the page): GoCD resolves `{{SECRET:...}}` in
profile properties before the plugin sees them, so a value written in an elastic profile (its
Environment, its pod template) may be a secret and cannot be told from one. Values are therefore
never shown; a variable's source is: the plugin (GO_EA_*, the registration key among them), the
profile, a Secret or ConfigMap key (named, never read), a field of the pod or a resource of a
container. In the YAML every `env` value is replaced by a marker, and everything else passes the same
redaction as logs (`redact`) and loses the values of the cluster profile's secure fields (`hide`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from elastic_agent.redaction import hide

HIDDEN_VALUE = "[hidden]"
ENV_RULE = (
    "Values are not shown: GoCD resolves {{SECRET:...}} in elastic profiles before the plugin sees them, "
    "so any value written in a profile may be a secret. GO_EA_* variables are the plugin's own (the "
    "registration key among them); a variable from a Secret names the Secret and key, never its value."
)
_KINDS = (("initContainers", "init container"), ("containers", "container"),
          ("ephemeralContainers", "ephemeral container"))  # fmt: skip


@dataclass(frozen=True)
class EnvRow:
    name: str
    source: str  # where the value comes from; the value itself is never shown


@dataclass(frozen=True)
class ContainerRow:
    name: str
    kind: str  # "container", "init container", "sidecar" (an init container that keeps running)
    image: str
    pull_policy: str
    ready: str  # "yes", "no"
    restarts: int
    state: str  # "Running since ...", "Waiting: ImagePullBackOff (...)", "Terminated: Error, exit code 1"
    last_state: str  # how its previous run ended, or ""
    command: str  # the command, shell-quoted: "" runs the image's ENTRYPOINT
    args: str = ""  # the args, shell-quoted: "" gives the image's CMD, unless there is a command
    env: tuple[EnvRow, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class PodDetails:
    namespace: str
    node: str
    pod_ips: str
    host_ip: str
    created: str
    started: str
    phase: str
    qos: str
    conditions: tuple[tuple[str, str, str], ...]  # (type, status, reason)
    containers: tuple[ContainerRow, ...]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _source(item: Mapping[str, Any]) -> str:
    name = _text(item.get("name"))
    if name.startswith("GO_EA_"):
        return "set by the plugin"
    ref = item.get("valueFrom")
    if not isinstance(ref, Mapping):
        return "written in the profile" if "value" in item else "empty"
    if isinstance(secret := ref.get("secretKeyRef"), Mapping):
        return f"Secret {_text(secret.get('name'))}, key {_text(secret.get('key'))}"
    if isinstance(config := ref.get("configMapKeyRef"), Mapping):
        return f"ConfigMap {_text(config.get('name'))}, key {_text(config.get('key'))}"
    if isinstance(pod_field := ref.get("fieldRef"), Mapping):
        return f"the pod's {_text(pod_field.get('fieldPath'))}"
    if isinstance(resource := ref.get("resourceFieldRef"), Mapping):
        return (
            f"{_text(resource.get('resource'))} of {_text(resource.get('containerName')) or 'this container'}"
        )
    return "a reference"


def _env(container: Mapping[str, Any]) -> tuple[EnvRow, ...]:
    rows = [EnvRow(_text(item.get("name")), _source(item))
            for item in container.get("env") or [] if isinstance(item, Mapping)]  # fmt: skip
    for item in container.get("envFrom") or []:
        if not isinstance(item, Mapping):
            continue
        prefix = _text(item.get("prefix"))
        if isinstance(secret := item.get("secretRef"), Mapping):
            rows.append(EnvRow(f"{prefix}*", f"every key of Secret {_text(secret.get('name'))}"))
        elif isinstance(config := item.get("configMapRef"), Mapping):
            rows.append(EnvRow(f"{prefix}*", f"every key of ConfigMap {_text(config.get('name'))}"))
    return tuple(rows)


def _state(state: Mapping[str, Any]) -> str:
    if isinstance(running := state.get("running"), Mapping):
        return f"Running since {_text(running.get('startedAt'))}".strip()
    if isinstance(waiting := state.get("waiting"), Mapping):
        message = _text(waiting.get("message"))
        return f"Waiting: {_text(waiting.get('reason')) or 'no reason given'}" + (
            f" ({message})" if message else ""
        )
    if isinstance(ended := state.get("terminated"), Mapping):
        code = ended.get("exitCode")
        return f"Terminated: {_text(ended.get('reason')) or 'no reason given'}, exit code {code}"
    return ""


def _words(container: Mapping[str, Any], key: str, secure: Sequence[str]) -> str:
    """`command` or `args` as Kubernetes keeps them apart: `command` replaces the image's ENTRYPOINT,
    `args` its CMD, and a command without args drops the CMD; args alone are the ENTRYPOINT's."""
    words = [str(w) for w in container.get(key) or []]
    return hide(shlex.join(words), secure) if words else ""


def _containers(
    spec: Mapping[str, Any], status: Mapping[str, Any], secure: Sequence[str]
) -> Iterable[ContainerRow]:
    statuses = {
        _text(s.get("name")): s
        for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
        for s in status.get(key) or [] if isinstance(s, Mapping)
    }  # fmt: skip
    for key, kind in _KINDS:
        for container in spec.get(key) or []:
            if not isinstance(container, Mapping):
                continue
            name = _text(container.get("name"))
            own = statuses.get(name, {})
            if key == "initContainers" and container.get("restartPolicy") == "Always":
                kind = "sidecar"
            restarts = own.get("restartCount")
            yield ContainerRow(
                name=name, kind=kind, image=_text(container.get("image")),
                pull_policy=_text(container.get("imagePullPolicy")) or "the cluster's default",
                ready="yes" if own.get("ready") else "no",
                restarts=restarts if isinstance(restarts, int) else 0,
                state=_state(own.get("state") or {}) or "no status yet",
                last_state=_state(own.get("lastState") or {}), command=_words(container, "command", secure),
                args=_words(container, "args", secure),
                env=_env(container),
            )  # fmt: skip


def pod_details(pod: Mapping[str, Any], secure: Sequence[str] = ()) -> PodDetails:
    """The details of a pod object as the API serves it; `secure`: values never to show."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ips = [_text(ip.get("ip")) for ip in status.get("podIPs") or [] if isinstance(ip, Mapping)]
    ips = [ip for ip in ips or [_text(status.get("podIP"))] if ip]
    conditions = tuple((_text(c.get("type")), _text(c.get("status")), _text(c.get("reason")))
                       for c in status.get("conditions") or [] if isinstance(c, Mapping))  # fmt: skip
    return PodDetails(
        namespace=_text(meta.get("namespace")), node=_text(spec.get("nodeName")),
        pod_ips=", ".join(ips), host_ip=_text(status.get("hostIP")),
        created=_text(meta.get("creationTimestamp")), started=_text(status.get("startTime")),
        phase=_text(status.get("phase")), qos=_text(status.get("qosClass")), conditions=conditions,
        containers=tuple(_containers(spec, status, secure)),
    )  # fmt: skip


def _scrubbed(value: Any, secure: Sequence[str]) -> Any:
    if isinstance(value, str):
        return hide(value, secure)
    if isinstance(value, list):
        return [_scrubbed(item, secure) for item in value]
    if isinstance(value, Mapping):
        return {key: _scrubbed(item, secure) for key, item in value.items()}
    return value


def pod_yaml(pod: Mapping[str, Any], secure: Sequence[str] = ()) -> str:
    """The pod as YAML, without metadata.managedFields (kubectl leaves them out too), with every env
    value replaced by HIDDEN_VALUE and the rest redacted."""
    shown = dict(pod)
    shown["metadata"] = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec = dict(pod.get("spec") or {})
    for key, _ in _KINDS:
        spec[key] = [
            {**c, "env": [{**e, "value": HIDDEN_VALUE} if "value" in e else e for e in c.get("env") or []]}
            if isinstance(c, Mapping) and c.get("env") else c
            for c in spec.get(key) or []
        ]  # fmt: skip
        if not spec[key]:
            del spec[key]
    shown["spec"] = spec
    return yaml.safe_dump(_scrubbed(shown, secure), sort_keys=False, default_flow_style=False, width=120)
