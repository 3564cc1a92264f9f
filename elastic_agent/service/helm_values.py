"""`merge-helm-values`: the values an administrator already gives the GoCD chart, with this plugin's
values (docker/helm/values-gocd.yaml) merged in, as one file for `helm upgrade -f`.

Why a command and not a second `-f`: Helm merges values files map by map, but a list in a later file
replaces the earlier file's list whole. The plugin's values set five lists of the chart
(`server.initContainers`, `server.sidecarContainers`, `server.env.extraEnvVars`,
`server.persistence.extraVolumes`, `server.persistence.extraVolumeMounts`), so `-f yours.yaml -f
values-gocd.yaml` silently drops your own init containers, sidecars, environment variables and volumes.
Here lists whose entries all have a `name` (all five are such lists) are merged by name: an entry of the
plugin's values replaces the entry of yours with the same name, and the rest of yours stay, in their
order, before the plugin's new ones. So running it again on its own output changes nothing. Every other
list, and every scalar, is the plugin's where it sets one (as Helm does); maps merge key by key.

Written by hand over PyYAML (already a dependency): the tools that merge YAML (yq's `*+`) append lists,
which duplicates entries on a second run and cannot replace an outdated entry of the plugin's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

HELP = "merge your values for the GoCD Helm chart with this plugin's (lists of named entries by name)"
DESCRIPTION = __doc__.split("\n\n")[0] if __doc__ else HELP


class ValuesError(Exception):
    """A values file that cannot be merged: the message says which and why."""


def merge(yours: Any, plugin: Any) -> Any:
    """`plugin` over `yours`: maps key by key, lists of named maps by name, anything else the plugin's."""
    if isinstance(yours, dict) and isinstance(plugin, dict):
        merged = dict(yours)
        for key, value in plugin.items():
            merged[key] = merge(yours[key], value) if key in yours else value
        return merged
    if _named(yours) and _named(plugin):
        replaced = {entry["name"]: entry for entry in plugin}
        kept = [replaced.pop(entry["name"], entry) for entry in yours]
        return kept + [entry for entry in plugin if entry["name"] in replaced]
    return plugin


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(entry, dict) and "name" in entry for entry in value)


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
    parser.add_argument("yours", help="your values file (`-`: standard input, e.g. from `helm get values`)")
    parser.add_argument("plugin", help="this plugin's values (docker/helm/values-gocd.yaml, edited)")


def run(args: argparse.Namespace) -> int:
    try:
        merged = merge(load(args.yours), load(args.plugin))
    except ValuesError as error:
        print(f"merge-helm-values: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.dump(merged, Dumper=_NoAliases, sort_keys=False, default_flow_style=False))
    return 0
