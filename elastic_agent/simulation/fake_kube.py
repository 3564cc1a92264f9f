"""A fake Kubernetes API server over real HTTP, for the official `kubernetes` client.

It speaks the REST conventions the plugin relies on (pods CRUD, label selectors, resourceVersion and 409
on a stale merge patch, watch with timeouts, resume and 410 Gone, events, pod logs, nodes, discovery) on
top of `FakeKubeStore`, and what a scheduler and a kubelet write (pods/binding, pods/status, events),
plus a seam for fault injection (`FakeKubeApi.faults`: chosen calls answer an error status or are
delayed, given by the tests' tests/support/doubles/fake_kube_faults.py), and the whole server can become
unreachable, a bearer token can be demanded, and every call can be forbidden. Tokens of service accounts
can be granted a Role's rules in a namespace (`add_service_account`, `grant`): what they may do is
decided as RBAC decides it, so that 401 and 403 come as from a real server.
tests/contracts/test_kube_contract.py runs the same tests on this fake and on a real kube-apiserver.

Run alone: `python -m elastic_agent.simulation.fake_kube --bind 127.0.0.1:0 [--kubelet]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from elastic_agent.clock import Clock, ScaledClock, SystemClock
from elastic_agent.simulation.fake_kube_disruption import Disruptions
from elastic_agent.simulation.fake_kube_logs import log_container
from elastic_agent.simulation.fake_kube_objects import (
    POD_FIELDS,
    Obj,
    StoreError,
    list_body,
    parse_field_selector,
    parse_label_selector,
    reason_for,
    selected,
    status_body,
    watch_event,
)
from elastic_agent.simulation.fake_kube_rbac import NON_RESOURCE, ServiceAccount, request_attributes
from elastic_agent.simulation.fake_kube_store import FakeKubeStore

JSON = "application/json"


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str

    @property
    def is_watch(self) -> bool:
        q = self.query.lower()
        return "watch=true" in q or "watch=1" in q


_POD_LIST = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_POD_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")
_POD_STATUS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/status$")
_POD_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_POD_EVICTION = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")
_BUDGETS = re.compile(r"^/apis/policy/v1/namespaces/([^/]+)/poddisruptionbudgets(?:/([^/]+))?$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
_CONFIG_MAPS = re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?$")

_API_RESOURCES = [
    {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs}
    for name, namespaced, kind, verbs in [
        ("pods", True, "Pod", ["create", "delete", "get", "list", "patch", "watch"]),
        ("pods/binding", True, "Binding", ["create"]),
        ("pods/log", True, "Pod", ["get"]),
        ("pods/status", True, "Pod", ["get", "patch"]),
        ("pods/eviction", True, "Eviction", ["create"]),
        ("events", True, "Event", ["create", "list"]),
        ("configmaps", True, "ConfigMap", ["create", "get", "update"]),
        ("nodes", False, "Node", ["get", "list"]),
        ("namespaces", False, "Namespace", ["get", "list"]),
    ]
]


class InjectedFault(Protocol):
    """What a matching request meets: `delay` real seconds, then `status` (None: the normal answer)."""

    @property
    def status(self) -> int | None: ...
    @property
    def delay(self) -> float: ...
    @property
    def message(self) -> str: ...


class RequestFaults(Protocol):
    """The fault injection a test puts into `FakeKubeApi.faults` (tests/support/doubles/fake_kube_faults.py):
    `latency` real seconds before every request, and the fault, if any, a request meets."""

    @property
    def latency(self) -> float: ...
    def take(self, method: str, path: str) -> InjectedFault | None: ...


class FakeKubeApi:
    """The WSGI application. Settings a test may flip at any time: `token` (expected bearer token, None:
    any; its holder may do anything, as a cluster admin), `forbidden` (every call 403), `unreachable`
    (connections are dropped without an answer), `faults` (None: none), `watch_poll` (how often an idle watch
    looks for changes, real seconds), and the service accounts (`add_service_account`, `grant`)."""

    def __init__(self, store: FakeKubeStore, token: str | None = None) -> None:
        self.store = store
        self.disruptions = Disruptions(store)
        self.token = token
        self.service_accounts: dict[str, ServiceAccount] = {}  # by bearer token
        self.forbidden = False
        self.unreachable = False
        # A seam, not an injector: the demo has no faults, the tests put theirs here.
        self.faults: RequestFaults | None = None
        self.watch_poll = 0.05
        self.requests: deque[RequestRecord] = deque(maxlen=100_000)
        self._closed = threading.Event()
        self._generation = 0  # bumped to cut open watch streams (outage, shutdown)

    def cut_streams(self) -> None:
        self._generation += 1

    def add_service_account(self, token: str, namespace: str, name: str) -> None:
        """A token that authenticates as ServiceAccount `name` of `namespace`, allowed nothing yet (403)."""
        self.service_accounts[token] = ServiceAccount(f"system:serviceaccount:{namespace}:{name}")

    def grant(self, token: str, namespace: str | None, rules: Sequence[Mapping[str, Any]]) -> None:
        """Bind a Role with these rules (as in a Role manifest) in `namespace` to the token's account;
        `namespace` None: a ClusterRole bound by a ClusterRoleBinding (every namespace, and the
        cluster-scoped resources such as nodes)."""
        self.service_accounts[token].rules.setdefault(namespace, []).extend(rules)

    def close(self) -> None:
        self._closed.set()
        self.cut_streams()

    # -- WSGI ----------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"].upper()
        path = environ.get("PATH_INFO", "") or "/"
        query_string = environ.get("QUERY_STRING", "")
        self.requests.append(RequestRecord(method, path, query_string))
        query = {k: v[-1] for k, v in parse_qs(query_string, keep_blank_values=True).items()}
        faults = self.faults  # once: a test may put faults in while requests are under way
        try:
            if faults is not None and faults.latency > 0:
                time.sleep(faults.latency)  # network latency: real time, no model time involved
            self._check_auth(environ, method, path, query)
            fault = faults.take(method, path) if faults is not None else None
            if fault is not None:
                if fault.delay > 0:
                    time.sleep(fault.delay)
                if fault.status is not None:
                    raise StoreError(fault.status, reason_for(fault.status), fault.message)
            status, body, content_type = self._route(method, path, query, environ)
        except StoreError as err:
            status, body, content_type = err.code, status_body(err.code, err.reason, err.message), JSON
        if isinstance(body, Iterator):
            start_response(f"{status} OK", [("Content-Type", JSON), ("Cache-Control", "no-cache")])
            return body
        if status == 204:
            start_response("204 No Content", [])
            return [b""]
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        start_response(
            f"{status} {reason_for(status)}",
            [("Content-Type", content_type), ("Content-Length", str(len(data)))],
        )
        return [data]

    def _check_auth(self, environ: dict[str, Any], method: str, path: str, query: Mapping[str, str]) -> None:
        header = str(environ.get("HTTP_AUTHORIZATION") or "")
        account = self.service_accounts.get(header.removeprefix("Bearer ")) if header.startswith("Bearer ") \
            else None  # fmt: skip
        if account is None and self.token is not None and header != f"Bearer {self.token}":
            raise StoreError(401, "Unauthorized", "Unauthorized")
        if self.forbidden:
            raise StoreError(403, "Forbidden", "pods is forbidden: User cannot perform this action")
        if account is None or path.rstrip("/") in NON_RESOURCE:
            return  # the admin's token (or anyone's, without one), or discovery (any authenticated user)
        namespace, verb, resource, name = request_attributes(method, path.rstrip("/"), query)
        if not account.allows(namespace, verb, resource, name):
            what = f'{resource.partition("/")[0]} "{name}"' if name else resource.partition("/")[0]
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise StoreError(403, "Forbidden", f'{what} is forbidden: User "{account.user}" cannot {verb} '
                                               f'resource "{resource}" in API group "" {where}')  # fmt: skip

    def _route(self, method: str, path: str, query: dict[str, str], environ: dict[str, Any]) -> Any:
        path = path.rstrip("/") or "/"
        store = self.store
        if method == "GET" and path in ("/version", "/api", "/api/v1", "/apis"):
            return 200, self._discovery(path), JSON
        if method == "GET" and path == "/api/v1/nodes":
            return 200, list_body("NodeList", store.list_nodes(), store.resource_version), JSON
        if method == "GET" and path == "/api/v1/pods":
            return self._list_or_watch(None, query, environ)
        if m := _POD_LIST.match(path):
            if method == "GET":
                return self._list_or_watch(m.group(1), query, environ)
            if method == "POST":
                return 201, store.create_pod(m.group(1), _json_body(environ)), JSON
        if (m := _POD.match(path)) and method in ("GET", "PATCH", "DELETE"):
            ns, name = m.groups()
            if method == "GET":
                return 200, store.get_pod(ns, name), JSON
            if method == "PATCH":
                content_type = environ.get("CONTENT_TYPE", JSON)
                return 200, store.patch_pod(ns, name, _json_body(environ), content_type), JSON
            grace, uid = _delete_options(query, environ)
            return 200, store.delete_pod(ns, name, grace, uid=uid), JSON
        if (m := _POD_STATUS.match(path)) and method in ("GET", "PATCH"):
            ns, name = m.groups()
            if method == "GET":
                return 200, store.get_pod(ns, name), JSON
            content_type = environ.get("CONTENT_TYPE", JSON)
            return 200, store.patch_status(ns, name, _json_body(environ), content_type), JSON
        if (m := _POD_BINDING.match(path)) and method == "POST":
            body = _json_body(environ)
            target = (body.get("target") or {}) if isinstance(body, dict) else {}
            if not target.get("name"):
                raise StoreError(422, "Invalid", "Binding is invalid: target.name: Required value")
            uid = ((body.get("metadata") or {}).get("uid")) or None
            store.bind_pod(m.group(1), m.group(2), str(target["name"]), uid)
            return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "code": 201}, JSON  # fmt: skip
        if (m := _POD_EVICTION.match(path)) and method == "POST":
            status, answer = self.disruptions.evict(m.group(1), m.group(2), _json_body(environ))
            return status, answer, JSON
        if m := _BUDGETS.match(path):
            return self._budgets(method, m.group(1), m.group(2), environ)
        if (m := _POD_LOG.match(path)) and method == "GET":
            return self._pod_log(m.group(1), m.group(2), query)
        if (m := _EVENTS.match(path)) and method == "GET":
            items, rv = store.list_events(m.group(1), query.get("fieldSelector"))
            return 200, list_body("EventList", items, rv), JSON
        if (m := _EVENTS.match(path)) and method == "POST":
            return 201, store.create_event(m.group(1), _json_body(environ)), JSON
        if m := _CONFIG_MAPS.match(path):
            return self._config_maps(method, m.group(1), m.group(2), environ)
        if method == "GET" and path == "/api/v1/namespaces":
            names = sorted({p["metadata"]["namespace"] for p in store.list_pods(None)[0]} | {"default"})
            items = [{"metadata": {"name": n}, "status": {"phase": "Active"}} for n in names]
            return 200, list_body("NamespaceList", items, store.resource_version), JSON
        message = f"the server could not find the requested resource ({method} {path})"
        raise StoreError(404, "NotFound", message)

    def _budgets(self, method: str, ns: str, name: str | None, environ: dict[str, Any]) -> Any:
        budgets = self.disruptions
        if name is None and method == "GET":
            meta = {"resourceVersion": str(self.store.resource_version)}
            listed = {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": meta}
            return 200, {**listed, "items": budgets.list(ns)}, JSON
        if name is None and method == "POST":
            return 201, budgets.create(ns, _json_body(environ)), JSON
        if name is not None and method == "GET":
            return 200, budgets.get(ns, name), JSON
        if name is not None and method == "DELETE":
            return 200, budgets.delete(ns, name), JSON
        raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on poddisruptionbudgets")

    def _config_maps(self, method: str, ns: str, name: str | None, environ: dict[str, Any]) -> Any:
        maps = self.store.config_maps
        if name is None and method == "POST":
            return 201, maps.create(ns, _json_body(environ)), JSON
        if name is not None and method == "GET":
            return 200, maps.get(ns, name), JSON
        if name is not None and method == "PUT":
            return 200, maps.replace(ns, name, _json_body(environ)), JSON
        raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on configmaps here")

    def _pod_log(self, ns: str, name: str, query: dict[str, str]) -> tuple[int, str, str]:
        """As kube-apiserver's `LogLocation`: the container first (fake_kube_logs.py: 400 for none of
        several, or one the pod lacks), then the node. A pod without a node has no kubelet to ask (204,
        no content), a node the cluster does not know is a 404 (the real message names it as a pod,
        sic); the fake's nodes (`store.nodes`) answer as a kubelet: 400 for a container that has not
        run, else the log the simulated kubelet wrote."""
        pod = self.store.get_pod(ns, name)
        container = log_container(pod, query.get("container"))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return 204, "", "text/plain"
        if node not in self.store.nodes:
            raise StoreError(404, "NotFound", f'pods "{node}" not found')
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        return 200, self.store.get_log(ns, name, tail, container), "text/plain"

    def _discovery(self, path: str) -> Obj:
        if path == "/version":
            return {
                "major": "1", "minor": "30", "gitVersion": "v1.30.0-fake", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2024-04-17T00:00:00Z", "goVersion": "go1.22.2",
                "compiler": "gc", "platform": "linux/amd64",
            }  # fmt: skip
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": _API_RESOURCES}

    def _list_or_watch(self, ns: str | None, query: dict[str, str], environ: dict[str, Any]) -> Any:
        labels = query.get("labelSelector")
        fields = query.get("fieldSelector")
        if (query.get("watch") or "").lower() in ("true", "1"):
            timeout = float(query.get("timeoutSeconds") or 1800)
            # Validate the selectors and resourceVersion now, so mistakes are a 400, not a broken stream.
            parse_label_selector(labels)
            parse_field_selector(fields, POD_FIELDS)
            rv_text = query.get("resourceVersion") or ""
            if rv_text and not rv_text.isdigit():
                raise StoreError(400, "BadRequest", f"invalid resource version: {rv_text!r}")
            bookmarks = (query.get("allowWatchBookmarks") or "").lower() in ("true", "1")
            gone = _client_gone(environ.get("werkzeug.socket"))
            return 200, self._watch(ns, labels, fields, rv_text, timeout, bookmarks, gone), JSON
        items, rv = self.store.list_pods(ns, labels, fields)
        return 200, list_body("PodList", items, rv), JSON

    def _watch(
        self,
        ns: str | None,
        labels_text: str | None,
        fields_text: str | None,
        rv_text: str,
        timeout: float,
        bookmarks: bool,
        gone: Callable[[], bool] = lambda: False,
    ) -> Iterator[bytes]:
        labels, fields = parse_label_selector(labels_text), parse_field_selector(fields_text)
        store, generation = self.store, self._generation
        # The watch's own timeout is a property of the HTTP request (real seconds), not of model time:
        # a ManualClock would never advance while this thread waits.
        started = time.monotonic()
        deadline = started + timeout
        next_bookmark = _next_bookmark(started, deadline) if bookmarks else None
        yield b""  # sends the headers now, as a real server does, so the client's call returns
        if rv_text in ("", "0"):  # no version: start with the current state, as the real server does
            items, rv = store.list_pods(ns, labels_text, fields_text)
            for item in items:
                yield watch_event("ADDED", item)
            if bookmarks:  # and says where the current state ends, as kube-apiserver 1.27+ does
                yield _bookmark(rv, {"k8s.io/initial-events-end": "true"})
        else:
            rv = int(rv_text)
        while not self._closed.is_set() and generation == self._generation and not gone():
            current = store.resource_version
            changes = store.changes_since(rv)
            if changes is None:
                message = "The resourceVersion for the provided watch is too old."  # kube-apiserver's words
                yield watch_event("ERROR", status_body(410, "Expired", message))
                return
            for change in changes:
                rv = change.resource_version
                if ns is not None and change.namespace != ns:
                    continue
                was, is_ = selected(change.previous, labels, fields), selected(change.obj, labels, fields)
                if change.type == "DELETED" or (was and not is_):
                    kind = "DELETED" if was else ""
                else:
                    kind = ("MODIFIED" if was else "ADDED") if is_ else ""
                if kind:
                    yield watch_event(kind, change.obj)
            moment = time.monotonic()
            if next_bookmark is not None and moment >= next_bookmark and generation == self._generation:
                # Every change up to `current` has been sent: a client may resume from there.
                rv = max(rv, current)
                yield _bookmark(rv)
                next_bookmark = _next_bookmark(moment, deadline)
            remaining = deadline - moment
            if remaining <= 0:
                break
            store.wait_for_change(current, min(self.watch_poll, remaining))


def _client_gone(connection: socket.socket | None) -> Callable[[], bool]:
    """Whether the client of a watch has closed its end of `connection` (werkzeug's socket of the
    request; None: never). kube-apiserver ends such a watch at once: `WatchServer.HandleHTTP`
    (k8s.io/apiserver v0.36.3, pkg/endpoints/handlers/watch.go) returns on `req.Context().Done()`, which
    Go's net/http closes when its background read of the connection sees the client go
    (net/http/server.go, `connReader.backgroundRead`). werkzeug notices only when it next writes, so a
    watch left by its client would hold a server thread for the rest of its timeout while nothing
    changes, and a client that connects again and again would pile such threads up."""

    def gone() -> bool:
        if connection is None:
            return False
        try:
            readable, _, _ = select.select([connection], [], [], 0)
            return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # reset, or closed already
            return True

    return gone


def _next_bookmark(now: float, deadline: float) -> float | None:
    """When kube-apiserver's watch cache sends the next bookmark: a minute on, or 2 s before the watch
    ends if that is sooner, and none when that leaves less than a second (so a watch of 3 s or less gets
    none, and none comes at the end)."""
    at = min(now + 60.0, deadline - 2.0)
    return at if at > now + 1.0 else None


def _bookmark(rv: int, annotations: dict[str, str] | None = None) -> bytes:
    metadata: dict[str, Any] = {"resourceVersion": str(rv)}
    if annotations:
        metadata["annotations"] = annotations
    return watch_event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": metadata})


def _json_body(environ: dict[str, Any]) -> Any:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as err:
        raise StoreError(400, "BadRequest", f"the request body is not JSON: {err}") from err


def _delete_options(query: dict[str, str], environ: dict[str, Any]) -> tuple[float | None, str | None]:
    """The grace period (query or DeleteOptions body) and the uid precondition of a DELETE."""
    body = _json_body(environ)
    options = body if isinstance(body, dict) else {}
    uid = (options.get("preconditions") or {}).get("uid")
    if query.get("gracePeriodSeconds"):
        return float(query["gracePeriodSeconds"]), uid
    value = options.get("gracePeriodSeconds")
    return (None if value is None else float(value)), uid


class _Handler(WSGIRequestHandler):
    def parse_request(self) -> bool:
        ok = super().parse_request()
        api = getattr(self.server, "fake_api", None)
        if ok and api is not None and api.unreachable:
            # Drop the connection without an answer: the client sees the cluster as unreachable, also
            # on keep-alive connections it opened before the outage.
            self.close_connection = True
            return False
        return ok

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # a test fake answers thousands of calls; per-request lines would drown the test output


class FakeKubeServer:
    """Serves a FakeKubeApi on a background thread. `start()` returns the base URL."""

    def __init__(
        self,
        store: FakeKubeStore | None = None,
        *,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ) -> None:
        self.store = store if store is not None else FakeKubeStore(clock=clock or SystemClock())
        self.api = FakeKubeApi(self.store, token=token)
        self._host, self._port = host, port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake Kubernetes API server is not started")
        return f"http://{self._host}:{self._server.server_port}"

    def set_unreachable(self, unreachable: bool) -> None:
        self.api.unreachable = unreachable
        if unreachable:
            self.api.cut_streams()

    def bind(self) -> str:
        # A threaded server is needed because watches hold their connection open; werkzeug's
        # development server writes and flushes each chunk as the generator yields it, which is what a
        # streaming watch needs (waitress would buffer). It is a test fake, not production serving.
        self._server = make_server(self._host, self._port, self.api, threaded=True, request_handler=_Handler)
        self._server.fake_api = self.api  # type: ignore[attr-defined]
        return self.url

    def start(self) -> str:
        url = self.bind()
        assert self._server is not None
        server = self._server
        # A short poll interval: stop() waits for it, and tests start and stop many servers.
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), name="fake-kube", daemon=True
        )
        self._thread.start()
        return url

    def serve_forever(self) -> None:
        assert self._server is not None
        self._server.serve_forever()

    def stop(self) -> None:
        self.api.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A fake Kubernetes API server for tests and demos.")
    parser.add_argument("--bind", default="127.0.0.1:0", help="HOST:PORT (port 0 picks a free port)")
    parser.add_argument("--token", default=None, help="demand this bearer token (default: accept any)")
    parser.add_argument("--grace", type=float, default=0.0, help="graceful deletion period, seconds")
    parser.add_argument("--clock-factor", type=float, default=1.0, help="run model time this much faster")
    parser.add_argument("--kubelet", action="store_true", help="also run the simulated kubelet")
    parser.add_argument("--boot-delay", type=float, default=2.0, help="kubelet: seconds Pending→Running")
    args = parser.parse_args(argv)
    host, _, port = args.bind.rpartition(":")
    clock: Clock = SystemClock() if args.clock_factor == 1.0 else ScaledClock(args.clock_factor)
    store = FakeKubeStore(clock=clock, default_grace_seconds=args.grace)
    server = FakeKubeServer(store, host=host or "127.0.0.1", port=int(port or 0), token=args.token)
    url = server.bind()
    if args.kubelet:
        from elastic_agent.simulation.agents import NoAgents
        from elastic_agent.simulation.kubelet import SimulatedKubelet

        SimulatedKubelet(store, clock, NoAgents(), boot_delay=args.boot_delay).start()
    print(f"listening on {url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
