"""Server-health messages in GoCD: one per problem, replaced as a whole (GoCD's add-messages replaces
all earlier messages of the plugin), cleared when the problems go away."""

from __future__ import annotations

import logging
import threading

from elastic_agent.gocd.server import GoCDError, GoCDServer

log = logging.getLogger(__name__)


class HealthReporter:
    def __init__(self) -> None:
        self._problems: dict[str, tuple[str, str]] = {}  # key -> (type, message)
        self._sent: list[dict[str, str]] | None = None
        self._lock = threading.Lock()

    def problem(self, key: str, message: str, kind: str = "error") -> None:
        with self._lock:
            self._problems[key] = (kind, message)

    def resolved(self, key: str) -> None:
        with self._lock:
            self._problems.pop(key, None)

    def messages(self) -> list[dict[str, str]]:
        with self._lock:
            return [{"type": kind, "message": text} for kind, text in sorted(self._problems.values())]

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
