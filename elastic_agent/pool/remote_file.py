"""Fetching the pod templates of `PodSpecType=remote` profiles: http(s) only, with a time limit and a
size limit, cached per URL so that a burst of create-agent requests costs one download.

Messages name the URL by scheme, host and path only: query strings and user info often carry access
tokens, and these messages reach logs and the job's console.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import requests

from elastic_agent.caching import digest
from elastic_agent.clock import Clock
from elastic_agent.request_log import hide_query_values
from profiles.values import safe_url

DOWNLOAD_LOCKS = 64


class RemoteFileError(Exception):
    """A remote pod template could not be fetched; the message is safe to show."""


class RemoteFileFetcher:
    """`fetch(url)` returns the file's text. Thread-safe. Successful fetches are cached for `ttl_s`
    seconds of the injected clock; failures are not cached, so a fixed file is picked up at once."""

    def __init__(
        self,
        clock: Clock,
        timeout_s: float = 10.0,
        max_bytes: int = 1024 * 1024,
        ttl_s: float = 300.0,
        session: requests.Session | None = None,
    ) -> None:
        self._clock = clock
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._session = session or requests.Session()
        hide_query_values()  # urllib3's DEBUG request lines would show a URL's access token
        # Keyed by a digest of the URL: its query string may carry an access token (caching.py).
        self._cache: dict[bytes, tuple[float, str]] = {}  # guarded by _lock
        self._lock = threading.Lock()
        # Concurrent requests for the same file wait for one download instead of each starting their own.
        # A fixed set of locks, picked by the URL's digest, so that no lock is kept per URL ever seen;
        # two URLs rarely share one, and then only wait for each other's download.
        self._download_locks = [threading.Lock() for _ in range(DOWNLOAD_LOCKS)]

    def fetch(self, url: str) -> str:
        shown = safe_url(url)
        try:
            scheme = urlsplit(url).scheme
        except ValueError:
            scheme = ""
        if scheme not in ("http", "https"):
            raise RemoteFileError(f"cannot fetch {shown}: only http:// and https:// URLs are supported")
        key = digest(url)
        cached = self._cached(key)
        if cached is not None:
            return cached
        with self._download_locks[key[0] % DOWNLOAD_LOCKS]:
            cached = self._cached(key)  # another thread may have fetched it while we waited
            if cached is not None:
                return cached
            text = self._download(url, shown)
            with self._lock:
                now = self._clock.now()
                for old in [k for k, (expires, _) in self._cache.items() if now >= expires]:
                    del self._cache[old]
                self._cache[key] = (now + self._ttl_s, text)
            return text

    def _cached(self, key: bytes) -> str | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if self._clock.now() >= entry[0]:
                del self._cache[key]
                return None
            return entry[1]

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
