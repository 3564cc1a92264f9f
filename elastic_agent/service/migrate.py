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
  cannot be read), and one that GoCD would refuse is reported, not sent (migrate_plan.py). Settings this
  plugin does not have are reported and left out.
- Blank settings keep their meaning, which is the official plugin's in both plugins: a blank
  `go_server_url` is GoCD's secure site URL (checked here as GoCD will check it: migrate_checks.py), a
  blank namespace the GoCD server pod's own (migrate_namespaces.py; written out only where this command
  can tell that the two plugins would read it differently). `--namespace` moves the new pods. A new
  profile whose pods would share a namespace with the official plugin's is warned about.
- GoCD lists only the profiles the token's user may see; a list with no cluster profile at all is
  explained (none exist, or the token is not an administrator's), and this plugin must be installed
  and loaded before anything is planned (migrate_checks.py).
- Re-running is safe: a new id that exists already is skipped, also when someone else created it
  between the listing and the create (GoCD's 422 "Failed to add ... Another ... with the same name
  already exists.", HaltApiMessages.entityAlreadyExistsMessage from the create controllers'
  haltIfEntityWithSameIdExists): the profiles are listed again to see whose it is.
- `--dry-run` prints the plan and sends nothing.

Exit status: 0 done, 1 some profiles were not migrated, 2 a usage or connection error, a token that
sees no profile, or this plugin not installed (nothing more was sent after it).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from elastic_agent import PLUGIN_ID
from elastic_agent.gocd.rest_api import (
    ClusterProfileRecord,
    ElasticProfileRecord,
    GoCDApiError,
    GoCDRestClient,
)
from elastic_agent.service.gocd_access import UsageError, add_server_arguments, read_token, server_url
from elastic_agent.service.migrate_checks import BlankServerUrl, GoCDChecks
from elastic_agent.service.migrate_namespaces import BlankNamespace, blank_namespace, namespace_option
from elastic_agent.service.migrate_plan import (
    CLUSTER,
    ELASTIC,
    ID_CHARACTERS,
    OFFICIAL_PLUGIN_ID,
    Planned,
    needs_server_url,
    plan_migration,
)

DEFAULT_SUFFIX = "-reuse"
# HaltApiMessages.entityAlreadyExistsMessage, as the create controllers answer an id already taken.
ALREADY_EXISTS = re.compile(r"Failed to add .* Another .* with the same name already exists")
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
EPILOG = (
    "Exit status: 0 done, 1 some profiles were not migrated, 2 a usage or connection error, a token that "
    "sees no profile, or this plugin not installed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (kept with the command; cli.py only wires it in)."""
    add_server_arguments(
        parser,
        "file holding a personal access token of a GoCD system administrator; leave it out for a GoCD "
        "with security off, which refuses any token",
        token_required=False,
    )
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
        "cluster profile means (default: this pod's service account namespace, when run inside a pod). "
        "A blank namespace is carried over blank, unless this differs from the namespace of the pod the "
        "command runs in (the backend's)",
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
        token = read_token(args.token_file) if args.token_file is not None else None
    except UsageError as error:
        print(f"error: {error}", file=err)
        return 2
    if server.lower().startswith("http://") and token is not None:
        print("warning: --server is http://, so the token travels unencrypted; prefer https://", file=err)
    client = GoCDRestClient(server, token)
    return migrate(
        client,
        dry_run=args.dry_run,
        reuse=args.reuse,
        suffix=suffix,
        blank=blank_namespace(server_namespace, SERVICE_ACCOUNT_NAMESPACE),
        namespace=namespace,
        out=out,
        err=err,
    )


# --- the options -------------------------------------------------------------------------------------


def _suffix(text: str) -> str:
    if not ID_CHARACTERS.fullmatch(text):
        raise UsageError(
            "--suffix must be letters, digits, '_', '-' or '.' (GoCD's rule for profile ids), "
            f"and not empty; the default is {DEFAULT_SUFFIX}"
        )
    return text


# --- carrying it out ---------------------------------------------------------------------------------


@dataclass
class _Tally:
    created: int = 0
    skipped: int = 0
    failed: int = 0


class _Stop(Exception):
    """GoCD refused in a way every further call would repeat (no answer, token, URL)."""


def migrate(
    client: GoCDRestClient,
    *,
    dry_run: bool,
    reuse: bool,
    suffix: str = DEFAULT_SUFFIX,
    blank: BlankNamespace | None = None,
    namespace: str | None = None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Read, check, plan, create (unless `dry_run`), and report every profile; the exit status."""
    checks = GoCDChecks(client)
    try:
        clusters = client.list_cluster_profiles()
        elastics = client.list_elastic_profiles()
        if not clusters:
            answer = checks.no_profiles()
            if answer.status == 0:
                print(answer.text, file=out)
            else:
                print(f"error: {answer.text}", file=err)
            return answer.status
        if not any(c.plugin_id == OFFICIAL_PLUGIN_ID for c in clusters):
            print(
                f"GoCD at {client.shown_url} has no cluster profiles of the official plugin "
                f"({OFFICIAL_PLUGIN_ID}): nothing to migrate.",
                file=out,
            )
            return 0
        problem = checks.plugin_problem()
        if problem is not None:
            print(f"error: {problem}. Nothing was sent.", file=err)
            return 2
        server_url = checks.blank_server_url() if needs_server_url(clusters) else BlankServerUrl()
    except GoCDApiError as error:
        print(f"error: {error}", file=err)
        return 2
    plan = plan_migration(
        clusters,
        elastics,
        suffix=suffix,
        reuse=reuse,
        blank=blank,
        namespace=namespace,
        server_url=server_url,
    )
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
    for setting, note in planned.notes if not planned.exists else ():
        print(f"{indent}    {setting}: {note}", file=out)
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
        if error.status == 422 and error.said is not None and ALREADY_EXISTS.search(error.said):
            return _created_meanwhile(client, planned, tally)
        tally.failed += 1
        return f"failed: {error}", False
    tally.created += 1
    return "created.", True


def _created_meanwhile(client: GoCDRestClient, planned: Planned, tally: _Tally) -> tuple[str, bool]:
    """GoCD says the new id was taken since the profiles were listed: skipped when the profile there is
    this plugin's (someone else ran the migration too), not migrated when it is another plugin's."""
    try:
        clusters = {c.id: c.plugin_id for c in client.list_cluster_profiles()}
        if isinstance(planned.record, ElasticProfileRecord):
            found = {e.id: e.cluster_profile_id for e in client.list_elastic_profiles()}
            owner = clusters.get(found.get(planned.new_id, ""))
        else:
            owner = clusters.get(planned.new_id)
    except GoCDApiError as error:
        if error.affects_every_call:
            raise _Stop(str(error)) from None
        owner = None
    if owner == PLUGIN_ID:
        tally.skipped += 1
        return "created by someone else meanwhile (GoCD says it exists already), skipped.", True
    tally.failed += 1
    whose = f"of another plugin ({owner})" if owner else "that could not be read back"
    return (
        f"not migrated: {planned.kind} '{planned.new_id}' {whose} was created meanwhile (GoCD says it "
        "exists already): choose another --suffix.",
        False,
    )


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
