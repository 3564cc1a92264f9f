"""`merge-helm-values`: the values an administrator already gives the GoCD chart, with this plugin's
values (docker/helm/values-gocd.yaml) merged in, as one file for `helm upgrade -f`, and on standard
error every key it changed, every setting of yours it kept, and what to do about the rest.

Why a command and not a second `-f`: Helm merges values files map by map, but a list in a later file
replaces the earlier file's list whole. The plugin's values set five lists of the chart
(`server.initContainers`, `server.sidecarContainers`, `server.env.extraEnvVars`,
`server.persistence.extraVolumes`, `server.persistence.extraVolumeMounts`), so `-f yours.yaml -f
values-gocd.yaml` silently drops your own init containers, sidecars, environment variables and volumes.
Here lists whose entries all have a `name` are merged by name: an entry of the plugin's values replaces
the entry of yours with the same name, and the rest of yours stay, in their order, before the plugin's
new ones. So running it again on its own output changes nothing.

A second `-f` also overwrites every setting of yours that the plugin's file has. Here each such key has
a rule (`_RULES`), chosen by what the plugin needs of it:
- `rbac.*` and `serviceAccount.*` are always yours (the plugin's file no longer sets them; an older copy
  did): the chart's ClusterRole is the official plugin's, and a renamed account is deleted by Helm with
  what was bound to it. The account the server pod will run as is computed as the chart does, and when
  it is not the one the bindings of docker/kubernetes/rbac and rbac-nodes name, what to change is printed.
- `server.shouldPreconfigure: false` of yours is kept (the profiles are then made by hand).
- `server.preconfigureCommand`: a command of your own is a conflict (the chart runs one postStart
  command); the chart's default script, or an earlier version of the plugin's, is replaced.
- `server.terminationGracePeriodSeconds` of yours is kept when it leaves the backend the time it needs
  to stop, compared as the chart renders it (`"120"` is 120); a shorter one is a conflict.
- the pod's `kubectl.kubernetes.io/default-container` annotation of yours is kept.
- the plugin's own containers keep your args, env and resources (helm_containers.py), and without
  persistence the jar goes into an emptyDir at `/godata` rather than the chart's volume that is not there.
A conflict stops the command: nothing is written, each conflict is listed with what it means, and
`--take-ours` takes the plugin's value for each instead. Every other key is the plugin's where it sets
one (as Helm does), and printed when that changes yours.

Written by hand over PyYAML (already a dependency): the tools that merge YAML (yq's `*+`) append lists,
which duplicates entries on a second run and cannot replace an outdated entry of the plugin's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from elastic_agent.service.helm_containers import (
    CONTAINER_LISTS,
    helm_true,
    merge_container,
    place_the_jar,
)

HELP = "merge your values for the GoCD Helm chart with this plugin's (lists of named entries by name)"
DESCRIPTION = __doc__.split("\n\n")[0] if __doc__ else HELP
EPILOG = (
    "Exit status: 0 merged (written to standard output, what changed to standard error); 2 a file "
    "cannot be used; 3 settings of yours conflict with the plugin's (nothing written: each is listed; "
    "--take-ours takes the plugin's for them)."
)
CONFLICT_STATUS = 3

LEFT_TO_YOU = ("rbac", "serviceAccount")
CHART_PRECONFIGURE = ["/bin/bash", "/preconfigure_server.sh"]  # gocd/values.yaml of chart 2.18.0
PLUGIN_PRECONFIGURE_MARK = "kubernetes-reuse-preconfigure"  # in every version of the plugin's command
# The backend exits within 9 s of SIGTERM (docs/operations.md, "Stopping it, and what a restart loses").
BACKEND_STOP_S = 10
BOUND_ACCOUNT = "gocd"  # the subject of both bindings below
BINDINGS = ("docker/kubernetes/rbac/rolebinding.yaml", "docker/kubernetes/rbac-nodes/clusterrolebinding.yaml")
KUBERNETES_GRACE_S = 30  # a pod's terminationGracePeriodSeconds when the field is left out
# gocd/values.yaml of chart 2.18.0: entries a values file's list of the same key replaces.
CHART_DEFAULT_ENTRIES = {
    "server.env.extraEnvVars": {
        "GOCD_PLUGIN_INSTALL_kubernetes-elastic-agents": "GoCD no longer downloads the official Kubernetes "
        "plugin at each start (add this entry to your values to keep it: docs/install.md, step 4)",
    },
}
_ABSENT = object()  # a key the merged values leave out


class ValuesError(Exception):
    """A values file that cannot be merged: the message says which and why."""


@dataclass
class Merged:
    """The merged values, and what the merge did to yours."""

    values: dict[str, Any]
    changed: list[str] = field(default_factory=list)  # every key of yours the merge changed or added
    kept: list[str] = field(default_factory=list)  # settings of yours kept where the plugin's differ
    conflicts: list[str] = field(default_factory=list)  # settings of yours the plugin's would replace
    notes: list[str] = field(default_factory=list)  # what to change outside the values


def _show(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"a map of {len(value)} keys"
    return json.dumps(value)


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(entry, dict) and "name" in entry for entry in value)


class _Merger:
    """One merge: walks the plugin's values over yours, applying `_RULES`, and records what it did."""

    def __init__(self, take_ours: bool, preconfigure_on: bool) -> None:
        self.take_ours = take_ours
        self.preconfigure_on = preconfigure_on
        self.result = Merged({})

    def keep(self, path: str, why: str) -> None:
        self.result.kept.append(f"kept yours {path}: {why}")

    def conflict(self, path: str, yours: Any, ours: Any, meaning: str) -> Any:
        if self.take_ours:
            self.result.changed.append(f"replaced yours {path} (--take-ours): {meaning}")
            return ours
        self.result.conflicts.append(f"{path}: {meaning}")
        return yours

    def merge(self, path: str, yours: Any, ours: Any) -> Any:
        """`ours` over `yours` (`_ABSENT` when yours has no such key) at the dotted `path`."""
        rule = _RULES.get(path) or (_left_to_you if path.split(".")[0] in LEFT_TO_YOU else None)
        return self.plain(path, yours, ours) if rule is None else rule(self, path, yours, ours)

    def plain(self, path: str, yours: Any, ours: Any) -> Any:
        """Helm's way, but lists of named entries by name: maps key by key, anything else ours."""
        if isinstance(ours, dict) and (yours is _ABSENT or isinstance(yours, dict)):
            merged: dict[Any, Any] = dict(yours) if isinstance(yours, dict) else {}
            for key, value in ours.items():
                at = f"{path}.{key}" if path else str(key)
                entry = self.merge(at, merged.get(key, _ABSENT), value)
                if entry is _ABSENT:
                    merged.pop(key, None)
                else:
                    merged[key] = entry
            return merged
        if _named(ours) and (yours is _ABSENT or _named(yours)):
            return self.named_list(path, [] if yours is _ABSENT else yours, ours, yours is _ABSENT)
        if yours is _ABSENT:
            self.result.changed.append(f"added {path}: {_show(ours)}")
        elif yours != ours:
            self.result.changed.append(f"changed {path}: yours {_show(yours)}, now {_show(ours)}")
        return ours

    def named_list(self, path: str, yours: list[Any], ours: list[Any], unset: bool) -> list[Any]:
        replaced = {entry["name"]: entry for entry in ours}
        kept = []
        for entry in yours:
            new = replaced.pop(entry["name"], entry)
            if new != entry and path in CONTAINER_LISTS:
                new = self.plugin_container(path, entry, new)
            elif new != entry:
                self.result.changed.append(f"replaced {path}: {entry['name']} (yours differed)")
            kept.append(new)
        added = [entry for entry in ours if entry["name"] in replaced]
        self.result.changed += [f"added {path}: {entry['name']}" for entry in added]
        if unset:
            for name, meaning in CHART_DEFAULT_ENTRIES.get(path, {}).items():
                if name not in {entry["name"] for entry in ours}:
                    self.result.changed.append(f"dropped the chart's default {path} entry {name} (a list in "
                                               f"your values replaces the chart's): {meaning}")  # fmt: skip
        return kept + added


    def plugin_container(self, path: str, yours: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
        """The plugin's container over yours of the same name, your tuning kept (helm_containers.py)."""
        done = merge_container(yours, ours)
        at = f"{path}[{ours['name']}]"
        if done.conflicts and not self.take_ours:
            self.result.conflicts += [f"{at}.{conflict}: the plugin's args changed; add your own to the "
                                      "args in values-gocd.yaml, or pass --take-ours to take the plugin's"
                                      for conflict in done.conflicts]  # fmt: skip
            return yours
        if done.conflicts:
            taken = json.dumps(ours.get("args"))
            self.result.changed.append(f"replaced yours {at}.args (--take-ours): {taken}")
        self.result.kept += [f"kept yours {at}.{what}" for what in done.kept]
        if done.replaced:
            keys = ", ".join(sorted(done.replaced))
            self.result.changed.append(f"replaced {path}: {ours['name']}'s {keys} (yours differed: the "
                                       "plugin's make the container work)")  # fmt: skip
        return done.container


def _left_to_you(merger: _Merger, path: str, yours: Any, ours: Any) -> Any:
    if isinstance(ours, dict):
        mine = yours if isinstance(yours, dict) else {}
        for key, value in ours.items():
            _left_to_you(merger, f"{path}.{key}", mine.get(key, _ABSENT), value)
    elif yours != ours:
        shown = "unset" if yours is _ABSENT else _show(yours)
        merger.keep(path, f"{shown}, not the plugin's {_show(ours)}: the plugin leaves it to you (an older "
                    "copy of values-gocd.yaml set it)")  # fmt: skip
    return yours


def _should_preconfigure(merger: _Merger, path: str, yours: Any, ours: Any) -> Any:
    if yours is not _ABSENT and not yours:
        merger.keep(path, f"{_show(yours)}: the plugin's preconfigure does not run; make its profiles by "
                    "hand (docs/install.md, step 6)")  # fmt: skip
        return yours
    return merger.plain(path, yours, ours)


def _preconfigure_command(merger: _Merger, path: str, yours: Any, ours: Any) -> Any:
    if yours is _ABSENT or yours == ours:
        return merger.plain(path, yours, ours)
    if not merger.preconfigure_on:
        merger.keep(path, "the hook is off (server.shouldPreconfigure false)")
        return yours
    if yours == CHART_PRECONFIGURE or PLUGIN_PRECONFIGURE_MARK in json.dumps(yours):
        what = "the chart's script" if yours == CHART_PRECONFIGURE else "an earlier version of the plugin's"
        merger.result.changed.append(f"replaced {path}: yours was {what}")
        return ours
    return merger.conflict(path, yours, ours, (
        "yours is a postStart command of your own, and the chart runs one: the plugin's, which creates this "
        "plugin's profiles, would replace it. To keep yours, remove server.preconfigureCommand from "
        "values-gocd.yaml and make the profiles by hand (docs/install.md, step 6)"))  # fmt: skip


def rendered_seconds(value: Any) -> int | None:
    """A grace period as the pod gets it: the chart writes `{{ .Values.server.terminationGracePeriodSeconds
    }}` unquoted, under an `if` (gocd/templates/gocd-server-deployment.yaml of chart 2.18.0, lines
    157-159), so `"120"` becomes 120; a false value (`0`, `""`, `null`) leaves the field out and Kubernetes
    gives `KUBERNETES_GRACE_S`. None: not a whole number of seconds, which the API server refuses."""
    if not helm_true(value):
        return KUBERNETES_GRACE_S
    if isinstance(value, (bool, list, dict)):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, int) else None


