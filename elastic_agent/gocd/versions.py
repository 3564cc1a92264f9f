"""The versions of the plugin's two halves: the jar GoCD loads (the bridge) and this backend.

Both come from one build (the image carries the jar, and its init container copies it into GoCD's
plugins directory), and only a jar and a backend of one release are tested together: a jar of another
release may forward requests, or expect answers, that this backend does not know. So each says its
version on every request: the jar in `X-GoCD-Reuse-Bridge-Version`, the backend in
`X-GoCD-Reuse-Backend-Version` on every answer. While they differ, GoCD shows a health warning and the
plugin status page shows the difference at the top, in a sentence that says what to do.

The comparison is pure (`version_problem`); `BridgeVersions` only remembers the version the last request
carried, for the server-ping (health) and the status page. A jar older than the header sends none.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from elastic_agent import __version__

BRIDGE_VERSION_HEADER = "X-GoCD-Reuse-Bridge-Version"
BACKEND_VERSION_HEADER = "X-GoCD-Reuse-Backend-Version"
BRIDGE_VERSION_ENVIRON = "HTTP_X_GOCD_REUSE_BRIDGE_VERSION"  # the request header, as WSGI names it
HEALTH_KEY = "version:bridge"  # the server-health message while the versions differ
UPGRADING = "docs/install.md, Upgrading"
# What a version looks like (Maven's and Python's both: 0.1.0, 1.2.0-SNAPSHOT, 1.2.0rc1+local). Anything
# else is shown cut short and stripped to these characters: it reaches a health message and a page.
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_~-]{0,63}")
_SHOWN_AT_MOST = 64


@dataclass(frozen=True)
class Versions:
    """The jar's version as its last request said it (None: it said none) and this backend's."""

    bridge: str | None
    backend: str

    @property
    def problem(self) -> str | None:
        return version_problem(self.bridge, self.backend)


def readable(header: str | None) -> str | None:
    """A header's version as shown to people: None when absent or blank; otherwise the value, or, when
    it does not look like a version, its letters and digits cut short (never an error: a jar of any
    release may send anything there)."""
    if header is None:
        return None
    value = header.strip()
    if not value:
        return None
    if _VERSION.fullmatch(value):
        return value
    kept = re.sub(r"[^0-9A-Za-z.+_~-]", "?", value)[:_SHOWN_AT_MOST]
    return f"'{kept}' (not a version)"


def version_problem(bridge_version: str | None, backend_version: str) -> str | None:
    """The sentence for people when the jar and the backend are not of one release; None when they are.
    `bridge_version` None: the jar is too old to say its version."""
    remedy = f"install the jar and the backend of one release ({UPGRADING})."
    if bridge_version is None:
        return (
            f"The plugin's jar does not say its version (it is older than its backend, version "
            f"{backend_version}): {remedy}"
        )
    if bridge_version == backend_version:
        return None
    return (
        f"The plugin's jar is version {bridge_version} but its backend is version {backend_version}: "
        f"{remedy}"
    )


class BridgeVersions:
    """The jar's version as the last plugin request carried it. Requests arrive on many threads; the
    lock makes `seen` and `current` see one whole state."""

    def __init__(self, backend: str = __version__) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._current: Versions | None = None  # None until the first request
        self._header: str | None = None  # the header that gave `_current`, as it came

    def seen(self, header: str | None) -> bool:
        """Record the version a request carried (its header's value, None without one); True when it is
        another than the last request's. Every plugin request calls this: the same header as the last
        one costs a comparison."""
        with self._lock:
            current = self._current
            if current is not None and header == self._header:
                return False
            bridge = readable(header)
            self._header = header
            if current is not None and current.bridge == bridge:
                return False
            self._current = Versions(bridge, self.backend)
            return True

    def current(self) -> Versions | None:
        """The versions as of the last request; None before any."""
        with self._lock:
            return self._current
