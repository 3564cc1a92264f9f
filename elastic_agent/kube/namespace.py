"""What a blank `namespace` in a cluster profile means: the namespace the official plugin would take.

The official plugin (gocd/kubernetes-elastic-agents 5.0.2, KubernetesClientFactory.createClientFor)
starts from fabric8's `Config.autoConfigure(null)` and sets the namespace only when the profile's is
not blank. fabric8 7.6.1 (Config.autoConfigure, tryNamespaceFromPath, configFromSysPropsOrEnvVars)
then takes, in this order of precedence:

1. `KUBERNETES_NAMESPACE` (or the JVM property `kubernetes.namespace`), applied last, so it wins;
2. the namespace file of the pod's service account (`/var/run/secrets/kubernetes.io/serviceaccount/
   namespace`, or the file `KUBENAMESPACE` names), newlines removed: inside the GoCD server's pod, the
   server's own namespace;
3. the kubeconfig's current context, when a kubeconfig file exists (fabric8 reads it before, and
   instead of, the pod's files). The official plugin turns this off (it sets
   `kubernetes.auth.tryKubeConfig=false`), but this backend connects through the kubeconfig when it
   runs outside a pod with a blank `kubernetes_cluster_url` (connect.py), so its context's namespace is
   the one that goes with that connection;
4. nothing: fabric8 then refuses every pod ("namespace not specified for an operation requiring one
   and no default was found in the Config"), so the official plugin cannot run there. This backend
   takes `default`, as kubectl does.

The backend runs beside GoCD (a sidecar of its pod, or a child of the plugin jar), so 1 and 2 give the
same answer the official plugin gets. Found once per process: none of it changes while it runs.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes import config

from profiles.cluster import FALLBACK_NAMESPACE

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class BlankNamespace:
    """The namespace a blank one stands for, and where that was found (for logs and status pages)."""

    name: str
    source: str


def kubeconfig_namespace(config_file: str | None = None) -> str | None:
    """The namespace of the kubeconfig's current context (`config_file`: $KUBECONFIG's paths, else
    ~/.kube/config), if any."""
    try:
        _, current = config.list_kube_config_contexts(config_file=config_file)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError):
        return None
    context = current.get("context") if isinstance(current, Mapping) else None
    namespace = context.get("namespace") if isinstance(context, Mapping) else None
    return namespace if isinstance(namespace, str) else None


def find_blank_namespace(
    environ: Mapping[str, str],
    service_account_file: Path = SERVICE_ACCOUNT_NAMESPACE,
    from_kubeconfig: Callable[[], str | None] | None = None,
) -> BlankNamespace:
    """The namespace a blank one means for a process with this environment (see the module's list)."""
    name = _valid(environ.get("KUBERNETES_NAMESPACE"))
    if name:
        return BlankNamespace(name, "from KUBERNETES_NAMESPACE")
    path = Path(environ["KUBENAMESPACE"]) if environ.get("KUBENAMESPACE") else service_account_file
    try:
        name = _valid(path.read_text(encoding="utf-8").replace("\n", "").replace("\r", ""))
    except (OSError, UnicodeDecodeError):
        name = None
    if name:
        return BlankNamespace(name, f"the backend's own: its pod's service account, {path}")
    name = _valid(from_kubeconfig() if from_kubeconfig else kubeconfig_namespace(environ.get("KUBECONFIG")))
    if name:
        return BlankNamespace(name, "the kubeconfig's current context")
    return BlankNamespace(FALLBACK_NAMESPACE, "neither a pod's service account nor a kubeconfig names one")


def _valid(text: str | None) -> str | None:
    """A namespace name, or None for anything else (a damaged file must not name pods' namespace)."""
    name = (text or "").strip()
    return name if _NAME.fullmatch(name) else None


@functools.cache
def blank_namespace() -> BlankNamespace:
    """This process's answer, found at first use and kept."""
    found = find_blank_namespace(os.environ)
    log.info("a blank namespace in a cluster profile means %s (%s)", found.name, found.source)
    return found