def _grace_period(merger: _Merger, path: str, yours: Any, ours: Any) -> Any:
    if yours is _ABSENT or yours == ours:
        return merger.plain(path, yours, ours)
    seconds = rendered_seconds(yours)
    if seconds is not None and seconds >= BACKEND_STOP_S:
        shown = _show(yours) if seconds == yours else f"{_show(yours)}, which the chart renders as {seconds}"
        merger.keep(path, f"{shown} (the backend needs {BACKEND_STOP_S} s to stop; the plugin's values give "
                    f"GoCD {ours})")  # fmt: skip
        return yours
    return merger.conflict(path, yours, ours, (
        f"yours is {_show(yours)}: the backend needs {BACKEND_STOP_S} s from SIGTERM to answer the requests "
        "in flight and write every queued pod state; killed sooner, the next server-ping must repair what "
        f"it lost. Set at least {BACKEND_STOP_S} (the plugin's: {ours})"))  # fmt: skip


def _default_container(merger: _Merger, path: str, yours: Any, ours: Any) -> Any:
    if yours is _ABSENT or yours == ours:
        return merger.plain(path, yours, ours)
    merger.keep(path, f"{_show(yours)} (it only says what kubectl logs and exec default to)")
    return yours


_RULES: dict[str, Callable[[_Merger, str, Any, Any], Any]] = {
    "server.shouldPreconfigure": _should_preconfigure,
    "server.preconfigureCommand": _preconfigure_command,
    "server.terminationGracePeriodSeconds": _grace_period,
    "server.annotations.pod.kubectl.kubernetes.io/default-container": _default_container,
}


