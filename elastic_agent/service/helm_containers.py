"""The plugin's own containers and the volume they put the jar in, for `merge-helm-values`
(helm_values.py): what of an operator's tuning survives a second merge, and where the jar goes when the
chart has no volume for `/godata`.

**The plugin's containers** (`server.initContainers` and `server.sidecarContainers` entries named as in
values-gocd.yaml) are merged, not replaced, when yours differ: the guide itself tells operators to add
`--log-level DEBUG` to the sidecar's args and to raise its memory, and a second merge (a new image, a
new version of the values) must not throw that away. Of such a container:
- `args`: yours are kept when they hold every argument of the plugin's (yours = the plugin's plus your
  additions); when they lack one, the plugin's args changed under yours and neither can be taken
  silently: a conflict, listing what yours lack.
- `env`: by name, yours kept; the plugin's variables you do not set are added.
- `resources`: key by key, yours kept; the plugin's keys you do not set are added.
- everything else (image, command, probes, mounts, security context) is the plugin's: it is what makes
  the container work, and the image is the one of your copy of values-gocd.yaml.

**Without persistence** (`server.persistence.enabled` false, as Helm reads it: `false`, `null`, `0`,
`""`), gocd/templates/gocd-server-deployment.yaml of chart 2.18.0 (lines 55-59, 125-134) declares no
`goserver-vol` and mounts nothing at the server's `/godata`, so an init container that mounts
`goserver-vol` makes the API server refuse the pod, and no other volume reaches the server's `/godata`.
The chart renders `extraVolumes` and `extraVolumeMounts` with or without persistence, so the merge
adapts rather than refuses: `/godata` becomes an emptyDir (`GODATA_VOLUME`) shared by the init container
and the server container. That keeps what `persistence.enabled: false` means (nothing of `/godata`
outlives the pod) and puts the jar where GoCD looks for it. With persistence on again, those entries go.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

CONTAINER_LISTS = ("server.initContainers", "server.sidecarContainers")
KEPT_KEYS = ("args", "env", "resources")
CHART_VOLUME = "goserver-vol"  # gocd/templates/gocd-server-deployment.yaml, chart 2.18.0, line 56
GODATA_VOLUME = "gocd-reuse-godata"
GODATA_MOUNT = {"name": GODATA_VOLUME, "mountPath": "/godata"}
ADAPTED_LISTS = ("server.persistence.extraVolumes", "server.persistence.extraVolumeMounts")


@dataclass
class ContainerMerge:
    """One container of the plugin's merged over yours of the same name, and what that did."""

    container: dict[str, Any]
    kept: list[str] = field(default_factory=list)  # "args: ...": your settings kept
    replaced: list[str] = field(default_factory=list)  # keys of yours the plugin's replaced
    conflicts: list[str] = field(default_factory=list)  # what cannot be kept nor replaced silently


def _lacking(yours: list[Any], ours: list[Any]) -> list[Any]:
    """The plugin's arguments that yours do not have (as many times as the plugin's have them)."""
    left = list(yours)
    missing = []
    for word in ours:
        if word in left:
            left.remove(word)
        else:
            missing.append(word)
    return missing


def _env(yours: list[Any], ours: list[Any]) -> list[Any]:
    names = {entry.get("name") for entry in yours if isinstance(entry, dict)}
    return [*yours, *(entry for entry in ours if entry.get("name") not in names)]


def _over(yours: Any, ours: Any) -> Any:
    """Yours key by key over the plugin's (maps), else yours."""
    if isinstance(yours, dict) and isinstance(ours, dict):
        return {**ours, **{key: _over(value, ours.get(key)) for key, value in yours.items()}}
    return yours


