"""GoCD's get-cluster-profile-metadata and get-elastic-agent-profile-metadata answers, from the field
tables. `required` only draws GoCD's star: settings that are needed in one pod specification mode only
are not starred, and validation reports them when they are missing."""

from __future__ import annotations

from typing import Any

from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS, Field


def _metadata(fields: tuple[Field, ...]) -> list[dict[str, Any]]:
    return [{"key": f.key, "metadata": {"required": f.required, "secure": f.secure}} for f in fields]


def cluster_profile_metadata() -> list[dict[str, Any]]:
    return _metadata(CLUSTER_FIELDS)


def elastic_profile_metadata() -> list[dict[str, Any]]:
    return _metadata(ELASTIC_FIELDS)
