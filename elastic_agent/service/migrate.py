"""`python -m elastic_agent migrate-profiles`: moving over from the official Kubernetes plugin.

Users of `cd.go.contrib.elasticagent.kubernetes` have cluster and elastic agent profiles whose keys this
plugin reads the same way (profiles/fields.py). This command reads them through GoCD's REST API and creates
a copy of each for this plugin, under a new id (`<old id>-reuse` by default); an elastic profile's copy
points to its cluster profile's copy. The old profiles are never changed, so jobs keep running on the
official plugin until their elastic profile ids are switched to the new ones.

- Secrets stay encrypted: GoCD lists secure settings as `encrypted_value` and takes them back as they are,
  so they are never decrypted here, and never printed or logged (the plan says "(secret kept)").
- `Reuse` stays off (this plugin's default: one pod per job, as before) unless `--reuse` sets
  `Reuse=true` on every migrated elastic profile.
- Each new profile is checked with this plugin's own validation first (plain values only: encrypted ones
  cannot be read), and one that GoCD would refuse is reported, not sent. Settings this plugin does not have
  are reported and left out.
- Namespaces keep their meaning (migrate_namespaces.py). The official plugin reads a blank namespace as
  the GoCD server pod's own; this plugin reads it as `default`. So every new cluster profile gets its
  namespace written out: the old one, the GoCD server's for a blank one (`--server-namespace`, else this
  pod's service account), or `--namespace`. A blank one that cannot be resolved is reported, not
  migrated. A new profile whose pods would share a namespace with the official plugin's is warned about.
- Re-running is safe: a new id that exists already is skipped.
- `--dry-run` prints the plan and sends nothing.

Exit status: 0 done, 1 some profiles were not migrated, 2 a usage or connection error (nothing more was
sent after it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from elastic_agent import PLUGIN_ID
from elastic_agent.gocd.rest_api import (
    ClusterProfileRecord,
    ElasticProfileRecord,
    GoCDApiError,
    GoCDRestClient,
    Property,
)
from elastic_agent.service.gocd_access import UsageError, add_server_arguments, read_token, server_url
from elastic_agent.service.migrate_namespaces import (
    OfficialBlank,
    choose_namespace,
    namespace_option,
    official_blank,
    old_namespace,
    shared_warning,
)
from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS, Field
from profiles.validation import validate_cluster_profile, validate_elastic_profile

OFFICIAL_PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes"
DEFAULT_SUFFIX = "-reuse"
# GoCD's rule for profile ids (NameTypeValidator): letters, digits, _ - and ., at most 255 characters.
_SUFFIX = re.compile(r"[A-Za-z0-9_\-.]+")
_MAX_ID_LENGTH = 255
# Where Kubernetes puts the namespace of a pod's service account, and where fabric8's
# `Config.autoConfigure` (`tryNamespaceFromPath`) reads the official plugin's default namespace from.
# Read at call time, so that tests can point it elsewhere.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


DESCRIPTION = (
    "Read the cluster and elastic agent profiles of the official Kubernetes plugin "
    f"({OFFICIAL_PLUGIN_ID}) through GoCD's REST API and create the same profiles for this plugin "
    f"({PLUGIN_ID}), under new ids; the old profiles are not changed. Secrets are copied encrypted and "
    "never shown."
)
EPILOG = "Exit status: 0 done, 1 some profiles were not migrated, 2 a usage or connection error."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (kept with the command; cli.py only wires it in)."""
    add_server_arguments(parser, "file holding a personal access token of a GoCD system administrator")
    parser.add_argument("--dry-run", action="store_true", help="print what would be created; send nothing")
    parser.add_argument(
        "--reuse", action="store_true", help="set Reuse=true on every migrated elastic profile"
    )
    parser.add_argument(
        "--suffix",
        default=DEFAULT_SUFFIX,
        metavar="S",
        help=f"appended to each old id to make the new one (default {DEFAULT_SUFFIX}; write --suffix=-x "
        "for one that starts with '-')",
    )
    parser.add_argument(
        "--server-namespace",
        metavar="NS",
        help="the namespace the GoCD server pod runs in: what a blank namespace in the official plugin's "
        "cluster profile means (default: this pod's service account namespace, when run inside a pod)",
    )
    parser.add_argument(
        "--namespace",
        metavar="NS",
        help="put the new profiles' pods in this namespace instead of the old profiles' one",
    )


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The command: check the options, read the token, migrate."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        server = server_url(args.server)
        suffix = _suffix(args.suffix)
        server_namespace = namespace_option("--server-namespace", args.server_namespace)
        namespace = namespace_option("--namespace", args.namespace)
        token = read_token(args.token_file)
    except UsageError as error:
        print(f"error: {error}", file=err)
        return 2
    if server.lower().startswith("http://"):
        print("warning: --server is http://, so the token travels unencrypted; prefer https://", file=err)
    client = GoCDRestClient(server, token)
    return migrate(
        client,
        dry_run=args.dry_run,
        reuse=args.reuse,
        suffix=suffix,
        official_blank=official_blank(server_namespace, SERVICE_ACCOUNT_NAMESPACE),
        namespace=namespace,
        out=out,
        err=err,
    )


