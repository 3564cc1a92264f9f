"""What the migrate-profiles tests share: a GoCD holding the official plugin's profiles (the admin API
double, tests/support/doubles/gocd_rest/admin_api.py, through `responses`), the fixtures, and the helpers that
run the command and read what it sent. The profiles' settings are written as GoCD stores and lists them
(ConfigurationPropertyRepresenter: a blank one is the key alone; a secure one its cipher text)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from elastic_agent.cli import main
from elastic_agent.service import migrate
from tests.support.doubles.gocd_rest.admin_model import (
    ADMIN,
    OFFICIAL_PLUGIN_ID,
    PLUGIN_ID,
    AdminState,
    encrypt,
)

SERVER = "https://gocd.example.com/go"
CLUSTERS_URL = SERVER + "/api/admin/elastic/cluster_profiles"
ELASTICS_URL = SERVER + "/api/elastic/profiles"
SITE_URLS_URL = SERVER + "/api/admin/config/server/site_urls"
OLD, NEW = OFFICIAL_PLUGIN_ID, PLUGIN_ID
ACCEPT = {
    "/api/admin/elastic/cluster_profiles": "application/vnd.go.cd.v1+json",
    "/api/elastic/profiles": "application/vnd.go.cd.v2+json",
    "/api/admin/plugin_info/": "application/vnd.go.cd.v7+json",
    "/api/admin/config/server/site_urls": "application/vnd.go.cd.v1+json",
}

TOKEN = "gocd-pat-5f1c9a0e7d3b42c8a6e1f0b9"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ0FGRQ==\n-----END CERTIFICATE-----\n"
# GoCD's cipher text of the secrets (the double's, in GoCD's "AES:<iv>:<data>" shape): copied as it is,
# never decrypted here, never shown; GoCD decrypts it only to have the plugin validate it.
PROD_TOKEN = encrypt("prod-service-account-token")
PROD_CA = encrypt(PEM)
STAGING_TOKEN = encrypt("staging-service-account-token")
SECRETS = (
    TOKEN,
    PROD_TOKEN,
    PROD_CA,
    STAGING_TOKEN,
    "prod-service-account-token",
    "staging-service-account-token",
)

POD_YAML = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gocd-agent-{{ POD_POSTFIX }}\nspec:\n  containers:\n"
    "  - name: gocd-agent-container-{{ CONTAINER_POSTFIX }}\n"
    "    image: {{ GOCD_AGENT_IMAGE }}:{{ LATEST_VERSION }}\n"
)

# Settings as GoCD stores and lists them (ConfigurationPropertyRepresenter): a blank one is the key alone.
PROD_PROPERTIES = [
    {"key": "go_server_url", "value": "https://gocd.example.com/go"},
    {"key": "kubernetes_cluster_url", "value": "https://k8s.example.com:6443"},
    {"key": "namespace", "value": "gocd-agents"},
    {"key": "security_token", "encrypted_value": PROD_TOKEN},
    {"key": "kubernetes_cluster_ca_cert", "encrypted_value": PROD_CA},
    {"key": "cluster_request_timeout", "value": "10000"},
    {"key": "pending_pods_count", "value": "10"},
    {"key": "auto_register_timeout", "value": "10"},
]
STAGING_PROPERTIES = [
    {"key": "go_server_url", "value": "https://gocd.example.com/go"},
    {"key": "kubernetes_cluster_url"},
    {"key": "namespace", "value": "staging"},
    {"key": "security_token", "encrypted_value": STAGING_TOKEN},
    {"key": "kubernetes_cluster_ca_cert"},
]
SMALL_PROPERTIES = [
    {"key": "Image", "value": "gocd/gocd-agent-wolfi:v25.4.0"},
    {"key": "MaxMemory", "value": "1G"},
    {"key": "MaxCPU", "value": "0.5"},
    {"key": "Environment", "value": "JAVA_HOME=/opt/java\nMAKE_OPTS=-j8"},
    {"key": "Privileged", "value": "false"},
    {"key": "PodSpecType", "value": "properties"},
]
YAML_PROPERTIES = [
    {"key": "PodSpecType", "value": "yaml"},
    {"key": "PodConfiguration", "value": POD_YAML},
    {"key": "Privileged", "value": "false"},
]
STAGING_AGENT_PROPERTIES = [
    {"key": "Image", "value": "gocd/gocd-agent-wolfi:v25.4.0"},
    {"key": "SpecifiedUsingPodConfiguration", "value": "false"},
]


def cluster(id_: str, plugin_id: str, properties: list[dict[str, str]]) -> dict[str, Any]:
    return {"id": id_, "plugin_id": plugin_id, "properties": properties}


def elastic(id_: str, cluster_id: str, properties: list[dict[str, str]]) -> dict[str, Any]:
    return {"id": id_, "cluster_profile_id": cluster_id, "properties": properties}


def server(
    *clusters: dict[str, Any], elastics: tuple[dict[str, Any], ...] = (), **options: Any
) -> AdminState:
    """A GoCD with security on, the admin's token, both plugins loaded, a secure site URL, and two
    cluster profiles of the official plugin with three elastic profiles, a profile of another plugin
    (to be left alone), and `clusters` and `elastics` after them."""
    settings: dict[str, Any] = {
        "require_auth": True,
        "tokens": {TOKEN: ADMIN},
        "plugins": {NEW: "active", OLD: "active"},
        "site_url": "http://gocd.example.com:8153",
        "secure_site_url": "https://gocd.example.com/go",
    }
    state = AdminState(**{**settings, **options})
    for profile in (
        cluster("k8s-prod", OLD, PROD_PROPERTIES),
        cluster("k8s-staging", OLD, STAGING_PROPERTIES),
        cluster(
            "docker", "cd.go.contrib.elastic-agent.docker", [{"key": "docker_uri", "value": "unix:///x"}]
        ),
        *clusters,
    ):
        state.cluster_profiles[profile["id"]] = profile
    for profile in (
        elastic("small", "k8s-prod", SMALL_PROPERTIES),
        elastic("yaml-pod", "k8s-prod", YAML_PROPERTIES),
        elastic("staging-agent", "k8s-staging", STAGING_AGENT_PROPERTIES),
        elastic("docker-agent", "docker", [{"key": "Image", "value": "alpine"}]),
        *elastics,
    ):
        state.elastic_profiles[profile["id"]] = profile
    return state


@pytest.fixture
def gocd() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture(autouse=True)
def not_in_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service account's namespace file, absent (as outside a pod) unless a test writes it."""
    path = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(migrate, "SERVICE_ACCOUNT_NAMESPACE", path)
    return path


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "gocd-token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


