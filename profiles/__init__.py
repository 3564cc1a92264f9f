"""Cluster and elastic profiles: fields, metadata, validation, views, and rendering a profile into a pod
template. The lowest layer: imports nothing from `elastic_agent` or `executors`."""

from profiles.cluster import ClusterProfile
from profiles.elastic import ElasticProfile
from profiles.errors import ProfileError
from profiles.metadata import cluster_profile_metadata, elastic_profile_metadata
from profiles.pod_template import instantiate, render_pod_template
from profiles.validation import validate_cluster_profile, validate_elastic_profile
from profiles.views import cluster_profile_view, elastic_profile_view

__all__ = [
    "ClusterProfile",
    "ElasticProfile",
    "ProfileError",
    "cluster_profile_metadata",
    "cluster_profile_view",
    "elastic_profile_metadata",
    "elastic_profile_view",
    "instantiate",
    "render_pod_template",
    "validate_cluster_profile",
    "validate_elastic_profile",
]
