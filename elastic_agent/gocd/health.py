"""Server-health messages in GoCD: one per problem, replaced as a whole (GoCD's add-messages replaces
all earlier messages of the plugin), cleared when the problems go away.

A problem that repeats (the same refusal at every create-agent GoCD re-sends) may come with a `streak`:
while the key's streak is the same, the first message stays, so GoCD is not sent a new set of messages
for every refusal whose text differs only in a pod's name or a usage count."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection

from elastic_agent.gocd.server import GoCDError, GoCDServer

log = logging.getLogger(__name__)


class HealthReporter:
    def __init__(self) -> None:
        self._problems: dict[str, tuple[str, str]] = {}  # key -> (type, message); all guarded by _lock
        self._streaks: dict[str, object] = {}  # key -> the streak its message belongs to
        self._sent: list[dict[str, str]] | None = None
        self._lock = threading.Lock()

    def problem(self, key: str, message: str, kind: str = "error", streak: object = None) -> bool:
        """Record the problem; True when it is new (the key had none, or another streak's)."""
        with self._lock:
            if streak is not None and key in self._problems and self._streaks.get(key) == streak:
                return False
            self._problems[key] = (kind, message)
            self._streaks[key] = streak
            return True

    def resolved(self, key: str) -> bool:
        """Forget the problem; True when there was one."""
        with self._lock:
            self._streaks.pop(key, None)
            return self._problems.pop(key, None) is not None

    def keys(self, prefix: str) -> set[str]:
        """The keys of the problems recorded now that start with `prefix`."""
        with self._lock:
            return {key for key in self._problems if key.startswith(prefix)}

    def messages(self, without: Collection[str] = ()) -> list[dict[str, str]]:
        """The messages, but those of the keys `without` (a page that shows them in a place of their own)."""
        with self._lock:
            kept = [problem for key, problem in self._problems.items() if key not in without]
        return [{"type": kind, "message": text} for kind, text in sorted(kept)]

    def publish(self, gocd: GoCDServer) -> None:
        """Send the messages when they changed since the last successful send."""
        current = self.messages()
        with self._lock:
            if current == self._sent:
                return
        try:
            gocd.set_health_messages(current)
        except GoCDError as error:
            log.warning("could not update GoCD's server-health messages: %s", error)
            return
        with self._lock:
            self._sent = current