def run(token_file: Path, *options: str) -> int:
    return main(["migrate-profiles", "--server", SERVER, "--token-file", str(token_file), *options])


def posts(gocd: responses.RequestsMock) -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(call.request.url), json.loads(call.request.body or b""))
        for call in gocd.calls
        if call.request.method == "POST"
    ]


def asked(gocd: responses.RequestsMock) -> list[str]:
    return [f"{call.request.method} {str(call.request.url)[len(SERVER) :]}" for call in gocd.calls]


EXPECTED_CLUSTERS = {
    "k8s-prod-reuse": {"id": "k8s-prod-reuse", "plugin_id": NEW, "properties": PROD_PROPERTIES},
    "k8s-staging-reuse": {"id": "k8s-staging-reuse", "plugin_id": NEW, "properties": STAGING_PROPERTIES},
}
EXPECTED_ELASTICS = {
    "small-reuse": {
        "id": "small-reuse",
        "cluster_profile_id": "k8s-prod-reuse",
        "properties": SMALL_PROPERTIES,
    },
    "yaml-pod-reuse": {
        "id": "yaml-pod-reuse",
        "cluster_profile_id": "k8s-prod-reuse",
        "properties": YAML_PROPERTIES,
    },
    "staging-agent-reuse": {
        "id": "staging-agent-reuse",
        "cluster_profile_id": "k8s-staging-reuse",
        "properties": STAGING_AGENT_PROPERTIES,
    },
}