def chart_fullname(values: dict[str, Any], release: str) -> str:
    """gocd/templates/_helpers.tpl, "gocd.fullname", of chart 2.18.0."""
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])[:63].removesuffix("-")
    name = str(values.get("nameOverride") or "gocd")
    return (release if name in release else f"{release}-{name}")[:63].removesuffix("-")


def service_account(values: dict[str, Any], release: str) -> tuple[str, str]:
    """The GoCD server pod's account (gocd/templates/_helpers.tpl, "gocd.serviceAccountName"), and why."""
    account = values.get("serviceAccount") or {}
    if account.get("name"):
        return str(account["name"]), "your serviceAccount.name"
    if account.get("create", True):
        return chart_fullname(values, release), f"the chart's name for it in release {release}"
    return "default", "serviceAccount.create false and no name: the namespace's default account"


def merge(yours: dict[str, Any], plugin: dict[str, Any], take_ours: bool = False,
          release: str = "gocd") -> Merged:  # fmt: skip
    """`plugin` over `yours` by the rules above; the result says what changed, what was kept, and the
    conflicts (yours kept in `values` unless `take_ours`)."""
    server = yours.get("server")
    preconfigure_on = not isinstance(server, dict) or server.get("shouldPreconfigure", True) is not False
    merger = _Merger(take_ours, preconfigure_on)
    yours, plugin, removed, adapted = place_the_jar(yours, plugin)
    merger.result.values = merger.merge("", yours, plugin)
    merger.result.changed += removed
    merger.result.notes += [adapted] if adapted else []
    account, why = service_account(merger.result.values, release)
    if account != BOUND_ACCOUNT:
        merger.result.notes.append(
            f"the GoCD server pod runs as ServiceAccount {account} ({why}), and {BINDINGS[0]} (the "
            f"backend's Role) and {BINDINGS[1]} (the optional nodes ClusterRole) bind {BOUND_ACCOUNT}: set "
            f"the name of the subject of both to {account}, then `kubectl apply -k docker/kubernetes/rbac` "
            "and, if you use it, `kubectl apply -k docker/kubernetes/rbac-nodes` (docs/install.md, step 2)")
    return merger.result


