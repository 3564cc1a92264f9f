"""What a namespace of the official plugin's cluster profile means, and where the migrated profile's
pods go (migrate_plan.py).

Both plugins read a blank namespace the same way: the namespace fabric8's `Config.autoConfigure` finds
where the plugin runs (elastic_agent/kube/namespace.py), which is the GoCD server pod's own when this
plugin's backend runs in that pod, as docs/install.md installs it (a sidecar of the server; or a child of
the jar, in the server's container). So a blank is carried over blank. The one case this command can
tell apart: `--server-namespace` names a namespace other than that of the pod the command runs in (the
backend's, as docs/install.md runs it); there a blank means two different namespaces, and the official
plugin's is written out. A namespace the official plugin uses too is named (`shared_warning`).
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
class BlankNamespace:
    """What a blank namespace stands for: to the official plugin, and to this plugin's backend.

    The official plugin (gocd/kubernetes-elastic-agents, `KubernetesClientFactory.createClientFor`) sets
    the namespace only when the profile's is not blank (`PluginSettings.getNamespace` gives null for a
    blank one), so fabric8 takes the service account's: the GoCD server's own namespace."""

    official: str | None  # the GoCD server's namespace; None: not known here
    source: str = ""  # where `official` comes from, as the plan says it
    here: str | None = None  # this pod's namespace: what the backend running here reads a blank as
    unknown_because: str = ""  # why `official` is not known, when it is not

    @property
    def differs(self) -> bool:
        """True when the two plugins would put a blank namespace's pods in two different namespaces."""
        return self.official is not None and self.here is not None and self.official != self.here

    def meaning(self) -> str:
        text = "blank in the old profile, which the official plugin reads as the GoCD server's namespace"
        return f"{text}: {self.official} ({self.source})" if self.official else text


def blank_namespace(server_namespace: str | None, namespace_file: Path) -> BlankNamespace:
    """`--server-namespace` names the official plugin's; the pod the command runs in names this plugin's
    (the backend's, run as docs/install.md says) and, without the option, the official plugin's too.
    Outside a pod neither is known: fabric8 would fall back to the GoCD server's environment."""
    here, unknown = _pod_namespace(namespace_file)
    if server_namespace is not None:
        return BlankNamespace(server_namespace, "from --server-namespace", here)
    if here is not None:
        return BlankNamespace(here, f"from this pod's service account, {namespace_file}", here)
    return BlankNamespace(None, unknown_because=unknown)


def _pod_namespace(namespace_file: Path) -> tuple[str | None, str]:
    try:
        text = namespace_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, f"this command is not running inside a pod (no {namespace_file})"
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        return None, f"this pod's {namespace_file} cannot be read: {reason}"
    try:
        return dns_label(text), ""
    except ValueError:
        return None, f"this pod's {namespace_file} holds no namespace name"


def _namespace_setting(old: ClusterProfileRecord) -> Property | None:
    return next((p for p in old.properties if p.key == NAMESPACE_KEY), None)


def _is_blank(setting: Property | None) -> bool:
    """Blank as the official plugin's `PluginSettings.getOrDefault` has it: absent, empty or spaces."""
    return setting is None or (not setting.encrypted and not (setting.value or "").strip())


def old_namespace(old: ClusterProfileRecord, blank: BlankNamespace) -> str | None:
    """The namespace the official plugin really puts this profile's pods in; None when not known here."""
    setting = _namespace_setting(old)
    if _is_blank(setting):
        return blank.official
    if setting is None or setting.encrypted or setting.value is None:
        return None  # an encrypted namespace cannot be read (and is reported by _carry_over)
    return setting.value.strip()


@dataclass(frozen=True)
class NamespaceChoice:
    """The namespace a new cluster profile says, and the settings that say it."""

    properties: tuple[Property, ...]  # the old settings, with the namespace written out when it must be
    namespace: str | None = None  # where the new profile's pods go; None when not known
    note: str = ""  # where that namespace comes from, as the plan says it


def choose_namespace(
    old: ClusterProfileRecord, old_namespace: str | None, blank: BlankNamespace, namespace: str | None
) -> NamespaceChoice:
    """The namespace the new profile must say: the old profile's pods' one (a blank stays blank where
    it means the same to both plugins), or `--namespace`."""
    setting = _namespace_setting(old)
    was_blank = _is_blank(setting)
    if namespace is not None:
        if not was_blank:
            before = (
                f"{old_namespace} in the old profile" if old_namespace else "encrypted in the old profile"
            )
        elif blank.official:
            before = blank.meaning()
        else:
            unknown = "not known here (give --server-namespace to check that the new pods do not share it)"
            before = f"{blank.meaning()}, {unknown}"
        return _written(old, setting, namespace, f"{namespace} (from --namespace); {before}")
    if not was_blank:
        note = f"{old_namespace}, as in the old profile" if old_namespace is not None else ""
        return NamespaceChoice(old.properties, old_namespace, note)
    if blank.differs:
        note = (
            f"{blank.meaning()}; this plugin's backend, running in this pod's namespace {blank.here}, would "
            f"read a blank as {blank.here}, so {blank.official} is written out in the new profile"
        )
        return _written(old, setting, str(blank.official), note)
    where = (
        f": {blank.official} ({blank.source})"
        if blank.official
        else f", not known here ({blank.unknown_because}; give --server-namespace NS to check that the "
        "new pods do not share it with the official plugin's)"
    )
    note = (
        "blank, as in the old profile: both plugins read a blank as the namespace of the GoCD server's pod, "
        f"where this plugin's backend runs{where}"
    )
    return NamespaceChoice(old.properties, blank.official, note)


def _written(old: ClusterProfileRecord, setting: Property | None, chosen: str, note: str) -> NamespaceChoice:
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