# --- the options -------------------------------------------------------------------------------------


def _suffix(text: str) -> str:
    if not _SUFFIX.fullmatch(text):
        raise UsageError(
            "--suffix must be letters, digits, '_', '-' or '.' (GoCD's rule for profile ids), "
            f"and not empty; the default is {DEFAULT_SUFFIX}"
        )
    return text


# --- the plan ----------------------------------------------------------------------------------------

CLUSTER = "cluster profile"
ELASTIC = "elastic profile"


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
    namespace_note: str = ""  # a cluster profile's: where that namespace comes from
    warnings: list[str] = field(default_factory=list)  # shown, but the profile is migrated


@dataclass
class _Tally:
    created: int = 0
    skipped: int = 0
    failed: int = 0


def plan_migration(
    clusters: Sequence[ClusterProfileRecord],
    elastics: Sequence[ElasticProfileRecord],
    *,
    suffix: str,
    reuse: bool,
    official_blank: OfficialBlank | None = None,
    namespace: str | None = None,
) -> list[Planned]:
    """The official plugin's cluster profiles, each with its elastic profiles, as this plugin's.

    `official_blank` is what a blank namespace of the official plugin stands for (unknown when None);
    `namespace`, when given, is where every new profile's pods go instead."""
    blank = official_blank or OfficialBlank(None, unknown_because="the GoCD server's namespace was not given")
    cluster_by_id = {c.id: c for c in clusters}
    elastic_by_id = {e.id: e for e in elastics}
    official = [c for c in clusters if c.plugin_id == OFFICIAL_PLUGIN_ID]
    old_namespaces = {c.id: old_namespace(c, blank) for c in official}
    plan = []
    for old in official:
        planned = _plan_cluster(old, cluster_by_id, suffix, old_namespaces[old.id], blank, namespace)
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


def _plan_cluster(
    old: ClusterProfileRecord,
    cluster_by_id: dict[str, ClusterProfileRecord],
    suffix: str,
    old_namespace: str | None,
    blank: OfficialBlank,
    namespace: str | None,
) -> Planned:
    planned = Planned(CLUSTER, old.id, old.id + suffix)
    choice = choose_namespace(old, old_namespace, blank, namespace)
    planned.namespace, planned.namespace_note = choice.namespace, choice.note
    planned.problems += [choice.problem] if choice.problem else []
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
            # GoCD keeps encrypted_value only for keys the plugin declares secure; it would drop this one.
            planned.problems.append(
                f"setting {prop.key} is encrypted in GoCD, but this plugin keeps it in plain text, so GoCD "
                "would drop it: copy this profile by hand"
            )
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
    if len(planned.new_id) > _MAX_ID_LENGTH:
        planned.problems.append(
            f"the new id would be longer than GoCD's {_MAX_ID_LENGTH} characters: choose a shorter --suffix"
        )


# --- carrying it out ---------------------------------------------------------------------------------


class _Stop(Exception):
    """GoCD refused in a way every further call would repeat (no answer, token, URL)."""


