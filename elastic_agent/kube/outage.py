"""Whether one Kubernetes API server answers, told by every call made to it: the one place that logs an
outage.

Why one place: if each caller logged its own failed calls, a kube-apiserver restart under a busy pool
would flood the log (one line per pod per retry from the annotation writer, one per reconnect from
urllib3, one per watch retry, one per retirement) and bury the one fact that matters, that the server is
away (benchmarks/RESULTS.md section 7 counts the lines of a restart with and without it). So the port
(`adapter.KubeCluster`, the simulation's in-process port) reports every call here: a call without an
answer (`Unreachable`) and any answer, even an error status (the server is there then). The tracker writes

- one WARNING at the first failure ("... is unreachable: <reason>; jobs go on being assigned from
  memory"),
- at most one WARNING "still unreachable after N s (K calls failed)" every `reminder_s` (5 minutes),
- one WARNING "reachable again after N s" at the first answer,

and the callers log their own failures of an outage at DEBUG. GoCD shows one server-health message for
the outage: `problem()` is the cluster's sync problem while it lasts (executors/server_ping.py), and its
sentence does not change from ping to ping, so the message is sent once and cleared at recovery.

Durations are on the injected clock. Thread-safe: the watch thread, the annotation writer and request
threads all report here; a call that works while nothing is wrong costs one attribute read.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from elastic_agent.clock import Clock
from elastic_agent.kube.port import Unreachable

log = logging.getLogger(__name__)

REMINDER_S = 300.0


class OutageTracker:
    def __init__(self, url: str, clock: Clock, reminder_s: float = REMINDER_S) -> None:
        self.url = url
        self._clock = clock
        self._reminder_s = reminder_s
        self._lock = threading.Lock()
        self._since: float | None = None  # when the first call of the current outage failed
        self._reason = ""
        self._failures = 0  # calls failed in the current outage
        self._said_at = 0.0  # when the latest line about the current outage was written
        self._recoveries = 0

    @property
    def recoveries(self) -> int:
        """How many outages have ended: a retry schedule started in an earlier one is obsolete."""
        return self._recoveries

    def down(self) -> bool:
        return self._since is not None

    def failed(self, reason: str) -> None:
        """A call got no answer; `reason` names the failure (never a header or a credential)."""
        now = self._clock.now()
        with self._lock:
            self._failures += 1
            if self._since is None:
                self._since, self._reason, self._said_at = now, reason, now
                log.warning(
                    "the Kubernetes API at %s is unreachable: %s; jobs go on being assigned from memory, "
                    "and the pods' state is written once it answers again",
                    self.url,
                    reason,
                )
            elif now - self._said_at >= self._reminder_s:
                self._said_at = now
                log.warning(
                    "the Kubernetes API at %s is still unreachable after %.0f s (%d calls failed): %s",
                    self.url,
                    now - self._since,
                    self._failures,
                    reason,
                )

    def reached(self) -> None:
        """A call got an answer (any status)."""
        if self._since is None:  # the usual case, without the lock: one read of a reference
            return
        now = self._clock.now()
        with self._lock:
            if self._since is None:
                return
            log.warning(
                "the Kubernetes API at %s is reachable again after %.0f s (%d calls failed meanwhile)",
                self.url,
                now - self._since,
                self._failures,
            )
            self._since, self._failures = None, 0
            self._recoveries += 1

    def problem(self) -> Unreachable | None:
        """The outage as an error, with the same sentence for as long as it lasts; None when there is
        none."""
        with self._lock:
            since, reason = self._since, self._reason
        if since is None:
            return None
        when = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return Unreachable(
            f"the Kubernetes API at {self.url} has not answered since {when} ({reason}); jobs go on being "
            "assigned from memory, and the pods' state is written once it answers again"
        )


def failure_reason(err: BaseException) -> str:
    """What went wrong with a call that got no answer, in a few words: the failure's class and the
    operating system's words (`MaxRetryError` wraps the last attempt's error). Never headers or tokens."""
    inner = getattr(err, "reason", None)
    if isinstance(inner, BaseException):
        err = inner
    todo: list[BaseException] = [err]
    while todo:  # the causes, and the exceptions an error carries in its args (urllib3's ProtocolError)
        seen = todo.pop(0)
        if words := _os_words(seen):
            return f"{type(err).__name__} ({words[:100].lower()})"
        todo += [e for e in (seen.__cause__, seen.__context__, *seen.args) if isinstance(e, BaseException)]
        if len(todo) > 20:
            break
    return type(err).__name__


def _os_words(error: BaseException) -> str:
    """The operating system's words for a socket error ("Connection refused"), or ""."""
    if not isinstance(error, OSError):
        return ""
    if error.strerror:
        return error.strerror
    # http.client's RemoteDisconnected has no errno, only its sentence.
    return str(error) if isinstance(error, ConnectionError) else ""
