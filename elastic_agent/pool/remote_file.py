"""Fetching the pod templates of `PodSpecType=remote` profiles: http(s) only, with a time limit and a
size limit, one download per URL at a time, and the last good copy kept.

A template is read on the assignment path too (should-assign-work renders the job's pod to know its
fingerprint), which must never wait on the network. So a copy older than `ttl_s` is still served and
refreshed in the background; a refresh that fails keeps the copy, and `problems()` says so (the
backend shows it in GoCD's health messages) until a refresh works again. Only the very first fetch of
a URL waits for the download, and only where the caller may wait (`fetch(url, wait=False)` starts it in
the background and raises).

Messages name the URL by scheme, host and path only: query strings and user info often carry access
tokens, and these messages reach logs and the job's console.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import requests

from elastic_agent.background import Background, WorkerThread
from elastic_agent.caching import digest
from elastic_agent.clock import Clock
from elastic_agent.request_log import hide_query_values
from profiles.values import safe_url

log = logging.getLogger(__name__)

DOWNLOAD_LOCKS = 64
# A copy of a URL no request asked for during this long is dropped, so that a backend that runs for
# months keeps no copy of every template URL it ever saw.
FORGET_AFTER_S = 24 * 3600.0


class RemoteFileError(Exception):
    """A remote pod template could not be fetched; the message is safe to show."""


@dataclass
class _Copy:
    text: str
    shown: str  # the URL as messages name it
    fetched_at: float
    used_at: float
    failing_since: float | None = None  # the first refresh that failed since the last that worked
    failure: str = ""
    refreshing: bool = False


class RemoteFileFetcher:
    """`fetch(url)` returns the file's text. Thread-safe. Times are the injected clock's."""

    def __init__(
        self,
        clock: Clock,
        timeout_s: float = 10.0,
        max_bytes: int = 1024 * 1024,
        ttl_s: float = 300.0,
        session: requests.Session | None = None,
        background: Background | None = None,
    ) -> None:
        self._clock = clock
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._session = session or requests.Session()
        self._background = background if background is not None else WorkerThread("remote-templates")
        hide_query_values()  # urllib3's DEBUG request lines would show a URL's access token
        # Keyed by a digest of the URL: its query string may carry an access token (caching.py).
        self._copies: dict[bytes, _Copy] = {}  # guarded by _lock
        self._fetching: set[bytes] = set()  # first downloads started in the background; guarded by _lock
        self._lock = threading.Lock()
        # Concurrent requests for the same file wait for one download instead of each starting their own.
        # A fixed set of locks, picked by the URL's digest, so that no lock is kept per URL ever seen;
        # two URLs rarely share one, and then only wait for each other's download.
        self._download_locks = [threading.Lock() for _ in range(DOWNLOAD_LOCKS)]

    def fetch(self, url: str, *, wait: bool = True) -> str:
        """The file's text: the copy kept (refreshed in the background once older than the ttl), else
        downloaded now; with `wait=False` a first download is started in the background and this raises
        RemoteFileError."""
        shown = safe_url(url)
        try:
            scheme = urlsplit(url).scheme
        except ValueError:
            scheme = ""
        if scheme not in ("http", "https"):
            raise RemoteFileError(f"cannot fetch {shown}: only http:// and https:// URLs are supported")
        key = digest(url)
        now = self._clock.now()
        with self._lock:
            copy = self._copies.get(key)
            if copy is not None:
                copy.used_at = now
                if now - copy.fetched_at >= self._ttl_s and not copy.refreshing:
                    copy.refreshing = True
                    self._background.submit(f"refreshing the pod template at {shown}",
                                            lambda: self._refresh(key, url))  # fmt: skip
                return copy.text
            if not wait:
                if key not in self._fetching:
                    self._fetching.add(key)
                    self._background.submit(f"fetching the pod template at {shown}",
                                            lambda: self._first_in_background(key, url, shown))  # fmt: skip
                raise RemoteFileError(f"the pod template at {shown} is being fetched")
        return self._first(key, url, shown)

    def problems(self) -> dict[str, tuple[str, float]]:
        """Each template whose refresh fails now, by its URL as messages name it: a sentence for GoCD's
        health messages, and since when it fails."""
        with self._lock:
            return {
                copy.shown: (
                    f"The pod template at {copy.shown} cannot be refreshed since {_when(copy.failing_since)} "
                    f"({copy.failure}); pods are created from the copy fetched at {_when(copy.fetched_at)}",
                    copy.failing_since,
                )
                for copy in self._copies.values()
                if copy.failing_since is not None
            }

    def _first(self, key: bytes, url: str, shown: str) -> str:
        try:
            with self._download_locks[key[0] % DOWNLOAD_LOCKS]:
                with self._lock:
                    copy = self._copies.get(key)  # another thread may have fetched it while we waited
                if copy is not None:
                    return copy.text
                text = self._download(url, shown)
                self._keep(key, text, shown)
                return text
        finally:
            with self._lock:
                self._fetching.discard(key)

    def _first_in_background(self, key: bytes, url: str, shown: str) -> None:
        try:
            self._first(key, url, shown)
        except RemoteFileError as error:
            log.warning("%s", error)  # the next request that needs it tries again

    def _refresh(self, key: bytes, url: str) -> None:
        shown = safe_url(url)
        try:
            text = self._download(url, shown)
        except RemoteFileError as error:
            with self._lock:
                copy = self._copies.get(key)
                if copy is not None:
                    copy.refreshing = False
                    copy.failure = str(error)
                    if copy.failing_since is None:
                        copy.failing_since = self._clock.now()
                        log.warning("%s; going on with the copy fetched earlier", error)
            return
        self._keep(key, text, shown)

    def _keep(self, key: bytes, text: str, shown: str) -> None:
        with self._lock:
            now = self._clock.now()
            for old in [k for k, copy in self._copies.items() if now - copy.used_at > FORGET_AFTER_S]:
                del self._copies[old]
            previous = self._copies.get(key)
            if previous is not None and previous.failing_since is not None:
                log.info("the pod template at %s can be refreshed again", shown)
            self._copies[key] = _Copy(text, shown, now, now)

    def _download(self, url: str, shown: str) -> str:
        # The overall deadline is real (monotonic) time, not the injected clock: the network runs in real
        # time even when the plugin's clock is scaled or virtual. requests' own timeout only bounds each
        # socket operation, so a server trickling bytes needs this second bound.
        deadline = time.monotonic() + self._timeout_s
        try:
            with self._session.get(url, timeout=self._timeout_s, stream=True) as response:
                if response.status_code != 200:
                    status = response.status_code
                    raise RemoteFileError(f"fetching {shown} failed: the server answered HTTP {status}")
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self._max_bytes:
                    raise RemoteFileError(self._too_large(shown))
                body = bytearray()
                for chunk in response.iter_content(chunk_size=64 * 1024):
                    body.extend(chunk)
                    if len(body) > self._max_bytes:
                        raise RemoteFileError(self._too_large(shown))
                    if time.monotonic() > deadline:
                        raise RemoteFileError(f"fetching {shown} took longer than {self._timeout_s:g}s")
        except RemoteFileError:
            raise
        # requests' own messages repeat the full URL, query string included: describe the failure instead.
        except requests.exceptions.Timeout:
            raise RemoteFileError(f"fetching {shown} took longer than {self._timeout_s:g}s") from None
        except requests.exceptions.SSLError:
            raise RemoteFileError(f"fetching {shown} failed: TLS certificate not trusted") from None
        except requests.exceptions.TooManyRedirects:
            raise RemoteFileError(f"fetching {shown} failed: too many redirects") from None
        except requests.exceptions.ConnectionError:
            raise RemoteFileError(f"fetching {shown} failed: could not connect to the server") from None
        except requests.exceptions.RequestException as error:
            raise RemoteFileError(f"fetching {shown} failed ({type(error).__name__})") from None
        try:
            return bytes(body).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise RemoteFileError(f"the file at {shown} is not UTF-8 text") from None

    def _too_large(self, shown: str) -> str:
        return f"the file at {shown} is larger than the limit of {self._max_bytes} bytes"


def _when(at: float | None) -> str:
    return datetime.fromtimestamp(at or 0.0, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
