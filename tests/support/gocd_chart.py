"""The pod the official GoCD Helm chart renders for the GoCD server from a values file, for the tests of
docker/helm/values-gocd.yaml. Helm cannot be fetched here, so this renders the chart's server Deployment
template by hand, following gocd/helm-chart at chart version 2.18.0 (appVersion 26.1.0, commit
0b728b4ad736d83e46c22f319c2b3a4491f2e9aa), file gocd/templates/gocd-server-deployment.yaml, with the
defaults of gocd/values.yaml for what a values file leaves out, merged as Helm merges values (maps key by
key, lists replaced whole). The line numbers in the comments are that template's. It covers the keys the
project's values use (`CHART_KEYS`) and every branch those keys reach: the conditional volumes and mounts,
the postStart hook of `shouldPreconfigure`, the probes. `access_objects` renders the chart's
ServiceAccount, ClusterRole and ClusterRoleBinding the same way.
"""

from __future__ import annotations

import copy
from typing import Any

CHART_VERSION = "2.18.0"
APP_VERSION = "26.1.0"
RELEASE = "gocd"  # `helm install gocd gocd/gocd`: the chart's fullname is then "gocd"
OFFICIAL_PLUGIN_INSTALL = "GOCD_PLUGIN_INSTALL_kubernetes-elastic-agents"

# The chart's keys the project's values may set (the chart's values.yaml documents each).
CHART_KEYS = {
    "rbac.create",
    "serviceAccount.create",
    "serviceAccount.name",
    "server.annotations.pod",
    "server.shouldPreconfigure",
    "server.preconfigureCommand",
    "server.terminationGracePeriodSeconds",
    "server.env.extraEnvVars",
    "server.env.goServerJvmOpts",
    "server.persistence.extraVolumes",
    "server.persistence.extraVolumeMounts",
    "server.initContainers",
    "server.sidecarContainers",
}

# gocd/values.yaml of chart 2.18.0: the defaults of the keys the template below reads.
DEFAULTS: dict[str, Any] = {
    "rbac": {"create": True, "roleRef": None, "extraRules": []},
    "serviceAccount": {"create": True, "name": None, "automountServiceAccountToken": True},
    "server": {
        "annotations": {"deployment": None, "pod": None},
        "securityContext": {
            "runAsUser": 1000,
            "runAsGroup": 0,
            "fsGroup": 0,
            "fsGroupChangePolicy": "OnRootMismatch",
        },
        "shouldPreconfigure": True,
        "preconfigureCommand": ["/bin/bash", "/preconfigure_server.sh"],
        "image": {"repository": "docker.io/gocd/gocd-server", "tag": None, "pullPolicy": "IfNotPresent"},
        "restartPolicy": "Always",
        "healthCheck": {"initialDelaySeconds": 90, "periodSeconds": 15, "failureThreshold": 10},
        "env": {
            "goServerJvmOpts": None,
            "extraEnvVars": [
                {
                    "name": OFFICIAL_PLUGIN_INSTALL,
                    "value": "https://github.com/gocd/kubernetes-elastic-agents/releases/download/"
                    "v5.0.2-779/kubernetes-elastic-agent-5.0.2-779.jar",
                }
            ],
        },
        "persistence": {
            "enabled": True,
            "existingClaim": None,
            "name": {"dockerEntryPoint": "goserver-vol"},
            "subpath": {"godata": "godata", "homego": "homego", "dockerEntryPoint": "scripts"},
            "extraVolumes": [],
            "extraVolumeMounts": [],
        },
        "security": {"ssh": {"enabled": False}},
        "resources": {},
    },
}


def merged(defaults: Any, values: Any) -> Any:
    """Helm's merge of a values file over the chart's values: maps key by key, anything else replaced
    (a list given replaces the default list whole; `null` keeps nothing)."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        out = copy.deepcopy(defaults)
        for key, value in values.items():
            out[key] = merged(defaults.get(key), value) if key in defaults else copy.deepcopy(value)
        return out
    return copy.deepcopy(values)


def leaf_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of the values, down to the chart's keys (lists and their items are values)."""
    keys: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in CHART_KEYS:
            keys |= leaf_keys(value, f"{path}.")
        else:
            keys.add(path)
    return keys


def service_account_name(values: dict[str, Any]) -> str:
    """gocd/templates/_helpers.tpl, "gocd.serviceAccountName": the name given, else the chart's
    fullname when the chart creates the account, else the namespace's `default`."""
    account = merged(DEFAULTS, values)["serviceAccount"]
    return str(account.get("name") or (RELEASE if account["create"] else "default"))


def access_objects(values: dict[str, Any], namespace: str = "gocd") -> list[dict[str, Any]]:
    """The ServiceAccount, ClusterRole and ClusterRoleBinding the chart creates in release namespace
    `namespace` (gocd/templates/gocd-service-account.yaml, gocd-cluster-role.yaml lines 1 and 11-23,
    gocd-cluster-role-binding.yaml), without the chart's own labels: the official plugin's access, which
    the server's pod holds through its service account."""
    everything = merged(DEFAULTS, values)
    rbac, account = everything["rbac"], everything["serviceAccount"]
    name = service_account_name(values)
    objects: list[dict[str, Any]] = []
    if account["create"]:
        objects.append({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": name, "namespace": namespace}})  # fmt: skip
    if rbac["create"] and not rbac["roleRef"]:
        rules = [
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
            *(rbac["extraRules"] or []),
        ]
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": RELEASE}, "rules": rules})  # fmt: skip
    if rbac["create"]:
        objects.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": RELEASE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": rbac["roleRef"] or RELEASE},
        })  # fmt: skip
    return objects


