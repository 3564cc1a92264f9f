"""What the backend knows of its GoCD server from server-info: its id and its site URLs.

The id goes into every pod's labels, so the first one is kept for the life of the process (GoCD's never
changes). The secure site URL is what a blank `go_server_url` stands for (profiles/server_url.py), and
an administrator may change it at any time: the official plugin asks server-info at every create-agent;
here it is asked once, then again at every server-ping while some cluster profile leaves
`go_server_url` blank (executors/server_ping.py), so a change reaches new pods within a minute, and
the requests that must never wait (should-assign-work, job-completion) read it from memory.

Locking: `_lock` guards `_info` and `_server_id`; GoCD is never asked while it is held.
"""

from __future__ import annotations

import threading

from elastic_agent.gocd.server import GoCDServer, ServerInfo
from profiles.cluster import ClusterProfile
from profiles.errors import ProfileError
from profiles.server_url import KEY, pods_server_url


class NoServerUrl(ProfileError):
    """The profile's go_server_url is blank and GoCD has no URL pods can use for it: no pod of the
    profile can be made (create-agent says why; should-assign-work has no pod of it to offer)."""


class ServerUrlUnknown(NoServerUrl):
    """The profile's go_server_url is blank and GoCD has not been asked yet, on a path that never waits
    (the first requests after a start; no pool exists then either)."""

    def __init__(self) -> None:
        super().__init__(KEY, "blank, and GoCD's secure site URL, which it stands for, is not known yet")


class KnownServer:
    def __init__(self) -> None:
        self._info: ServerInfo | None = None
        self._server_id: str | None = None
        self._lock = threading.Lock()

    def known(self) -> ServerInfo | None:
        with self._lock:
            return self._info

    def server_id(self) -> str | None:
        with self._lock:
            return self._server_id

    def get(self, gocd: GoCDServer) -> ServerInfo:
        """What is known, else GoCD's answer (asked now)."""
        known = self.known()
        return known if known is not None else self.refresh(gocd)

    def refresh(self, gocd: GoCDServer) -> ServerInfo:
        """Ask GoCD again (raises GoCDError when it cannot be asked; what was known stays)."""
        info = gocd.server_info()
        with self._lock:
            if self._server_id is None:
                self._server_id = info.server_id
            self._info = info
        return info

    def pods_url(self, cluster: ClusterProfile, gocd: GoCDServer | None) -> str:
        """The URL pods of `cluster` register with: its go_server_url, or GoCD's secure site URL when it
        is blank (asked from `gocd` if not known yet; with `gocd` None, ServerUrlUnknown instead).
        NoServerUrl with a sentence when GoCD has no URL pods can use."""
        if cluster.go_server_url:
            return cluster.go_server_url
        info = self.known()
        if info is None:
            if gocd is None:
                raise ServerUrlUnknown()
            info = self.refresh(gocd)
        try:
            return pods_server_url(info.secure_site_url, info.site_url)
        except ProfileError as error:
            raise NoServerUrl(error.key, error.message) from None
