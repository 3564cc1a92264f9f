"""Per-pod details: the pod's name, its GO_EA_* variables, labels and annotations.

The profile renders a template (profiles.pod_template); this module makes one concrete pod of it for
one GoCD server, cluster and job. No profile property and no secret goes into a label or annotation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpec
from profiles.fingerprint import label_form
from profiles.pod_template import instantiate

_LABEL_VALUE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """A valid Kubernetes label value showing `text` as well as it can (63 characters, alphanumeric ends)."""
    value = _LABEL_VALUE_UNSAFE.sub("-", text)[:63]
    return value.strip("-._")


@functools.lru_cache(maxsize=256)  # every request names its cluster; hash each key once
def cluster_label(cluster_key: str) -> str:
    """Names the cluster a pod belongs to: requests carry profile properties, not profile ids, so the
    cluster is known by where it is (ClusterProfile.cluster_key: its URL and namespace)."""
    return hashlib.sha256(cluster_key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PodIdentity:
    """The three labels that make a pod this backend's: plugin, GoCD server, cluster."""

    server_id: str
    cluster: str
    plugin_id: str = PLUGIN_ID

    def selector(self) -> dict[str, str]:
        return dict(self._selector_items)

    @functools.cached_property
    def _selector_items(self) -> tuple[tuple[str, str], ...]:
        # Computed once: owns() runs for every pod on every scan of the cache.
        return (
            (labels.LABEL_PLUGIN_ID, self.plugin_id),
            (labels.LABEL_SERVER_ID, label_value(self.server_id)),
            (labels.LABEL_CLUSTER, self.cluster),
        )

    def owns(self, pod_labels: Mapping[str, str]) -> bool:
        # A loop, not all() over a generator: half the cost, on every pod at every scan of the cache.
        for key, value in self._selector_items:  # noqa: SIM110
            if pod_labels.get(key) != value:
                return False
        return True


def job_labels(job: JobIdentifier) -> dict[str, str]:
    return {
        labels.LABEL_JOB_ID: str(job.job_id),
        labels.LABEL_PIPELINE: label_value(job.pipeline_name),
        labels.LABEL_JOB_NAME: label_value(job.job_name),
    }


@functools.lru_cache(maxsize=1024)  # a job's annotation is written at its pod's creation, assignment, end
def job_annotation(job: JobIdentifier) -> str:
    return json.dumps(job.to_json(), sort_keys=True, separators=(",", ":"))


def build_pod(
    template: Mapping[str, Any],
    *,
    identity: PodIdentity,
    namespace: str,
    job: JobIdentifier | None,
    spec: JobSpec,
    auto_register_key: str,
    go_server_url: str,
    now: float,
    extra_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One concrete pod from a rendered template, ready for the API server. `job` is None for a warm
    pod created ahead of demand."""
    # instantiate() copies the template deeply and leaves it as it is: no copy needed before it.
    pod = instantiate(dict(template), secrets.token_hex(5), secrets.token_hex(3))
    metadata = pod.setdefault("metadata", {})
    metadata["namespace"] = namespace
    name = metadata["name"]
    metadata["labels"] = {
        # A template copied from a busy pod must not make a new pod look busy to the disruption budget.
        **without_official_labels(metadata.get("labels") or {}),
        **identity.selector(),
        labels.LABEL_FINGERPRINT: label_form(spec.fingerprint),
        **(job_labels(job) if job else {}),
    }
    annotations = {
        labels.ANN_STATE: "booting",
        labels.ANN_STATE_SINCE: f"{now:.3f}",
        labels.ANN_CREATED_AT: f"{now:.3f}",
        labels.ANN_JOBS_RUN: "0",
        labels.ANN_ENVIRONMENT: spec.environment or "",
        labels.ANN_REUSE: "true" if spec.reuse else "false",
        labels.ANN_FINGERPRINT: spec.fingerprint,
        **{key: value for key, value in reuse_annotations(spec).items() if value is not None},
    }
    annotations.update(extra_annotations or {})
    if job is not None:
        annotations[labels.ANN_CREATED_FOR] = job_annotation(job)
    else:
        annotations[labels.ANN_WARM] = "true"
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    variables = {
        "GO_EA_SERVER_URL": go_server_url,
        "GO_EA_AUTO_REGISTER_KEY": auto_register_key,
        "GO_EA_AUTO_REGISTER_ENVIRONMENT": spec.environment or "",
        "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID": name,
        "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID": identity.plugin_id,
    }
    for container in pod.get("spec", {}).get("containers", []):
        # The plugin's own values win over a template's: a stale GO_EA_* copied into a template would
        # otherwise register the agent under the wrong id.
        kept = [item for item in container.get("env") or [] if item.get("name") not in variables]
        container["env"] = kept + [{"name": key, "value": value} for key, value in variables.items()]
    return pod


def official_labels(pod_labels: Mapping[str, str]) -> list[str]:
    """The labels among `pod_labels` that the official plugin selects on (labels.py says why): a `kind`
    label of another value is the user's own and stays."""
    kind = labels.OFFICIAL_KIND_LABEL
    return [
        key
        for key, value in pod_labels.items()
        if key in labels.OFFICIAL_LABELS or (key == kind and value == labels.OFFICIAL_KIND_VALUE)
    ]


def without_official_labels(template_labels: Mapping[str, str]) -> dict[str, str]:
    """A template's labels without those the official plugin selects on (a template copied from one of
    its pods would otherwise hand this plugin's pods over to it) and without the busy label."""
    # A template copied from a busy pod must not make a new pod look busy to the disruption budget.
    drop = {*official_labels(template_labels), labels.LABEL_BUSY}
    return {key: value for key, value in template_labels.items() if key not in drop}


def reuse_annotations(spec: JobSpec) -> dict[str, str | None]:
    """The reuse knobs of the pod's profile, refreshed at every job-completion."""
    return {
        labels.ANN_IDLE_TIMEOUT: f"{spec.idle_timeout:g}",
        labels.ANN_MAX_JOBS: str(spec.max_jobs_per_pod) if spec.max_jobs_per_pod else None,
        labels.ANN_MIN_IDLE: str(spec.min_idle_pods),
        labels.ANN_SCHEDULE: spec.schedule.text if spec.schedule is not None else None,
    }
