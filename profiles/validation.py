"""GoCD's validate-cluster-profile and validate-elastic-agent-profile answers: every problem, one entry
per problem, for any input whatsoever (never an exception)."""

from __future__ import annotations

from typing import Any

from profiles.cluster import check_cluster_properties
from profiles.elastic import check_elastic_properties
from profiles.reading import as_messages


def validate_cluster_profile(props: Any) -> list[dict[str, str]]:
    """`[]` when valid, else `[{"key": K, "message": M}, ...]`."""
    try:
        return as_messages(check_cluster_properties(props)[1])
    except Exception as error:  # GoCD must always get an answer it can show
        return [{"key": "", "message": f"the profile could not be checked ({type(error).__name__})"}]


def validate_elastic_profile(props: Any) -> list[dict[str, str]]:
    """`[]` when valid, else `[{"key": K, "message": M}, ...]`."""
    try:
        return as_messages(check_elastic_properties(props)[1])
    except Exception as error:  # GoCD must always get an answer it can show
        return [{"key": "", "message": f"the profile could not be checked ({type(error).__name__})"}]
