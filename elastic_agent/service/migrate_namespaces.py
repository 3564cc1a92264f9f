"""What a namespace of the official plugin's cluster profile means, and where the migrated profile's
pods go (migrate.py).

The official plugin and this one read the same key differently when it is blank: the official plugin
takes the GoCD server's own namespace (`OfficialBlank`), this one `default`. So the namespace of each new
cluster profile is chosen here and written out, and a namespace the official plugin uses too is named.
Pure: the command reads the options and the pod's service-account file and passes them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic_agent.gocd.rest_api import ClusterProfileRecord, Property
from elastic_agent.service.gocd_access import UsageError
from profiles.values import dns_label

NAMESPACE_KEY = "namespace"


def namespace_option(option: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return dns_label(text)
    except ValueError as error:
        raise UsageError(f"{option}: {error}") from None


@dataclass(frozen=True)
class OfficialBlank:
    """What a blank namespace in the official plugin's cluster profile stands for.

    The official plugin (gocd/kubernetes-elastic-agents, `KubernetesClientFactory.createClientFor`) starts
    from fabric8's `Config.autoConfigure(null)` and sets the namespace only when the profile's is not
    blank (`PluginSettings.getNamespace` gives null for a blank one). Inside the GoCD server's pod,
    autoConfigure takes the namespace of the pod's service account: the GoCD server's own namespace.
    This plugin would read the same blank as `default`, so the name is found out here and written in.
    """

    name: str | None  # None: not known here
    source: str = ""  # where the name comes from, as the plan says it
    unknown_because: str = ""  # why it is not known, when it is not

    def meaning(self) -> str:
        text = "blank in the old profile, which the official plugin reads as the GoCD server's namespace"
        return f"{text}: {self.name} ({self.source})" if self.name else text


def official_blank(server_namespace: str | None, namespace_file: Path) -> OfficialBlank:
    """`--server-namespace` when given. Else, inside a pod, its service account's namespace: the GoCD
    server's when the command runs in the GoCD server's pod (the backend's sidecar shares its service
    account), as the install guide runs it. Anywhere else the name cannot be known: outside a pod,
    fabric8 would fall back to the GoCD server's environment or kubeconfig, which are not this one's."""
    if server_namespace is not None:
        return OfficialBlank(server_namespace, "from --server-namespace")
    try:
        text = namespace_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return OfficialBlank(
            None, unknown_because=f"this command is not running inside a pod (no {namespace_file})"
        )
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        return OfficialBlank(None, unknown_because=f"this pod's {namespace_file} cannot be read: {reason}")
    try:
        name = dns_label(text)
    except ValueError:
        return OfficialBlank(None, unknown_because=f"this pod's {namespace_file} holds no namespace name")
    return OfficialBlank(name, f"from this pod's service account, {namespace_file}")


def _namespace_setting(old: ClusterProfileRecord) -> Property | None:
    return next((p for p in old.properties if p.key == NAMESPACE_KEY), None)


def _is_blank(setting: Property | None) -> bool:
    """Blank as the official plugin's `PluginSettings.getOrDefault` has it: absent, empty or spaces."""
    return setting is None or (not setting.encrypted and not (setting.value or "").strip())


def old_namespace(old: ClusterProfileRecord, blank: OfficialBlank) -> str | None:
    """The namespace the official plugin really puts this profile's pods in; None when not known here."""
    setting = _namespace_setting(old)
    if _is_blank(setting):
        return blank.name
    if setting is None or setting.encrypted or setting.value is None:
        return None  # an encrypted namespace cannot be read (and is reported by _carry_over)
    return setting.value.strip()


@dataclass(frozen=True)
class NamespaceChoice:
    """The namespace a new cluster profile says, and the settings that say it."""

    properties: tuple[Property, ...]  # the old settings, with the namespace written out when it must be
    namespace: str | None = None  # where the new profile's pods go; None when not known
    note: str = ""  # where that namespace comes from, as the plan says it
    problem: str | None = None  # why the profile cannot be migrated as it is


def choose_namespace(
    old: ClusterProfileRecord, old_namespace: str | None, blank: OfficialBlank, namespace: str | None
) -> NamespaceChoice:
    """The namespace the new profile must say: the old profile's pods' one, or `--namespace`. It is
    written out whenever the old one was blank, since a blank means `default` to this plugin and the GoCD
    server's namespace to the official one."""
    setting = _namespace_setting(old)
    was_blank = _is_blank(setting)
    if namespace is not None:
        if not was_blank:
            before = (
                f"{old_namespace} in the old profile" if old_namespace else "encrypted in the old profile"
            )
        elif blank.name:
            before = blank.meaning()
        else:
            unknown = "not known here (give --server-namespace to check that the new pods do not share it)"
            before = f"{blank.meaning()}, {unknown}"
        chosen, note = namespace, f"{namespace} (from --namespace); {before}"
    elif was_blank:
        if blank.name is None:
            problem = (
                "its namespace is blank, which the official plugin reads as the GoCD server's own namespace "
                "(this plugin would read it as 'default'), and that is not known here: "
                f"{blank.unknown_because}; give --server-namespace NS, the namespace the GoCD server runs in "
                "(or --namespace NS)"
            )
            return NamespaceChoice(old.properties, problem=problem)
        chosen, note = blank.name, f"{blank.meaning()}; written out in the new profile"
    else:
        note = f"{old_namespace}, as in the old profile" if old_namespace is not None else ""
        return NamespaceChoice(old.properties, old_namespace, note)
    written = Property(NAMESPACE_KEY, chosen)
    if setting is None:
        return NamespaceChoice((*old.properties, written), chosen, note)
    replaced = tuple(written if p.key == NAMESPACE_KEY else p for p in old.properties)
    return NamespaceChoice(replaced, chosen, note)


def shared_warning(
    namespace: str,
    old: ClusterProfileRecord,
    official: Sequence[ClusterProfileRecord],
    old_namespaces: dict[str, str | None],
) -> str | None:
    """A warning when the new profile's pods would go where one of the official plugin's profiles puts
    its pods. Profiles naming two different Kubernetes API URLs are on two clusters and share nothing; a
    blank URL may be either, so it counts as the same."""
    url = _cluster_url(old)
    sharing = [
        other.id
        for other in official
        if old_namespaces[other.id] == namespace
        and (not url or not _cluster_url(other) or _cluster_url(other) == url)
    ]
    if not sharing:
        return None
    names = ", ".join(f"'{s}'" for s in sharing)
    whose = f"profile {names} puts its" if len(sharing) == 1 else f"profiles {names} put their"
    return (
        f"namespace {namespace} is also where the official plugin's cluster {whose} pods: both "
        "plugins' pods share that namespace, its resource quotas and its RBAC (Roles, RoleBindings); give "
        "--namespace NS to put the new profiles' pods in another one"
    )


def _cluster_url(profile: ClusterProfileRecord) -> str:
    setting = next((p for p in profile.properties if p.key == "kubernetes_cluster_url"), None)
    return (setting.value or "").strip().rstrip("/") if setting is not None else ""
