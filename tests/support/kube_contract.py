"""The API servers the Kubernetes contract runs against: the fake and a real kube-apiserver, each with a
namespace of the test's own and ServiceAccount `plugin` bound to exactly the project's Role.

The contract's tests (the adapter's calls, and those of the status reports) take a server as the fixture
`server` (both kinds), `expiring` (one that compacts on demand) or `real` (the real one alone); they
talk to it as the adapter does and as an admin, a scheduler or a kubelet would."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from elastic_agent.clock import SystemClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.fake_kube_store import FakeKubeStore
from tests.support.control_plane import ControlPlane
from tests.support.kube_fixtures import pod_manifest, wait_for
from tests.support.paths import ROOT

ROLE_PATH = ROOT / "docker" / "kubernetes" / "rbac" / "role.yaml"
MERGE = "application/merge-patch+json"
OURS = {"reuse.gocd.org/plugin-id": "plugin", "reuse.gocd.org/server-id": "server-1",
        "reuse.gocd.org/cluster": "c1"}  # fmt: skip
THEIRS = {**OURS, "reuse.gocd.org/server-id": "server-2"}
FAKE_ADMIN_TOKEN = "contract-admin-token"
GRACE_S = 30  # the real server's default grace period (terminationGracePeriodSeconds), the fake's here
WAIT_S = 20.0  # generous: a watch event arrives in milliseconds, a compaction within seconds


def plugin_role() -> dict[str, Any]:
    """The project's Role, exactly: the adapter must manage with these permissions."""
    role: dict[str, Any] = yaml.safe_load(ROLE_PATH.read_text())
    return role


@dataclass
class Server:
    """One API server as the contract sees it, with a namespace of the test's own.

    `token` is the bearer token of ServiceAccount `plugin`, bound to docker/kubernetes/rbac/role.yaml;
    `admin` is a client that may do anything (the real server's admin certificate, the fake's admin
    token)."""

    kind: str  # fake | real
    url: str
    namespace: str
    token: str
    ca_path: str | None
    admin: client.CoreV1Api
    new_namespace: Callable[[], str]
    # (ServiceAccount name, Role rules) → a token of that account, allowed those rules (none: nothing)
    token_for: Callable[[str, list[dict[str, Any]]], str]
    expire: Callable[[str], None]  # make this resourceVersion (and all before it) too old to watch from
    # the fake's: bind these rules cluster-wide to ServiceAccount `plugin` (on the real server,
    # tests/contracts/test_kube_contract_reports.py binds a ClusterRole)
    grant_cluster: Callable[[list[dict[str, Any]]], None] = lambda rules: None
    _adapters: list[KubeCluster] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    # clients

    def api(self, token: str | None) -> client.CoreV1Api:
        """The official client as this bearer token alone (None: no credentials at all)."""
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.retries = 0
        if self.ca_path is not None:
            configuration.ssl_ca_cert = self.ca_path
        if token is not None:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.CoreV1Api(client.ApiClient(configuration))

    def adapter(self, token: str | None = None, *, synced: bool = True, **options: Any) -> KubeCluster:
        """The product's adapter for OURS in the namespace, started (and synced, unless told not to
        wait); stopped when the test ends."""
        settings: dict[str, Any] = {"watch_timeout": 1, "request_timeout": 10.0, "backoff_initial": 0.05,
                                    "backoff_max": 0.5}  # fmt: skip
        settings.update(options)
        ca_pem = Path(self.ca_path).read_text() if self.ca_path else None
        cluster = KubeCluster.connect(self.namespace, OURS, SystemClock(), url=self.url,
                                      token=token or self.token, ca_cert=ca_pem, **settings)  # fmt: skip
        self._adapters.append(cluster)
        cluster.start()
        if synced:
            assert cluster.wait_synced(WAIT_S), cluster.sync_problem()
        return cluster

    def stop(self) -> None:
        for cluster in self._adapters:
            cluster.stop()
        for cleanup in self.cleanups:
            cleanup()

    # as the admin

    def create(self, name: str, labels: dict[str, str] | None = None, namespace: str | None = None,
               **spec: Any) -> dict[str, Any]:  # fmt: skip
        manifest = pod_manifest(name, OURS if labels is None else labels)
        manifest["spec"].update(spec)
        resp = self.admin.create_namespaced_pod(namespace or self.namespace, manifest, _preload_content=False)
        return dict(json.loads(resp.data))

    def read(self, name: str) -> dict[str, Any] | None:
        """The pod as stored, None once it is gone."""
        try:
            resp = self.admin.read_namespaced_pod(name, self.namespace, _preload_content=False)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(json.loads(resp.data))

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.admin.patch_namespaced_pod(name, self.namespace, body, _content_type=MERGE,
                                               _preload_content=False)  # fmt: skip
        return dict(json.loads(resp.data))

    def delete(self, name: str, **options: Any) -> dict[str, Any]:
        resp = self.admin.delete_namespaced_pod(name, self.namespace, body=options, _preload_content=False)
        return dict(json.loads(resp.data))

    # what a scheduler and a kubelet do, as the admin

    def bind(self, name: str, node: str = "contract-node") -> None:
        """The scheduler's pods/binding. (Unparsed: the classic client cannot read the Status answered.)"""
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
        self.admin.create_namespaced_pod_binding(name, self.namespace, binding, _preload_content=False)

    def write_status(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """The kubelet's merge patch of pods/status."""
        resp = self.admin.patch_namespaced_pod_status(name, self.namespace, patch, _content_type=MERGE,
                                                      _preload_content=False)  # fmt: skip
        return dict(json.loads(resp.data))

    def record_event(self, pod: str, reason: str, message: str, type_: str = "Normal",
                     when: str = "2030-01-01T00:00:00Z") -> None:  # fmt: skip
        event = {
            "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{pod}."},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": self.namespace},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": when, "lastTimestamp": when, "source": {"component": "kubelet"},
        }  # fmt: skip
        self.admin.create_namespaced_event(self.namespace, event, _preload_content=False)

    def finish_deletion(self, name: str) -> None:
        """What the kubelet does once the containers stopped: delete with grace period 0."""
        self.delete(name, gracePeriodSeconds=0)


