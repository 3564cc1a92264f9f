"""The plan of `migrate-profiles` (migrate.py): for each cluster profile of the official plugin, the
profile this plugin gets, with its elastic profiles, and whatever stops one from being sent.

Pure: what GoCD listed and what the command found out (namespaces: migrate_namespaces.py; what a blank
go_server_url stands for: migrate_checks.py) go in, the plan comes out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.gocd.rest_api import ClusterProfileRecord, ElasticProfileRecord, Property
from elastic_agent.service.migrate_checks import BlankServerUrl
from elastic_agent.service.migrate_namespaces import (
    BlankNamespace,
    choose_namespace,
    old_namespace,
    shared_warning,
)
from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS, Field
from profiles.validation import validate_cluster_profile, validate_elastic_profile

OFFICIAL_PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes"
# GoCD's rule for profile ids (NameTypeValidator): letters, digits, _ - and ., at most 255 characters.
ID_CHARACTERS = re.compile(r"[A-Za-z0-9_\-.]+")
MAX_ID_LENGTH = 255
CLUSTER = "cluster profile"
ELASTIC = "elastic profile"
SERVER_URL_KEY = "go_server_url"


@dataclass
class Planned:
    """One profile to create: what is sent, what is shown, and why it might not be sent."""

    kind: str
    old_id: str
    new_id: str
    record: ClusterProfileRecord | ElasticProfileRecord | None = None
    shown_keys: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # any: not sent, the profile is not migrated
    exists: bool = False  # the new id is this plugin's already: skipped
    elastic: list[Planned] = field(default_factory=list)  # a cluster profile's elastic profiles
    namespace: str | None = None  # a cluster profile's: where the new profile's pods go, once known
    notes: list[tuple[str, str]] = field(default_factory=list)  # (setting, where its meaning comes from)
    warnings: list[str] = field(default_factory=list)  # shown, but the profile is migrated


def plan_migration(
    clusters: Sequence[ClusterProfileRecord],
    elastics: Sequence[ElasticProfileRecord],
    *,
    suffix: str,
    reuse: bool,
    blank: BlankNamespace | None = None,
    namespace: str | None = None,
    server_url: BlankServerUrl | None = None,
) -> list[Planned]:
    """The official plugin's cluster profiles, each with its elastic profiles, as this plugin's.

    `blank` is what a blank namespace stands for (unknown when None); `namespace`, when given, is where
    every new profile's pods go instead; `server_url` what a blank go_server_url stands for on this
    GoCD (unknown when None)."""
    blank = blank or BlankNamespace(None, unknown_because="the GoCD server's namespace was not given")
    server_url = server_url or BlankServerUrl(unknown_because="GoCD was not asked")
    cluster_by_id = {c.id: c for c in clusters}
    elastic_by_id = {e.id: e for e in elastics}
    official = [c for c in clusters if c.plugin_id == OFFICIAL_PLUGIN_ID]
    old_namespaces = {c.id: old_namespace(c, blank) for c in official}
    plan = []
    for old in official:
        planned = _plan_cluster(old, cluster_by_id, suffix, old_namespaces[old.id], blank, namespace)
        _blank_server_url(planned, old, server_url)
        if planned.namespace is not None and not planned.problems:
            warning = shared_warning(planned.namespace, old, official, old_namespaces)
            planned.warnings += [warning] if warning else []
        for old_elastic in elastics:
            if old_elastic.cluster_profile_id == old.id:
                planned.elastic.append(
                    _plan_elastic(old_elastic, planned, cluster_by_id, elastic_by_id, suffix, reuse)
                )
        plan.append(planned)
    return plan


def needs_server_url(clusters: Sequence[ClusterProfileRecord]) -> bool:
    """Whether some cluster profile of the official plugin leaves go_server_url blank."""
    return any(c.plugin_id == OFFICIAL_PLUGIN_ID and _blank_url(c) for c in clusters)


def _blank_url(profile: ClusterProfileRecord) -> bool:
    setting = next((p for p in profile.properties if p.key == SERVER_URL_KEY), None)
    return setting is None or (not setting.encrypted and not (setting.value or "").strip())


def _blank_server_url(planned: Planned, old: ClusterProfileRecord, server_url: BlankServerUrl) -> None:
    """A blank go_server_url is carried over blank: it stands for GoCD's secure site URL in both plugins.
    The new profile is not sent when that URL is one this plugin's validation refuses (GoCD would answer
    422 with the same sentence)."""
    if not _blank_url(old):
        return
    meaning = "blank, as in the old profile: GoCD's secure site URL, to both plugins"
    if server_url.problem is not None:
        planned.problems.append(server_url.problem)
    elif server_url.url is not None:
        planned.notes.append((SERVER_URL_KEY, f"{meaning}, here {server_url.url}"))
    else:
        planned.notes.append((SERVER_URL_KEY, meaning))
        planned.warnings.append(
            f"go_server_url is blank, and GoCD's secure site URL, which it stands for, could not be "
            f"checked ({server_url.unknown_because.rstrip('.')}); GoCD refuses the new profile if it has "
            "none, or one that does not end in /go"
        )


def _plan_cluster(
    old: ClusterProfileRecord,
    cluster_by_id: dict[str, ClusterProfileRecord],
    suffix: str,
    old_namespace: str | None,
    blank: BlankNamespace,
    namespace: str | None,
) -> Planned:
    planned = Planned(CLUSTER, old.id, old.id + suffix)
    choice = choose_namespace(old, old_namespace, blank, namespace)
    planned.namespace = choice.namespace
    planned.notes += [("namespace", choice.note)] if choice.note else []
    properties = _carry_over(planned, CLUSTER_FIELDS, choice.properties, validate_cluster_profile)
    _check_new_id(planned)
    existing = cluster_by_id.get(planned.new_id)
    if existing is not None:
        if existing.plugin_id == PLUGIN_ID:
            planned.exists = True
        else:
            planned.problems.append(
                f"a cluster profile '{planned.new_id}' of another plugin ({existing.plugin_id}) exists "
                "already: choose another --suffix"
            )
    planned.record = ClusterProfileRecord(planned.new_id, PLUGIN_ID, properties)
    return planned


def _plan_elastic(
    old: ElasticProfileRecord,
    cluster: Planned,
    cluster_by_id: dict[str, ClusterProfileRecord],
    elastic_by_id: dict[str, ElasticProfileRecord],
    suffix: str,
    reuse: bool,
) -> Planned:
    planned = Planned(ELASTIC, old.id, old.id + suffix)
    source = old.properties
    if reuse:
        source = (*(p for p in source if p.key != "Reuse"), Property("Reuse", "true"))
    properties = _carry_over(planned, ELASTIC_FIELDS, source, validate_elastic_profile)
    if reuse:
        planned.shown_keys = ["Reuse=true (--reuse)" if k == "Reuse" else k for k in planned.shown_keys]
    _check_new_id(planned)
    existing = elastic_by_id.get(planned.new_id)
    if existing is not None:
        owner = cluster_by_id.get(existing.cluster_profile_id)
        if owner is not None and owner.plugin_id == PLUGIN_ID:
            planned.exists = True
        else:
            planned.problems.append(
                f"an elastic profile '{planned.new_id}' of another plugin exists already (on cluster "
                f"profile '{existing.cluster_profile_id}'): choose another --suffix"
            )
    planned.record = ElasticProfileRecord(planned.new_id, cluster.new_id, properties)
    return planned


def _encrypted_plain(planned: Planned, key: str) -> str:
    """What GoCD does with `encrypted_value` for a key the plugin does not declare secure (gocd/gocd):
    a cluster profile's settings go through ConfigurationPropertyBuilder.create, which marks it
    ("encrypted_value cannot be specified to a unsecured property."), and the create fails with 422;
    an elastic profile's are taken as they come (ElasticProfile.addConfigurations), and before saving
    ElasticProfile.encryptSecureConfigurations drops the encrypted value of every key that is not secure
    (ConfigurationProperty.handleSecureValueConfiguration(false)): the create succeeds, the setting is
    saved blank."""
    head = f"setting {key} is encrypted in GoCD, but this plugin keeps it in plain text (it is not secure)"
    if planned.kind == CLUSTER:
        fate = (
            "and GoCD refuses an encrypted value for such a setting of a cluster profile (422: "
            '"encrypted_value cannot be specified to a unsecured property.")'
        )
    else:
        fate = "and GoCD would save such a setting of an elastic profile blank, dropping its encrypted value"
    return f"{head}, {fate}: copy this profile by hand"


def _carry_over(
    planned: Planned,
    fields: tuple[Field, ...],
    source: Sequence[Property],
    validate: Callable[[Any], list[dict[str, str]]],
) -> tuple[Property, ...]:
    """The settings this plugin has, copied as GoCD listed them (encrypted ones as cipher text), checked
    with this plugin's validation on their plain values; the others reported and left out."""
    by_key = {f.key: f for f in fields}
    kept: list[Property] = []
    plain: dict[str, str] = {}
    for prop in source:
        known = by_key.get(prop.key)
        if known is None:
            planned.left_out.append(f"setting {prop.key} is not one of this plugin's, so it is left out.")
            continue
        if prop.encrypted and not known.secure:
            planned.problems.append(_encrypted_plain(planned, prop.key))
            continue
        kept.append(prop)
        secret = known.secure or prop.encrypted
        if not secret:
            planned.shown_keys.append(prop.key)  # keys only: plain values may be private too (Environment)
        elif prop.encrypted or prop.value:
            planned.shown_keys.append(f"{prop.key} (secret kept)")
        else:
            planned.shown_keys.append(f"{prop.key} (blank)")
        if not secret and prop.value is not None:
            plain[prop.key] = prop.value
    for problem in validate(plain):
        where = f"setting {problem['key']}" if problem["key"] else "the settings"
        planned.problems.append(f"{where}: {problem['message']}")
    return tuple(kept)


def _check_new_id(planned: Planned) -> None:
    if len(planned.new_id) > MAX_ID_LENGTH:
        planned.problems.append(
            f"the new id would be longer than GoCD's {MAX_ID_LENGTH} characters: choose a shorter --suffix"
        )
