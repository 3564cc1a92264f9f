"""Rendering an elastic profile into a pod template: a Pod manifest (plain dict) whose per-pod
placeholders stay symbolic (`{{POD_POSTFIX}}`, `{{CONTAINER_POSTFIX}}`), so that equal profiles render
equal templates (the reuse fingerprint relies on this) and `instantiate` makes each concrete pod.

Pure: the only input from outside is `fetch_remote`, given by the caller for remote mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiles.elastic import ElasticProfile
from profiles.errors import ProfileError
from profiles.placeholders import (
    AGENT_IMAGE_NAME,
    AGENT_IMAGE_TAG,
    CONTAINER_POSTFIX_TOKEN,
    DEFAULT_POD_NAME_PREFIX,
    POD_POSTFIX_TOKEN,
    TemplateError,
    instantiate,
    new_postfix,
    parse_pod_template,
)
from profiles.values import safe_url

__all__ = [
    "AGENT_CONTAINER_PREFIX",
    "AGENT_IMAGE_NAME",
    "AGENT_IMAGE_TAG",
    "instantiate",
    "new_postfix",
    "render_pod_template",
]

AGENT_CONTAINER_PREFIX = "gocd-agent-container"


def render_pod_template(
    profile: ElasticProfile, fetch_remote: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """The profile's pod template. Raises ProfileError when the profile's template (inline or remote)
    is unusable; errors raised by `fetch_remote` itself (unreachable, too large...) pass through."""
    if profile.pod_spec_type == "yaml":
        pod = _parse(profile.pod_configuration, "auto", "PodConfiguration", "the pod template")
    elif profile.pod_spec_type == "remote":
        if not profile.remote_file:
            raise ProfileError("RemoteFile", "RemoteFile must be set: pod specification 'remote' needs a URL")
        if fetch_remote is None:
            raise ProfileError("RemoteFile", "remote pod templates cannot be fetched here")
        where = f"the pod template at {safe_url(profile.remote_file)}"
        pod = _parse(fetch_remote(profile.remote_file), profile.remote_file_type, "RemoteFile", where)
    else:
        pod = _properties_pod(profile)
    _add_environment(pod, profile.environment)
    return pod


def _parse(text: str | None, file_type: str, key: str, where: str) -> dict[str, Any]:
    if text is None or not text.strip():
        raise ProfileError(key, f"{where} is empty")
    try:
        return parse_pod_template(text, file_type)
    except TemplateError as error:
        raise ProfileError(key, f"{where}: {error}") from None


def _properties_pod(profile: ElasticProfile) -> dict[str, Any]:
    if not profile.image:
        raise ProfileError("Image", "Image must be set: pod specification 'properties' needs an agent image")
    container: dict[str, Any] = {
        "name": f"{AGENT_CONTAINER_PREFIX}-{CONTAINER_POSTFIX_TOKEN}",
        "image": profile.image,
        # As the official plugin: a tag already on the node is used, so pods start without a registry
        # round trip (an untagged image would otherwise default to pulling on every pod).
        "imagePullPolicy": "IfNotPresent",
    }
    limits = {}
    if profile.max_memory is not None:
        limits["memory"] = profile.max_memory.quantity
    if profile.max_cpu is not None:
        limits["cpu"] = profile.max_cpu.quantity
    if limits:
        container["resources"] = {"limits": limits}
    if profile.privileged:
        container["securityContext"] = {"privileged": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{DEFAULT_POD_NAME_PREFIX}-{POD_POSTFIX_TOKEN}"},
        "spec": {
            "containers": [container],
            # An agent that exits is done: restarting it in place would register a stale agent.
            "restartPolicy": "Never",
        },
    }


def _add_environment(pod: dict[str, Any], environment: tuple[tuple[str, str], ...]) -> None:
    """The profile's Environment lines go to every container, in every mode, as the official plugin
    does; they come after the template's own variables, so they win."""
    if not environment:
        return
    names = {name for name, _ in environment}
    for container in pod["spec"]["containers"]:
        own = container.get("env") or []
        kept = [item for item in own if not (isinstance(item, dict) and item.get("name") in names)]
        container["env"] = kept + [{"name": name, "value": value} for name, value in environment]
