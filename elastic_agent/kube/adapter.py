"""`ClusterPort` over the official `kubernetes` client: a cache of this plugin's pods kept by list + watch.

One daemon thread lists the pods matching the selector, then watches from the list's resourceVersion;
a watch that ends is resumed from the last version seen, a 410 Gone or an error leads to a fresh list
(after a backoff on the clock, for errors). Requests read the cache only. Writes update the cache from
their response at once (read-your-writes); which version of a pod wins is the cache's rule
(pod_cache.py); resourceVersions are opaque there, compared for equality only.

Every call's outcome goes to the port's `OutageTracker` (outage.py): a call without an answer raises
`Unreachable`, which the tracker logs once per outage; the watch's own retries are DEBUG lines then.

Objects are handled as plain dicts (`_preload_content=False` and `json.loads`): the generated model
classes cost far more CPU than the plugin needs and are not used anywhere.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from elastic_agent.clock import Clock
from elastic_agent.kube.connect import connect, disconnect
from elastic_agent.kube.outage import OutageTracker, failure_reason
from elastic_agent.kube.pod_cache import PodCache, epoch
from elastic_agent.kube.port import (
    ClusterError,
    Conflict,
    Forbidden,
    NotFound,
    PodListener,
    PodView,
    Unreachable,
    metadata_patch,
)
from elastic_agent.redaction import traceback_text
from profiles.values import safe_url

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


class _StreamBroken(ClusterError):
    """The open watch ended without its closing line. Alone it is no outage (connections get cut): the
    list that follows tells."""


class KubeCluster:
    """The plugin's view of one cluster profile's namespace. `selector` is the equality label selector
    of this backend's pods (plugin id, server id, cluster): nothing else is cached or created.

    The port owns `api_client`, and `stop()` closes it: a credential change builds a new port and stops
    the old one, whose sockets must go then, not whenever its last reference goes."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        selector: Mapping[str, str],
        clock: Clock,
        *,
        url: str | None = None,
        request_timeout: float = 10.0,
        watch_timeout: int = 120,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        self.namespace = namespace
        self.selector = dict(selector)
        self.clock = clock
        # Named in messages (logs, consoles, health, pages): never with user info or a query.
        self.url = safe_url(url or api_client.configuration.host)
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.api_calls: dict[str, int] = {}  # calls per verb: list, watch, create, patch, delete, ...
        self.outage = OutageTracker(self.url, clock)
        self._api_client = api_client
        self._core = client.CoreV1Api(api_client)
        self._label_selector = ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))
        self.cache = PodCache(self.selector, clock)
        # Guards api_calls, the open stream and the sync problem.
        self._lock = threading.RLock()
        # The sync loop's last failure, None once it works: kept as its parts, not as the exception the
        # watch thread caught, so that request threads raise exceptions of their own.
        self._problem: tuple[type[ClusterError], str, int | None] | None = None
        self._synced = threading.Event()
        self._on_synced: list[Callable[[], None]] = []  # guarded by _lock; called once, then dropped
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None  # the open watch response, closed by stop()
        # True while the watch thread waits for a list's or a watch's answer: a wait nothing can cut
        # short (the connection is urllib3's, in use), so stop() does not join a thread that is in it.
        self._awaiting_answer = False

    @classmethod
    def connect(
        cls,
        namespace: str,
        selector: Mapping[str, str],
        clock: Clock,
        *,
        url: str | None = None,
        token: str | None = None,
        ca_cert: str | None = None,
        **options: Any,
    ) -> KubeCluster:
        """Connect (see `connect.connect`) and build the adapter; `options` go to the constructor."""
        return cls(connect(url=url, token=token, ca_cert=ca_cert), namespace, selector, clock, **options)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            name = f"kube-watch-{self.namespace}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the watch thread, then close the client's connections (`disconnect`). A call through the
        port afterwards still works: the client opens a new connection for it."""
        self._stopped.set()
        with self._lock:
            stream, awaiting = self._stream, self._awaiting_answer
        if stream is not None:
            try:
                stream.shutdown()  # unblocks the watch thread's read
            except Exception:  # already closed: nothing to interrupt
                log.debug("closing the watch stream failed", exc_info=True)
        if self._thread is not None and not awaiting:
            self._thread.join(timeout=5)
        # A thread awaiting an answer is left to its request timeout (it is a daemon): it drops the
        # answer once it comes, and waiting for it here would hold a SIGTERM up to that timeout for
        # nothing, with a silent API server.
        disconnect(self._api_client)

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def on_synced(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self._synced.is_set():
                self._on_synced.append(callback)
                return
        callback()

    def _tell_synced(self) -> None:
        with self._lock:
            if self._synced.is_set():
                return
            self._synced.set()
            callbacks, self._on_synced = self._on_synced, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a faulty callback must not stop the watch
                log.error("a callback on the first pod list failed\n%s", traceback_text())

    def sync_problem(self) -> ClusterError | None:
        outage = self.outage.problem()  # one sentence for the whole outage: one health message in GoCD
        if outage is not None:
            return outage
        with self._lock:
            problem = self._problem
        if problem is None:
            return None
        kind, message, status = problem
        return kind(message, status)

    def _set_problem(self, err: ClusterError | None) -> None:
        with self._lock:
            self._problem = None if err is None else (type(err), str(err), err.status)

    def add_listener(self, listener: PodListener) -> None:
        self.cache.add_listener(listener)

    # -- reads (cache only) --------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        return self.cache.pods()

    def get(self, name: str) -> PodView | None:
        return self.cache.get(name)

    # -- writes --------------------------------------------------------------------------------------

    def create_pod(self, manifest: Mapping[str, Any]) -> PodView:
        body = dict(manifest)
        meta = dict(body.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        for key, value in self.selector.items():
            # A pod without our identity labels would be invisible to the watch and leak.
            if labels.setdefault(key, value) != value:
                raise ValueError(f"the pod's label {key}={labels[key]} contradicts this cluster's {value}")
        meta["labels"] = labels
        body["metadata"] = meta
        with self.cache.writing(str(meta.get("name") or "")) as write:
            resp = self._call("create", lambda: self._core.create_namespaced_pod(
                self.namespace, body, _preload_content=False,
                _request_timeout=self.request_timeout))  # fmt: skip
            return write.took(json.loads(resp.data))

    def patch_pod_metadata(
        self,
        name: str,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> PodView:
        patch = metadata_patch(labels, annotations, resource_version)
        # The classic client would pick strategic-merge for a dict body; force a JSON merge patch.
        with self.cache.writing(name) as write:
            resp = self._call("patch", lambda: self._core.patch_namespaced_pod(
                name, self.namespace, patch, _content_type=MERGE_PATCH,
                _preload_content=False, _request_timeout=self.request_timeout))  # fmt: skip
            return write.took(json.loads(resp.data))

    def delete_pod(self, name: str) -> None:
        with self.cache.writing(name) as write:
            try:
                resp = self._call("delete", lambda: self._core.delete_namespaced_pod(
                    name, self.namespace, _preload_content=False,
                    _request_timeout=self.request_timeout))  # fmt: skip
            except NotFound:
                write.removed()
                return
            obj = json.loads(resp.data)
            meta = obj.get("metadata") or {}
            # Graceful: the pod is still there, terminating; the watch will report it gone later.
            if meta.get("deletionTimestamp") and (meta.get("deletionGracePeriodSeconds") or 0) > 0:
                write.took(obj)
            else:
                write.removed()

    # -- other reads (API calls, for status reports) --------------------------------------------------

    def pod_events(self, name: str) -> list[dict[str, Any]]:
        resp = self._call("events", lambda: self._core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}",
            _preload_content=False, _request_timeout=self.request_timeout))  # fmt: skip
        events = [
            {
                "type": e.get("type"),
                "reason": e.get("reason"),
                "message": e.get("message"),
                "count": e.get("count") or 1,
                "last_seen": epoch(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")),
            }
            for e in json.loads(resp.data).get("items") or []
        ]
        return sorted(events, key=lambda e: e["last_seen"])

    def pod_log(self, name: str, tail_lines: int = 200, container: str | None = None) -> str:
        which = {"container": container} if container else {}
        resp = self._call("log", lambda: self._core.read_namespaced_pod_log(
            name, self.namespace, tail_lines=tail_lines, **which,
            _preload_content=False, _request_timeout=self.request_timeout))  # fmt: skip
        return bytes(resp.data).decode("utf-8", errors="replace")

    # -- the backend's own state (forecast/store.py) -------------------------------------------------

    def read_config_map(self, name: str) -> dict[str, str] | None:
        options = {"_preload_content": False, "_request_timeout": self.request_timeout}
        core, ns = self._core, self.namespace
        try:
            resp = self._call("configmaps", lambda: core.read_namespaced_config_map(name, ns, **options))
        except NotFound:
            return None
        return dict(json.loads(resp.data).get("data") or {})

    def write_config_map(self, name: str, data: Mapping[str, str]) -> None:
        # No resourceVersion: one backend writes it, and what it writes is all it learned.
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}
        options = {"_preload_content": False, "_request_timeout": self.request_timeout}
        core, ns = self._core, self.namespace
        try:
            self._call("configmaps", lambda: core.replace_namespaced_config_map(name, ns, body, **options))
        except NotFound:
            self._call("configmaps", lambda: core.create_namespaced_config_map(ns, body, **options))

    # -- calls and errors ----------------------------------------------------------------------------

    def _count(self, verb: str) -> None:
        with self._lock:
            self.api_calls[verb] = self.api_calls.get(verb, 0) + 1

    def _call(self, verb: str, call: Callable[[], Any]) -> Any:
        self._count(verb)
        try:
            answer = call()
        except ApiException as err:
            error = self._api_error(verb, err)
            if isinstance(error, Unreachable):
                self.outage.failed("TLS failure")
            else:
                self.outage.reached()  # an error status is an answer
            raise error from err
        except (urllib3.exceptions.HTTPError, OSError) as err:
            # The message names the server and the failure only: never headers, never the token.
            reason = failure_reason(err)
            self.outage.failed(reason)
            raise Unreachable(f"cannot reach the Kubernetes API at {self.url} ({verb}): {reason}") from err
        self.outage.reached()
        return answer

    def _api_error(self, verb: str, err: ApiException) -> ClusterError:
        status = int(err.status or 0)
        if status == 0:  # the client reports TLS failures as status 0
            return Unreachable(f"cannot reach the Kubernetes API at {self.url} ({verb}): TLS failure", None)
        detail = str(err.reason or "")
        try:
            body = json.loads(err.body) if err.body else {}
            detail = body.get("message") or detail
        except (ValueError, TypeError, AttributeError):
            pass
        message = f"the Kubernetes API at {self.url} answered {status} to {verb}: {detail}"
        if status == 409:
            return Conflict(message, status)
        if status == 404:
            return NotFound(message, status)
        if status in (401, 403):
            return Forbidden(message, status)
        return ClusterError(message, status)

    def retained(self) -> dict[str, int]:
        """What the port keeps besides the pods themselves, for /metrics and the soak."""
        return self.cache.retained()

    def retained_limits(self) -> dict[str, int]:
        return self.cache.retained_limits()

    # -- list + watch --------------------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.backoff_initial
        while not self._stopped.is_set():
            try:
                version = self._relist()
                while not self._stopped.is_set():
                    version, gone = self._watch(version)
                    self._set_problem(None)
                    delay = self.backoff_initial
                    if gone:
                        break  # our version is older than the server keeps: list afresh
            except ClusterError as err:
                self._fail(err)
            except Exception as err:  # never let the sync thread die, whatever the cause
                log.error("unexpected failure in the pod watch of %s\n%s", self.url, traceback_text())
                self._fail(ClusterError(f"unexpected failure watching {self.url}: {type(err).__name__}"))
            else:
                continue
            self._sleep(delay)
            delay = min(self.backoff_max, delay * 2)

    def _fail(self, err: ClusterError) -> None:
        if self._stopped.is_set():
            return
        if isinstance(err, _StreamBroken):
            log.info("%s; listing the pods again", err)
            return
        self._set_problem(err)
        if isinstance(err, Unreachable):
            log.debug("pod list/watch failed, retrying: %s", err)  # the outage is the tracker's to report
        else:
            log.warning("pod list/watch failed, retrying: %s", err)

    def _sleep(self, seconds: float) -> None:
        # On the clock, in slices, so stop() is honoured within a slice.
        end = self.clock.now() + seconds
        while not self._stopped.is_set() and (remaining := end - self.clock.now()) > 0:
            self.clock.sleep(min(remaining, 0.25))

    def _begin_awaiting(self) -> bool:
        """Marks the thread as awaiting an answer; False (and unmarked) when stop() came first."""
        with self._lock:
            self._awaiting_answer = not self._stopped.is_set()
            return self._awaiting_answer

    def _end_awaiting(self) -> None:
        with self._lock:
            self._awaiting_answer = False

    def _relist(self) -> str:
        started = self.cache.mark()
        if not self._begin_awaiting():
            return ""
        try:
            resp = self._call("list", lambda: self._core.list_namespaced_pod(
                self.namespace, label_selector=self._label_selector,
                _preload_content=False, _request_timeout=self.request_timeout))  # fmt: skip
        finally:
            self._end_awaiting()
        if self._stopped.is_set():  # stopped while the list was on its way: nobody waits for it now
            return ""
        body = json.loads(resp.data)
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        self.cache.replace(body.get("items") or [], started)
        self._tell_synced()
        self._set_problem(None)
        return version

    def _watch(self, version: str) -> tuple[str, bool]:
        """One watch request, until the server ends it; returns (last version seen, gone)."""
        if not self._begin_awaiting():
            return version, False
        try:
            # The server is silent while nothing changes: read timeout beyond the watch's own timeout.
            timeouts = (self.request_timeout, self.watch_timeout + self.request_timeout)
            resp = self._call("watch", lambda: self._core.list_namespaced_pod(
                self.namespace, label_selector=self._label_selector, watch=True, resource_version=version,
                timeout_seconds=int(self.watch_timeout), allow_watch_bookmarks=True, _preload_content=False,
                _request_timeout=timeouts))  # fmt: skip
        finally:
            self._end_awaiting()
        with self._lock:
            self._stream = resp
        try:
            if self._stopped.is_set():  # stop() came while the request was on its way
                return version, False
            for line in iter_resp_lines(resp):
                if self._stopped.is_set():
                    break
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return version, True
                    message = f"the watch at {self.url} failed: {obj.get('message')}"
                    raise ClusterError(message, obj.get("code"))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.cache.apply(kind, obj)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            if self._stopped.is_set():
                return version, False
            raise _StreamBroken(f"the pod watch at {self.url} broke off ({failure_reason(err)})") from err
        finally:
            with self._lock:
                self._stream = None
            resp.release_conn()
        return version, False