def server_pod(values: dict[str, Any]) -> dict[str, Any]:
    server = merged(DEFAULTS, values)["server"]
    service_account = merged(DEFAULTS, values)["serviceAccount"]
    preconfigure = bool(server["shouldPreconfigure"])
    persistence = server["persistence"]
    env = server["env"]
    container_env = []  # lines 89-96
    if env.get("goServerJvmOpts"):
        container_env.append({"name": "GOCD_SERVER_JVM_OPTS", "value": env["goServerJvmOpts"]})
    container_env += env.get("extraEnvVars") or []
    health = server["healthCheck"]
    probe = {  # lines 99-112: the same probe for liveness and readiness
        "httpGet": {"path": "/go/api/v1/health", "port": 8153},
        "initialDelaySeconds": health["initialDelaySeconds"],
        "periodSeconds": health["periodSeconds"],
        "failureThreshold": health["failureThreshold"],
    }
    mounts: list[dict[str, Any]] = []  # lines 113-139
    if preconfigure:
        script = "preconfigure_server.sh"
        mounts.append({"name": "config-vol", "mountPath": f"/{script}", "subPath": script})
    if persistence["enabled"]:
        subpath = persistence["subpath"]
        mounts += [
            {"name": "goserver-vol", "mountPath": "/godata", "subPath": subpath["godata"]},
            {"name": "goserver-vol", "mountPath": "/home/go", "subPath": subpath["homego"]},
            {
                "name": persistence["name"]["dockerEntryPoint"],
                "mountPath": "/docker-entrypoint.d",
                "subPath": subpath["dockerEntryPoint"],
            },
        ]
    mounts += persistence.get("extraVolumeMounts") or []
    image = server["image"]
    tag = image["tag"] or f"v{APP_VERSION}"  # lines 83-87
    server_container: dict[str, Any] = {
        "name": "gocd-server",
        "image": f"{image['repository']}:{tag}",
        "imagePullPolicy": image["pullPolicy"],
        "env": container_env,
        "ports": [{"containerPort": 8153}],
        "livenessProbe": probe,
        "readinessProbe": probe,
        "resources": server["resources"],
    }
    if mounts:
        server_container["volumeMounts"] = mounts
    if preconfigure:  # lines 140-147: the preconfigure script runs as the server container's postStart
        server_container["lifecycle"] = {"postStart": {"exec": {"command": server["preconfigureCommand"]}}}
    volumes: list[dict[str, Any]] = []  # lines 49-70
    if preconfigure:
        volumes.append({"name": "config-vol", "configMap": {"name": RELEASE}})
    if persistence["enabled"]:
        claim = persistence["existingClaim"] or f"{RELEASE}-server"
        volumes.append({"name": "goserver-vol", "persistentVolumeClaim": {"claimName": claim}})
    volumes += persistence.get("extraVolumes") or []
    security = server["securityContext"]
    spec: dict[str, Any] = {  # lines 41-48, 78-82 (sidecars come before the server container), 157-163
        "securityContext": {
            key: security[key] for key in ("runAsUser", "runAsGroup", "fsGroup", "fsGroupChangePolicy")
        },
        "serviceAccountName": service_account_name(values),
        "automountServiceAccountToken": service_account["automountServiceAccountToken"],
        "containers": [*(server.get("sidecarContainers") or []), server_container],
        "restartPolicy": server["restartPolicy"],
    }
    if volumes:
        spec["volumes"] = volumes
    if server.get("initContainers"):
        spec["initContainers"] = server["initContainers"]
    if server.get("terminationGracePeriodSeconds"):
        spec["terminationGracePeriodSeconds"] = server["terminationGracePeriodSeconds"]
    metadata: dict[str, Any] = {
        "name": f"{RELEASE}-server",
        "labels": {"app": "gocd", "release": RELEASE, "component": "server"},
    }
    pod_annotations = server["annotations"].get("pod") or {}  # lines 37-40, each value quoted
    if pod_annotations:
        metadata["annotations"] = {key: str(value) for key, value in pod_annotations.items()}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def charts_script_runs(values: dict[str, Any]) -> bool:
    """Whether the postStart hook runs the chart's own script, which posts a cluster profile of the
    official plugin `cd.go.contrib.elasticagent.kubernetes` with `set -e` and `curl --fail`
    (gocd/templates/gocd-server-configmap.yaml lines 23 and 37-49): without that plugin the post fails,
    the hook fails, and Kubernetes kills and restarts a container whose postStart hook fails. A values
    file's own `preconfigureCommand` runs instead of it (the template's lines 140-147)."""
    server = merged(DEFAULTS, values)["server"]
    return bool(server["shouldPreconfigure"]) and "/preconfigure_server.sh" in server["preconfigureCommand"]


def installs_official_plugin(values: dict[str, Any]) -> bool:
    """Whether the server container gets the variable that makes the GoCD image download the official
    plugin at start (the chart's default extraEnvVars, which a values file's list replaces)."""
    env = merged(DEFAULTS, values)["server"]["env"].get("extraEnvVars") or []
    return any(var.get("name") == OFFICIAL_PLUGIN_INSTALL for var in env)
