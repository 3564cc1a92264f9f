"""A token kept in a file that Kubernetes may rewrite while the backend runs.

Two tokens reach the backend as files: the pod's service-account token (kubelet replaces the projected
file well before the token expires) and, run as a sidecar, the bridge contract's shared token (a Secret
the administrator may rotate). A process that read either once would be refused from the next rotation
on. `TokenFile.current()` checks the file before each use (one `stat`, about a microsecond) and reads
it again only when it changed, so a rotation never leaves a window of refused calls. A file that
cannot be read or is empty for a moment (kubelet swaps a symlink) keeps the last good token.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

log = logging.getLogger(__name__)


class TokenFileError(Exception):
    """The file cannot give a token at start; the message names the file and says why."""


class TokenFile:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()  # one reader of a changed file at a time; guards _seen and _value
        try:
            self._seen = self._stat()
        except OSError as error:
            raise TokenFileError(f"cannot read the token file {path}: {error.strerror}") from None
        self._value = self._read()
        if not self._value:
            raise TokenFileError(f"the token file {path} is empty")

    @property
    def path(self) -> Path:
        return self._path

    def current(self) -> str:
        """The token now; never empty. Never raises."""
        try:
            seen = self._stat()
        except OSError:
            return self._value
        if seen == self._seen:
            return self._value
        with self._lock:
            if seen != self._seen:
                try:
                    value = self._read()
                except TokenFileError as error:
                    log.warning("%s; still using the token read before", error)
                    return self._value
                if value:
                    self._value = value
                    log.info("the token file %s changed: using the token it holds now", self._path)
                self._seen = seen
            return self._value

    def _stat(self) -> tuple[int, int, int]:
        stat = self._path.stat()
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _read(self) -> str:
        try:
            return self._path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise TokenFileError(f"cannot read the token file {self._path}: {error.strerror}") from None

    def __repr__(self) -> str:  # the path, never the token
        return f"TokenFile({str(self._path)!r})"
