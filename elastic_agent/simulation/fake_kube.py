"""A fake Kubernetes API server over real HTTP, for the official `kubernetes` client.

It speaks the REST conventions the plugin relies on (pods CRUD, label selectors, resourceVersion and 409
on a stale merge patch, watch with timeouts, resume and 410 Gone, events, pod logs, nodes, discovery) on
top of `FakeKubeStore`, plus fault injection: chosen calls answer an error status or are delayed, the
whole server can become unreachable, a bearer token can be demanded, and every call can be forbidden.

Run alone: `python -m elastic_agent.simulation.fake_kube --bind 127.0.0.1:0 [--kubelet]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from elastic_agent.clock import Clock, ScaledClock, SystemClock
from elastic_agent.simulation.fake_kube_objects import (
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
from elastic_agent.simulation.fake_kube_store import FakeKubeStore

JSON = "application/json"


@dataclass
class Fault:
    """Matching requests answer `status` (None: answer normally) after `delay` real seconds, `times`
    times (None: until removed)."""

    method: str | None
    path_pattern: re.Pattern[str]
    status: int | None
    delay: float
    times: int | None
    message: str
    hits: int = 0


@dataclass
class FaultRules:
    """Fault injection. `latency` slows every request down (real seconds: it models the network)."""

    latency: float = 0.0
    _rules: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(
        self,
        method: str | None = None,
        path_pattern: str = ".*",
        status: int | None = 500,
        delay: float = 0.0,
        times: int | None = 1,
        message: str = "injected fault",
    ) -> Fault:
        verb = method.upper() if method else None
        fault = Fault(verb, re.compile(path_pattern), status, delay, times, message)
        with self._lock:
            self._rules.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.latency = 0.0

    def take(self, method: str, path: str) -> Fault | None:
        """The first rule matching this request, consuming one of its `times`."""
        with self._lock:
            for fault in self._rules:
                if fault.method not in (None, method) or not fault.path_pattern.search(path):
                    continue
                fault.hits += 1
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._rules.remove(fault)
                return fault
            return None


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
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")

_API_RESOURCES = [
    {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs}
    for name, namespaced, kind, verbs in [
        ("pods", True, "Pod", ["create", "delete", "get", "list", "patch", "watch"]),
        ("pods/log", True, "Pod", ["get"]),
        ("events", True, "Event", ["list"]),
        ("nodes", False, "Node", ["get", "list"]),
        ("namespaces", False, "Namespace", ["get", "list"]),
    ]
]


class FakeKubeApi:
    """The WSGI application. Settings a test may flip at any time: `token` (expected bearer token, None:
    any), `forbidden` (every call 403), `unreachable` (connections are dropped without an answer),
    `faults`, and `watch_poll` (how often an idle watch looks for changes, real seconds)."""

    def __init__(self, store: FakeKubeStore, token: str | None = None) -> None:
        self.store = store
        self.token = token
        self.forbidden = False
        self.unreachable = False
        self.faults = FaultRules()
        self.watch_poll = 0.05
        self.requests: deque[RequestRecord] = deque(maxlen=100_000)
        self._closed = threading.Event()
        self._generation = 0  # bumped to cut open watch streams (outage, shutdown)

    def cut_streams(self) -> None:
        self._generation += 1

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
        try:
            if self.faults.latency > 0:
                time.sleep(self.faults.latency)  # network latency: real time, no model time involved
            self._check_auth(environ)
            fault = self.faults.take(method, path)
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
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        start_response(
            f"{status} {reason_for(status)}",
            [("Content-Type", content_type), ("Content-Length", str(len(data)))],
        )
        return [data]

    def _check_auth(self, environ: dict[str, Any]) -> None:
        if self.token is not None and environ.get("HTTP_AUTHORIZATION") != f"Bearer {self.token}":
            raise StoreError(401, "Unauthorized", "Unauthorized")
        if self.forbidden:
            raise StoreError(403, "Forbidden", "pods is forbidden: User cannot perform this action")

    def _route(self, method: str, path: str, query: dict[str, str], environ: dict[str, Any]) -> Any:
        path = path.rstrip("/") or "/"
        store = self.store
        if method == "GET" and path in ("/version", "/api", "/api/v1", "/apis"):
            return 200, self._discovery(path), JSON
        if method == "GET" and path == "/api/v1/nodes":
            return 200, list_body("NodeList", store.list_nodes(), store.resource_version), JSON
        if method == "GET" and path == "/api/v1/pods":
            return self._list_or_watch(None, query)
        if m := _POD_LIST.match(path):
            if method == "GET":
                return self._list_or_watch(m.group(1), query)
            if method == "POST":
                return 201, store.create_pod(m.group(1), _json_body(environ)), JSON
        if (m := _POD.match(path)) and method in ("GET", "PATCH", "DELETE"):
            ns, name = m.groups()
            if method == "GET":
                return 200, store.get_pod(ns, name), JSON
            if method == "PATCH":
                content_type = environ.get("CONTENT_TYPE", JSON)
                return 200, store.patch_pod(ns, name, _json_body(environ), content_type), JSON
            return 200, store.delete_pod(ns, name, _grace(query, environ)), JSON
        if (m := _POD_LOG.match(path)) and method == "GET":
            tail = int(query["tailLines"]) if query.get("tailLines") else None
            return 200, store.get_log(m.group(1), m.group(2), tail), "text/plain"
        if (m := _EVENTS.match(path)) and method == "GET":
            items, rv = store.list_events(m.group(1), query.get("fieldSelector"))
            return 200, list_body("EventList", items, rv), JSON
        if method == "GET" and path == "/api/v1/namespaces":
            names = sorted({p["metadata"]["namespace"] for p in store.list_pods(None)[0]} | {"default"})
            items = [{"metadata": {"name": n}, "status": {"phase": "Active"}} for n in names]
            return 200, list_body("NamespaceList", items, store.resource_version), JSON
        message = f"the server could not find the requested resource ({method} {path})"
        raise StoreError(404, "NotFound", message)

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

    def _list_or_watch(self, ns: str | None, query: dict[str, str]) -> Any:
        labels = query.get("labelSelector")
        fields = query.get("fieldSelector")
        if (query.get("watch") or "").lower() in ("true", "1"):
            timeout = float(query.get("timeoutSeconds") or 1800)
            # Validate the selectors and resourceVersion now, so mistakes are a 400, not a broken stream.
            parse_label_selector(labels)
            parse_field_selector(fields)
            rv_text = query.get("resourceVersion") or ""
            if rv_text and not rv_text.isdigit():
                raise StoreError(400, "BadRequest", f"invalid resource version: {rv_text!r}")
            bookmarks = (query.get("allowWatchBookmarks") or "").lower() in ("true", "1")
            return 200, self._watch(ns, labels, fields, rv_text, timeout, bookmarks), JSON
        items, rv = self.store.list_pods(ns, labels, fields)
        return 200, list_body("PodList", items, rv), JSON

    def _watch(
        self, ns: str | None, labels_text: str | None, fields_text: str | None, rv_text: str, timeout: float,
        bookmarks: bool,
    ) -> Iterator[bytes]:
        labels, fields = parse_label_selector(labels_text), parse_field_selector(fields_text)
        store, generation = self.store, self._generation
        # The watch's own timeout is a property of the HTTP request (real seconds), not of model time:
        # a ManualClock would never advance while this thread waits.
        deadline = time.monotonic() + timeout
        yield b""  # sends the headers now, as a real server does, so the client's call returns
        if rv_text in ("", "0"):  # no version: start with the current state, as the real server does
            items, rv = store.list_pods(ns, labels_text, fields_text)
            for item in items:
                yield watch_event("ADDED", item)
        else:
            rv = int(rv_text)
        while not self._closed.is_set() and generation == self._generation:
            current = store.resource_version
            changes = store.changes_since(rv)
            if changes is None:
                yield watch_event("ERROR", status_body(410, "Expired", f"too old resource version: {rv}"))
                return
            for change in changes:
                rv = change.resource_version
                if ns is not None and change.namespace != ns:
                    continue
                was, now = selected(change.previous, labels, fields), selected(change.obj, labels, fields)
                if change.type == "DELETED" or (was and not now):
                    kind = "DELETED" if was else ""
                else:
                    kind = ("MODIFIED" if was else "ADDED") if now else ""
                if kind:
                    yield watch_event(kind, change.obj)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            store.wait_for_change(current, min(self.watch_poll, remaining))
        if bookmarks and generation == self._generation:
            rv = max(rv, store.resource_version)
            marker = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}
            yield watch_event("BOOKMARK", marker)


def _json_body(environ: dict[str, Any]) -> Any:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as err:
        raise StoreError(400, "BadRequest", f"the request body is not JSON: {err}") from err


def _grace(query: dict[str, str], environ: dict[str, Any]) -> float | None:
    if query.get("gracePeriodSeconds"):
        return float(query["gracePeriodSeconds"])
    body = _json_body(environ)
    value = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
    return None if value is None else float(value)


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
    def faults(self) -> FaultRules:
        return self.api.faults

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