def load(path: str) -> dict[str, Any]:
    """A values file as a map; `-` is standard input (`helm get values ... | merge-helm-values - ...`)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise ValuesError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValuesError(f"{path}: not valid YAML ({error})") from None
    if values is None:
        return {}  # `helm get values` of a release installed without values prints `null`
    if not isinstance(values, dict):
        raise ValuesError(f"{path}: a values file is a map of keys, this is a {type(values).__name__}")
    return values


class _NoAliases(yaml.SafeDumper):
    """Writes a value shared by several keys (a YAML anchor in the input) out in full at each place, so
    the output reads like a values file a person wrote."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("yours", help="your values file (`-`: standard input, e.g. from `helm get values`)")
    parser.add_argument("plugin", help="this plugin's values (docker/helm/values-gocd.yaml, edited)")
    parser.add_argument(
        "--take-ours", action="store_true", help="where a setting of yours conflicts, take the plugin's"
    )
    parser.add_argument(
        "--release", default="gocd", help="the Helm release's name (default gocd), which names the account"
    )


def run(args: argparse.Namespace) -> int:
    try:
        merged = merge(load(args.yours), load(args.plugin), take_ours=args.take_ours, release=args.release)
    except ValuesError as error:
        print(f"merge-helm-values: {error}", file=sys.stderr)
        return 2
    if merged.conflicts:
        print(f"merge-helm-values: nothing written: {len(merged.conflicts)} setting(s) of yours conflict "
              "with the plugin's values:", file=sys.stderr)  # fmt: skip
        for conflict in merged.conflicts:
            print(f"  {conflict}", file=sys.stderr)
        print("merge-helm-values: change them in your values, or pass --take-ours to take the plugin's",
              file=sys.stderr)  # fmt: skip
        return CONFLICT_STATUS
    for line in [*merged.changed, *merged.kept, *(f"note: {note}" for note in merged.notes)]:
        print(f"merge-helm-values: {line}", file=sys.stderr)
    if not merged.changed:
        print("merge-helm-values: nothing of yours changed: your values have the plugin's already",
              file=sys.stderr)  # fmt: skip
    sys.stdout.write(yaml.dump(merged.values, Dumper=_NoAliases, sort_keys=False, default_flow_style=False))
    return 0
