"""The project's manifests as kubectl sends them: rendered by kustomize, created at their API path, and
dry-run on a real kube-apiserver.

The manifests' tests, the install guide's and its commands (guide_commands.py) render and send the same
objects: one way of doing it, as `kubectl apply -k` does."""

from __future__ import annotations

import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.support.control_plane import Binaries, ControlPlane

PLURALS = {"Role": "roles", "RoleBinding": "rolebindings", "ServiceAccount": "serviceaccounts",
           "Secret": "secrets", "Pod": "pods", "PodDisruptionBudget": "poddisruptionbudgets",
           "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}  # fmt: skip


def kustomize(binaries: Binaries, folder: Path) -> list[dict[str, Any]]:
    result = subprocess.run([str(binaries.kustomize), "build", str(folder)], capture_output=True, text=True,
                            check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def collection(obj: dict[str, Any]) -> str:
    """The API path that creates `obj` (POST)."""
    api = obj["apiVersion"]
    base = "/api/v1" if api == "v1" else f"/apis/{api}"
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{where}/{PLURALS[obj['kind']]}"


def dry_run(plane: ControlPlane, obj: dict[str, Any]) -> tuple[int, Any]:
    """A server-side dry run of creating `obj`: every admission step runs, nothing is stored."""
    query = urllib.parse.urlencode({"dryRun": "All", "fieldValidation": "Strict"})
    return plane.request("POST", f"{collection(obj)}?{query}", body=obj)


def namespace(plane: ControlPlane, name: str, pod_security: str | None = None) -> None:
    plane.create_namespace(name)
    if pod_security is not None:
        patch = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": pod_security}}}
        client.CoreV1Api(plane.admin_api_client()).patch_namespace(name, patch)
