"""The cluster profile: where and how agent pods run (one Kubernetes namespace of one GoCD server)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from profiles.errors import ProfileError
from profiles.fields import CLUSTER_FIELDS
from profiles.reading import Problem, read_properties


def check_cluster_properties(
    props: Any, *, report_unknown: bool = True
) -> tuple[dict[str, Any], list[Problem]]:
    """Parsed values and every problem; the single source for validation and `ClusterProfile`."""
    # Every cluster setting stands alone: there are no rules across fields.
    return read_properties(CLUSTER_FIELDS, props, report_unknown=report_unknown)


# fabric8's last resort, and kubectl's: where pods go when nothing else names a namespace.
FALLBACK_NAMESPACE = "default"


@dataclass(frozen=True)
class ClusterProfile:
    """Parsed cluster profile settings. Durations are in seconds; `None` means no limit.

    `go_server_url` is None when the profile leaves it blank: the pods then register with GoCD's secure
    site URL, as with the official plugin (server_url.py; the backend knows it, the profile does not).
    `namespace` is always a name: a blank one is read as `blank_namespace` says (`from_properties`).
    The two secrets are left out of repr() so that logging a profile never prints them.
    """

    go_server_url: str | None
    kubernetes_cluster_url: str | None = None
    namespace: str = FALLBACK_NAMESPACE
    security_token: str | None = field(default=None, repr=False)
    kubernetes_cluster_ca_cert: str | None = field(default=None, repr=False)  # PEM, whichever way given
    cluster_request_timeout: float = 10.0
    auto_register_timeout: float = 600.0
    auto_register_key_expiry: float = 1800.0  # how long GoCD's registration keys live (its server's)
    pending_pods_count: int = 10
    idle_timeout: float = 600.0
    max_pods: int | None = None
    max_pod_lifetime: float | None = None

    @classmethod
    def from_properties(cls, props: Any, *, blank_namespace: str = FALLBACK_NAMESPACE) -> ClusterProfile:
        """Raise ProfileError with validation's message if a setting is unusable. Unknown keys are
        ignored here (validation reports them) so that a stray key never stops running jobs.

        `blank_namespace`: what a blank namespace means where the profile is used, the namespace the
        official plugin would take there (the backend finds it: elastic_agent/kube/namespace.py)."""
        values, problems = check_cluster_properties(props, report_unknown=False)
        if problems:
            raise ProfileError(*problems[0], problems=tuple(problems))
        return cls(
            go_server_url=values["go_server_url"],
            kubernetes_cluster_url=values["kubernetes_cluster_url"],
            namespace=values["namespace"] or blank_namespace,
            security_token=values["security_token"],
            kubernetes_cluster_ca_cert=values["kubernetes_cluster_ca_cert"],
            cluster_request_timeout=values["cluster_request_timeout"],
            auto_register_timeout=values["auto_register_timeout"],
            auto_register_key_expiry=values["auto_register_key_expiry"],
            pending_pods_count=values["pending_pods_count"],
            idle_timeout=values["idle_timeout"],
            max_pods=values["max_pods"] or None,
            max_pod_lifetime=values["max_pod_lifetime"] or None,
        )

    @functools.cached_property
    def credentials_digest(self) -> str:
        """A digest of the two secrets: a change of credentials is noticed without a second copy."""
        secrets = f"{self.security_token or ''}\x00{self.kubernetes_cluster_ca_cert or ''}"
        return hashlib.sha256(secrets.encode()).hexdigest()

    @functools.cached_property
    def cluster_key(self) -> str:
        """A stable text naming the cluster and namespace (input for the cluster label): the API URL
        with scheme and host lowercased and no trailing slash ("" for in-cluster/kubeconfig), a newline,
        then the namespace. Equal for profiles that differ only in how the URL was typed."""
        url = ""
        if self.kubernetes_cluster_url:
            parts = urlsplit(self.kubernetes_cluster_url.strip())
            netloc = parts.netloc.rpartition("@")[2].lower()  # never let credentials into a label input
            url = f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"
        return f"{url}\n{self.namespace}"