def merge_container(yours: dict[str, Any], ours: dict[str, Any]) -> ContainerMerge:
    merged = ContainerMerge(copy.deepcopy(ours))
    for key in yours.keys() | ours.keys():
        mine, plugin = yours.get(key), ours.get(key)
        if mine == plugin or key == "name":
            continue
        if key not in KEPT_KEYS or mine is None:
            merged.replaced.append(key)
        elif key == "args":
            missing = _lacking(list(mine), list(plugin or []))
            if missing:
                merged.conflicts.append(
                    f"args: yours {json.dumps(mine)} lack the plugin's {json.dumps(missing)}"
                )
            else:
                merged.container["args"] = mine
                merged.kept.append(f"args {json.dumps(mine)} (the plugin's: {json.dumps(plugin)})")
        elif key == "env":
            merged.container["env"] = _env(list(mine), list(plugin or []))
            ours_by_name = {entry.get("name"): entry for entry in plugin or []}
            own = [
                e.get("name") for e in mine if isinstance(e, dict) and ours_by_name.get(e.get("name")) != e
            ]
            merged.kept.append(f"env {', '.join(str(name) for name in own)}" if own else "env")
        else:
            merged.container["resources"] = _over(mine, plugin)
            merged.kept.append(f"resources {json.dumps(mine)} (the plugin's: {json.dumps(plugin)})")
    return merged


def helm_true(value: Any) -> bool:
    """A value as a Go template's `if` reads it (`false`, `null`, `0`, `""` and empty lists are false)."""
    return bool(value) if not isinstance(value, str) else value != ""


def persistence_on(values: dict[str, Any]) -> bool:
    """`server.persistence.enabled` as the chart reads it: true unless your values set it false (a
    `null` removes the chart's default `true`, which leaves it false too)."""
    server = values.get("server")
    persistence = server.get("persistence") if isinstance(server, dict) else None
    if not isinstance(persistence, dict) or "enabled" not in persistence:
        return True
    return helm_true(persistence["enabled"])


def entries_at(values: dict[str, Any], path: str) -> list[Any]:
    node: Any = values
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, list) else []


def _set(values: dict[str, Any], path: str, entries: list[Any]) -> None:
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = entries


ADAPTED = (
    f"server.persistence.enabled is false, so the chart declares no volume {CHART_VOLUME} (the API server "
    "would refuse the init container that mounts it) and mounts nothing at the server's /godata: the "
    f"plugin's init container and the server share the emptyDir {GODATA_VOLUME} at /godata instead, which "
    "lasts as long as the pod, as /godata does without persistence"
)


def _adapted(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("name") == GODATA_VOLUME


def _without_adapted(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`values` less the entries an earlier merge without persistence added, and what went."""
    values, said = copy.deepcopy(values), []
    for path in ADAPTED_LISTS:
        entries = entries_at(values, path)
        kept = [entry for entry in entries if not _adapted(entry)]
        if len(kept) != len(entries):
            _set(values, path, kept)
            said.append(f"removed {path}: {GODATA_VOLUME} (persistence is on: the jar goes into "
                        f"{CHART_VOLUME}, the server's /godata)")  # fmt: skip
    return values, said


Placed = tuple[dict[str, Any], dict[str, Any], list[str], str | None]


def place_the_jar(yours: dict[str, Any], plugin: dict[str, Any]) -> Placed:
    """(yours, the plugin's values, lines of what changed in yours, a note) for where the jar goes: with
    persistence, yours less what an earlier merge without it added; without, the plugin's values with
    `/godata` an emptyDir that its init containers and the server share, in place of `goserver-vol`."""
    ours = plugin.get("server", {}).get("persistence", {}) if isinstance(plugin.get("server"), dict) else {}
    if persistence_on(plugin if isinstance(ours, dict) and "enabled" in ours else yours):
        cleaned, said = _without_adapted(yours)
        return cleaned, plugin, said, None
    plugin = copy.deepcopy(plugin)
    for init in entries_at(plugin, "server.initContainers"):
        mounts = init.get("volumeMounts") or []
        if any(mount.get("name") == CHART_VOLUME for mount in mounts):
            init["volumeMounts"] = [m for m in mounts if m.get("name") != CHART_VOLUME] + [dict(GODATA_MOUNT)]
    wanted = {"server.persistence.extraVolumes": {"name": GODATA_VOLUME, "emptyDir": {}},
              "server.persistence.extraVolumeMounts": dict(GODATA_MOUNT)}  # fmt: skip
    for path, entry in wanted.items():
        _set(plugin, path, [*entries_at(plugin, path), entry])
    return yours, plugin, [], ADAPTED