def migrate(
    client: GoCDRestClient,
    *,
    dry_run: bool,
    reuse: bool,
    suffix: str = DEFAULT_SUFFIX,
    official_blank: OfficialBlank | None = None,
    namespace: str | None = None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Read, plan, create (unless `dry_run`), and report every profile; the exit status."""
    try:
        clusters = client.list_cluster_profiles()
        elastics = client.list_elastic_profiles()
    except GoCDApiError as error:
        print(f"error: {error}", file=err)
        return 2
    plan = plan_migration(
        clusters, elastics, suffix=suffix, reuse=reuse, official_blank=official_blank, namespace=namespace
    )
    if not plan:
        print(
            f"GoCD at {client.shown_url} has no cluster profiles of the official plugin "
            f"({OFFICIAL_PLUGIN_ID}): nothing to migrate.",
            file=out,
        )
        return 0
    n_elastic = sum(len(p.elastic) for p in plan)
    print(
        f"GoCD at {client.shown_url}: {_count(len(plan), CLUSTER)} and {_count(n_elastic, ELASTIC)} of "
        f"the official plugin ({OFFICIAL_PLUGIN_ID}), to copy for {PLUGIN_ID}."
        + (" Dry run: nothing is sent to GoCD." if dry_run else ""),
        file=out,
    )
    tally = _Tally()
    try:
        for cluster in plan:
            cluster_ready = _carry_out(client, cluster, None, dry_run, tally, out)
            for elastic in cluster.elastic:
                _carry_out(client, elastic, cluster if not cluster_ready else None, dry_run, tally, out)
    except _Stop as stop:
        print(f"error: {stop}", file=err)
        print(_summary(tally, dry_run, stopped=True), file=out)
        return 2
    print(_summary(tally, dry_run, stopped=False), file=out)
    return 1 if tally.failed else 0


def _carry_out(
    client: GoCDRestClient,
    planned: Planned,
    missing_cluster: Planned | None,
    dry_run: bool,
    tally: _Tally,
    out: TextIO,
) -> bool:
    """Create one profile (or say why not); True when the new profile exists (or would, in a dry run)."""
    indent, target = "", ""
    if isinstance(planned.record, ElasticProfileRecord):
        indent, target = "  ", f" on cluster profile '{planned.record.cluster_profile_id}'"
    head = f"{indent}{planned.kind} '{planned.old_id}' -> '{planned.new_id}'{target}"
    reasons = list(planned.problems)
    if missing_cluster is not None:
        reasons.insert(0, f"its cluster profile '{missing_cluster.new_id}' was not migrated")
    if reasons:
        status, ready = _sentence("not migrated: " + "; ".join(reasons)), False
        tally.failed += 1
    elif planned.exists:
        status, ready = "exists already, skipped.", True
        tally.skipped += 1
    elif dry_run:
        status, ready = "would be created.", True
        tally.created += 1
    else:
        status, ready = _create(client, planned, tally)
    print(f"{head}: {status}", file=out)
    if planned.shown_keys and not planned.exists:
        print(f"{indent}    settings: {', '.join(planned.shown_keys)}", file=out)
    if planned.namespace_note and not planned.exists:
        print(f"{indent}    namespace: {planned.namespace_note}", file=out)
    for note in planned.left_out:
        print(f"{indent}    left out: {note}", file=out)
    for warning in planned.warnings if not reasons and not planned.exists else ():
        print(f"{indent}    warning: {_sentence(warning)}", file=out)
    return ready


def _create(client: GoCDRestClient, planned: Planned, tally: _Tally) -> tuple[str, bool]:
    try:
        if isinstance(planned.record, ClusterProfileRecord):
            client.create_cluster_profile(planned.record)
        elif isinstance(planned.record, ElasticProfileRecord):
            client.create_elastic_profile(planned.record)
    except GoCDApiError as error:
        if error.affects_every_call:
            raise _Stop(str(error)) from None
        tally.failed += 1
        return f"failed: {error}", False
    tally.created += 1
    return "created.", True


def _summary(tally: _Tally, dry_run: bool, *, stopped: bool) -> str:
    created = f"{'would create' if dry_run else 'created'} {_count(tally.created, 'profile')}"
    parts = [created, f"{tally.skipped} skipped (they exist already)", f"{tally.failed} not migrated"]
    text = "Summary: " + "; ".join(parts) + "."
    if stopped:
        text += " Stopped at the error above; nothing more was sent."
    if dry_run:
        text += " Dry run: nothing was sent to GoCD."
    else:
        text += " The official plugin's profiles were not changed."
        if tally.created:
            text += " Jobs use the new profiles once their elastic profile ids are switched to the new ones."
    return text


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