def _fresh_name(prefix: str = "contract") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _fake_server() -> Iterator[Server]:
    """A fresh fake server per test, with the real server's default grace period, an admin token, and
    the adapter's token granted docker/kubernetes/rbac/role.yaml in the namespace."""
    fake = FakeKubeServer(FakeKubeStore(default_grace_seconds=GRACE_S), token=FAKE_ADMIN_TOKEN)
    fake.start()
    namespace, token = _fresh_name(), f"plugin-token-{uuid.uuid4().hex}"
    fake.api.add_service_account(token, namespace, "plugin")
    fake.api.grant(token, namespace, plugin_role()["rules"])

    def token_for(name: str, rules: list[dict[str, Any]]) -> str:
        other = f"{name}-token-{uuid.uuid4().hex}"
        fake.api.add_service_account(other, namespace, name)
        if rules:
            fake.api.grant(other, namespace, rules)
        return other

    server = Server("fake", fake.url, namespace, token, None, _client(fake.url, FAKE_ADMIN_TOKEN),
                    _fresh_name, token_for, lambda version: fake.store.compact(),
                    lambda rules: fake.api.grant(token, None, rules))  # fmt: skip
    try:
        yield server
    finally:
        server.stop()
        fake.stop()


def _client(url: str, token: str) -> client.CoreV1Api:
    configuration = client.Configuration()
    configuration.host = url
    configuration.retries = 0
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.CoreV1Api(client.ApiClient(configuration))


_ADMINS: dict[str, client.CoreV1Api] = {}


def _real_server(plane: ControlPlane) -> Iterator[Server]:
    """A fresh namespace on a running control plane; ServiceAccount `plugin` bound to the project's Role."""
    namespace = _fresh_name()
    plane.create_namespace(namespace)
    token = plane.service_account_token(namespace, "plugin")
    plane.apply_role(namespace, plugin_role(), "plugin")
    admin = _ADMINS.get(plane.url)
    if admin is None:
        admin = _ADMINS[plane.url] = client.CoreV1Api(plane.admin_api_client())

    def new_namespace() -> str:
        name = _fresh_name()
        plane.create_namespace(name)
        return name

    def expire(version: str) -> None:
        """Write revisions until the compactor has passed `version`: a watch from it reads from the next
        revision on, so once a list at exactly that next one answers 410 (from etcd), so does the watch."""
        ticks = f"/api/v1/namespaces/{namespace}/configmaps"
        following = int(version) + 1
        exact = f"/api/v1/namespaces/{namespace}/pods?resourceVersion={following}&resourceVersionMatch=Exact"

        def compacted() -> bool:
            plane.request("POST", ticks, body={"metadata": {"generateName": "tick-"}})
            return plane.request("GET", exact)[0] == 410

        assert wait_for(compacted, timeout=60, interval=0.25), f"resourceVersion {version} never compacted"

    def token_for(name: str, rules: list[dict[str, Any]]) -> str:
        other = plane.service_account_token(namespace, name)
        if rules:
            plane.apply_role(namespace, {"metadata": {"name": f"{name}-role"}, "rules": rules}, name)
        return other

    server = Server("real", plane.url, namespace, token, str(plane.ca_path), admin, new_namespace, token_for,
                    expire)  # fmt: skip
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["fake", "real"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "fake":
        yield from _fake_server()
    else:
        yield from _real_server(request.getfixturevalue("real_kube"))


@pytest.fixture(params=["fake", "real"])
def expiring(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server on which `expire()` makes a resourceVersion too old to watch from."""
    if request.param == "fake":
        yield from _fake_server()
    else:
        yield from _real_server(request.getfixturevalue("compacting_kube"))


@pytest.fixture
def real(real_kube: ControlPlane) -> Iterator[Server]:
    """The real server alone, for what the fake has no counterpart of."""
    yield from _real_server(real_kube)


def status_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The HTTP status `call(*args, **kwargs)` is refused with (fails the test when it is not refused)."""
    with pytest.raises(client.ApiException) as refused:
        call(*args, **kwargs)
    return int(refused.value.status)
