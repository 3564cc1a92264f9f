"""The pod the official GoCD Helm chart (2.x) renders for the GoCD server from a values file, for the
tests of docker/helm/values-gocd.yaml. Helm and the chart cannot be fetched here, so this follows the
chart's server Deployment template field by field (its templates/gocd-server-deployment.yaml: the pod
security context, the volumes, the init containers, the sidecars placed before the server container,
the server container's env, probes and mounts), with the chart's defaults for what the values leave
out. It covers the keys the project's values use; `CHART_KEYS` lists them.
"""

from __future__ import annotations

from typing import Any

# The chart's keys the project's values may set (the chart's values.yaml documents each).
CHART_KEYS = {
    "rbac.create",
    "serviceAccount.create",
    "serviceAccount.name",
    "server.annotations.pod",
    "server.terminationGracePeriodSeconds",
    "server.env.extraEnvVars",
    "server.env.goServerJvmOpts",
    "server.persistence.extraVolumes",
    "server.persistence.extraVolumeMounts",
    "server.initContainers",
    "server.sidecarContainers",
}

RELEASE = "gocd"  # `helm install gocd gocd/gocd`: the chart's fullname is then "gocd"
APP_VERSION = "25.3.0"  # the GoCD server image tag of the chart's appVersion: any real tag will do


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


def server_pod(values: dict[str, Any]) -> dict[str, Any]:
    server = values.get("server") or {}
    env = server.get("env") or {}
    persistence = server.get("persistence") or {}
    container_env = []
    if env.get("goServerJvmOpts"):
        container_env.append({"name": "GOCD_SERVER_JVM_OPTS", "value": env["goServerJvmOpts"]})
    container_env += env.get("extraEnvVars") or []
    probe = {
        "httpGet": {"path": "/go/api/v1/health", "port": 8153},
        "initialDelaySeconds": 90,
        "periodSeconds": 15,
        "failureThreshold": 10,
    }
    server_container = {
        "name": "gocd-server",
        "image": f"gocd/gocd-server:v{APP_VERSION}",
        "imagePullPolicy": "IfNotPresent",
        "env": container_env,
        "ports": [{"containerPort": 8153}],
        "livenessProbe": probe,
        "readinessProbe": probe,
        "volumeMounts": [
            {
                "name": "config-vol",
                "mountPath": "/preconfigure_server.sh",
                "subPath": "preconfigure_server.sh",
            },
            {"name": "goserver-vol", "mountPath": "/godata", "subPath": "godata"},
            {"name": "goserver-vol", "mountPath": "/home/go", "subPath": "homego"},
            {"name": "goserver-vol", "mountPath": "/docker-entrypoint.d", "subPath": "scripts"},
            *(persistence.get("extraVolumeMounts") or []),
        ],
        "lifecycle": {"postStart": {"exec": {"command": ["/bin/bash", "/preconfigure_server.sh"]}}},
        "resources": {},
    }
    spec: dict[str, Any] = {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 0, "fsGroup": 0},
        "serviceAccountName": (values.get("serviceAccount") or {}).get("name") or RELEASE,
        "volumes": [
            {"name": "config-vol", "configMap": {"name": RELEASE}},
            {"name": "goserver-vol", "persistentVolumeClaim": {"claimName": f"{RELEASE}-server"}},
            *(persistence.get("extraVolumes") or []),
        ],
        "containers": [*(server.get("sidecarContainers") or []), server_container],
        "restartPolicy": "Always",
    }
    if server.get("initContainers"):
        spec["initContainers"] = server["initContainers"]
    if server.get("terminationGracePeriodSeconds"):
        spec["terminationGracePeriodSeconds"] = server["terminationGracePeriodSeconds"]
    metadata: dict[str, Any] = {
        "name": f"{RELEASE}-server",
        "labels": {"app": "gocd", "release": RELEASE, "component": "server"},
    }
    # templates/gocd-server-deployment.yaml (chart 2.18.0) lines 37-40: every server.annotations.pod entry
    # becomes a pod annotation, its value quoted.
    pod_annotations = (server.get("annotations") or {}).get("pod") or {}
    if pod_annotations:
        metadata["annotations"] = {key: str(value) for key, value in pod_annotations.items()}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
