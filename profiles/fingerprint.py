"""The reuse fingerprint: which pods are interchangeable.

Two jobs may share a pod when the pod their profiles render is the same, it runs in the same place and
registers with the same GoCD server into the same environment (and, with ReuseScope=pipeline, serves the
same pipeline). The fingerprint is SHA-256 over a canonical, versioned JSON encoding of exactly those
inputs: never the job, the registration key, the reuse knobs (Predict among them) or credentials. JSON
with sorted keys, compact separators and ASCII escapes is the same on every Python version and
platform, so fingerprints survive restarts and upgrades; the version prefix lets a future encoding
coexist with this one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VERSION = "v1"
LABEL_LENGTH = 20  # hex characters of the digest in the pod label (80 bits: no collisions in practice)


@dataclass(frozen=True)
class FingerprintInputs:
    pod_template: Mapping[str, Any]  # rendered, with POD_POSTFIX/CONTAINER_POSTFIX still symbolic
    cluster_key: str  # the cluster URL and namespace (ClusterProfile.cluster_key)
    go_server_url: str  # what pods register with: the profile's, or for a blank one GoCD's secure site URL
    environment: str | None
    pipeline: str | None  # only with ReuseScope=pipeline

    def canonical(self) -> bytes:
        document = {
            "pod": self.pod_template,
            "cluster": self.cluster_key,
            "server": self.go_server_url,
            "environment": self.environment or "",
            "pipeline": self.pipeline,
        }
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        return f"gocd-elastic-agent-reuse-fingerprint/{VERSION}\n{text}".encode("ascii")


def fingerprint(inputs: FingerprintInputs) -> str:
    """`v1:<64 hex digits>`."""
    return f"{VERSION}:{hashlib.sha256(inputs.canonical()).hexdigest()}"


def label_form(full: str) -> str:
    """The shortened form used as a label value for selection: `v1-<first 20 hex digits>`."""
    version, _, digest = full.partition(":")
    return f"{version}-{digest[:LABEL_LENGTH]}"


def version_of(full: str) -> str:
    return full.partition(":")[0]
