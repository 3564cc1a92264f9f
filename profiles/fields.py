"""The settings of both profile kinds, each defined once: key, how it is read, its default, and what the
form shows. Metadata, views, validation and the typed profiles are all derived from these two tables.

Blank and absent settings never reach a reader: they take the field's default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiles.placeholders import AGENT_IMAGE_NAME, AGENT_IMAGE_TAG
from profiles.quantities import parse_cpu, parse_memory
from profiles.schedule import parse_schedule
from profiles.values import (
    boolean,
    ca_certificate,
    choice,
    dns_label,
    duration,
    environment,
    go_server_url,
    http_url,
    image,
    integer,
    key_expiry,
    text_value,
    token,
)


@dataclass(frozen=True)
class Field:
    key: str
    label: str
    help: str
    parse: Callable[[str], Any]
    default: Any = None
    required: bool = False  # GoCD's "required" metadata: only draws the star; validation decides
    secure: bool = False
    widget: str = "text"  # text | password | textarea | select | boolean
    choices: tuple[str, ...] = ()
    show_when: str = ""  # an AngularJS expression: the field is only shown when it holds


# --- the two tables --------------------------------------------------------------------------------

# The official plugin reads a bare cluster_request_timeout as milliseconds (default 10000); reading it as
# minutes, as other durations are, would turn a migrated 10000 into a week. So this one field keeps
# upstream's unit for bare numbers.
_MILLISECONDS = 0.001

CLUSTER_FIELDS: tuple[Field, ...] = (
    Field(
        "go_server_url",
        "GoCD server URL",
        "The URL agent pods use to reach GoCD, ending in /go, e.g. https://gocd.example.com/go. "
        "Not localhost: a pod would reach itself. Blank: GoCD's secure site URL (Admin > Server "
        "Configuration), as with the official plugin; it must then end in /go.",
        go_server_url,
    ),
    Field(
        "kubernetes_cluster_url",
        "Kubernetes API URL",
        "e.g. https://kubernetes.default.svc. Blank: the in-cluster service account, else the "
        "kubeconfig of the plugin's backend.",
        http_url,
    ),
    Field(
        "namespace",
        "Namespace",
        "Where agent pods run. Blank: the namespace the official plugin would take, the backend's own "
        "(its pod's service account), else its kubeconfig context's, else default.",
        dns_label,
    ),
    Field(
        "security_token",
        "Security token",
        "A service account token allowed to manage pods in the namespace. Blank: from the in-cluster "
        "service account or kubeconfig.",
        token,
        secure=True,
        widget="password",
    ),
    Field(
        "kubernetes_cluster_ca_cert",
        "Cluster CA certificate",
        "PEM text, or a kubeconfig's certificate-authority-data. Blank: the in-cluster or kubeconfig CA.",
        ca_certificate,
        secure=True,
        widget="textarea",
    ),
    Field(
        "cluster_request_timeout",
        "Kubernetes request timeout",
        "How long one call to the Kubernetes API may take, e.g. 10s. A bare number means milliseconds "
        "(as in the official plugin). Default: 10s.",
        duration(0.1, _MILLISECONDS),
        default=10.0,
    ),
    Field(
        "auto_register_timeout",
        "Agent registration timeout",
        "A pod whose agent has not registered with GoCD within this time is deleted, e.g. 10m. "
        "A bare number means minutes. Default: 10m.",
        duration(1.0),
        default=600.0,
    ),
    Field(
        "auto_register_key_expiry",
        "Registration key lifetime",
        "How long the GoCD server's registration keys stay valid: its system property "
        "gocd.ephemeral.auto.register.key.expiry.millis, written here as a duration (1800000 there is 30m "
        "here). Set both alike. Keys left over by reuse start MinIdlePods and Predict pods until this, less "
        "the agent registration timeout, has passed. A bare number means minutes. Default: 30m (GoCD's).",
        key_expiry,
        default=1800.0,
    ),
    Field(
        "pending_pods_count",
        "Maximum pending pods",
        "At most this many pods whose agents have not registered yet. Default: 10.",
        integer(1),
        default=10,
    ),
    Field(
        "idle_timeout",
        "Idle timeout",
        "How long a reusable pod may stay idle after its last job before it is deleted, e.g. 10m. "
        "Elastic profiles may override it. Default: 10m.",
        duration(0.0),
        default=600.0,
    ),
    Field(
        "max_pods",
        "Maximum pods",
        "At most this many pods of this cluster profile, busy or not. Blank or 0: no limit.",
        integer(0),
        default=0,
    ),
    Field(
        "max_pod_lifetime",
        "Maximum pod lifetime",
        "A pod older than this is deleted once its job is done, e.g. 8h. Blank or 0: no limit.",
        duration(0.0),
        default=0.0,
    ),
)

_PROPERTIES_MODE = "PodSpecType == 'properties' || !PodSpecType && SpecifiedUsingPodConfiguration != 'true'"
_YAML_MODE = "PodSpecType == 'yaml' || !PodSpecType && SpecifiedUsingPodConfiguration == 'true'"
_REMOTE_MODE = "PodSpecType == 'remote'"
_PLACEHOLDER_HELP = (
    "Placeholders: {{ POD_POSTFIX }}, {{ CONTAINER_POSTFIX }}, "
    f"{{{{ GOCD_AGENT_IMAGE }}}} ({AGENT_IMAGE_NAME}) and {{{{ LATEST_VERSION }}}} ({AGENT_IMAGE_TAG}), "
    "as the official plugin renders them; other text is left as written. No metadata.namespace, "
    "no generateName."
)

ELASTIC_FIELDS: tuple[Field, ...] = (
    Field(
        "PodSpecType",
        "Pod specification",
        "properties: image and limits below; yaml: a pod template; remote: a template fetched from a URL. "
        "Default: properties.",
        choice("properties", "yaml", "remote"),
        widget="select",
        choices=("properties", "yaml", "remote"),
    ),
    Field(
        "Image",
        "Image",
        f"The agent image, e.g. {AGENT_IMAGE_NAME}:{AGENT_IMAGE_TAG}.",
        image,
        show_when=_PROPERTIES_MODE,
    ),
    Field(
        "MaxMemory",
        "Maximum memory",
        "Memory limit of the agent container, e.g. 1Gi or 1024M.",
        parse_memory,
        show_when=_PROPERTIES_MODE,
    ),
    Field(
        "MaxCPU",
        "Maximum CPU",
        "CPU limit of the agent container in cores, e.g. 0.5, 500m or 2.",
        parse_cpu,
        show_when=_PROPERTIES_MODE,
    ),
    Field(
        "Privileged",
        "Privileged",
        "Run the agent container privileged (e.g. for Docker in Docker).",
        boolean,
        default=False,
        widget="boolean",
        show_when=_PROPERTIES_MODE,
    ),
    Field(
        "PodConfiguration",
        "Pod template",
        "A Pod in YAML or JSON. " + _PLACEHOLDER_HELP,
        text_value,
        widget="textarea",
        show_when=_YAML_MODE,
    ),
    Field(
        "RemoteFile",
        "Remote pod template URL",
        "An http(s) URL serving a pod template, fetched when pods are made. " + _PLACEHOLDER_HELP,
        http_url,
        show_when=_REMOTE_MODE,
    ),
    Field(
        "RemoteFileType",
        "Remote file format",
        "json or yaml. Default: yaml.",
        choice("json", "yaml"),
        default="yaml",
        widget="select",
        choices=("json", "yaml"),
        show_when=_REMOTE_MODE,
    ),
    Field(
        "Environment",
        "Environment variables",
        "One NAME=value per line, given to every container of the pod.",
        environment,
        default=(),
        widget="textarea",
    ),
    Field(
        "Reuse",
        "Reuse pods",
        "true: a pod that finished a job may run further jobs of this profile. Default: false (one pod "
        "per job).",
        boolean,
        default=False,
        widget="boolean",
    ),
    Field(
        "MaxJobsPerPod",
        "Maximum jobs per pod",
        "A reused pod is deleted after this many jobs. Blank: no limit.",
        integer(1),
    ),
    Field(
        "IdleTimeout",
        "Idle timeout",
        "How long an idle pod of this profile is kept, e.g. 5m. Blank: the cluster profile's.",
        duration(0.0),
    ),
    Field(
        "MinIdlePods",
        "Minimum idle pods",
        "Keep this many idle pods ready ahead of demand (needs Reuse). Default: 0.",
        integer(0, 1000),
        default=0,
    ),
    Field(
        "ReuseSchedule",
        "Reuse schedule",
        "Reuse values that follow the week (needs Reuse): a YAML or JSON list of entries with cron "
        "periods (day of week by name), a timezone and any of MinIdlePods, IdleTimeout, MaxJobsPerPod, "
        'e.g. [{"periods": ["* 7-18 * * mon-fri"], "timezone": "Europe/Berlin", "MinIdlePods": 4, '
        '"IdleTimeout": "30m"}]. Outside every period the values above hold; the last matching entry '
        "wins. Blank: no schedule.",
        parse_schedule,
        widget="textarea",
    ),
    Field(
        "Predict",
        "Start the next stage's pods ahead",
        "true: learn which stage follows which in each pipeline, and start pods for the next stage "
        "while the current one runs, with registration keys left over by reuse (needs Reuse). "
        "Default: false.",
        boolean,
        default=False,
        widget="boolean",
    ),
    Field(
        "ReuseScope",
        "Reuse scope",
        "profile: any job of this profile may reuse a pod; pipeline: only jobs of the same pipeline. "
        "Default: profile.",
        choice("profile", "pipeline"),
        default="profile",
        widget="select",
        choices=("profile", "pipeline"),
    ),
    Field(
        "SpecifiedUsingPodConfiguration",
        "Pod template (legacy)",
        "Older profiles: true means a pod template when Pod specification is not set.",
        boolean,
        default=False,
        widget="boolean",
        show_when="SpecifiedUsingPodConfiguration",
    ),
)
