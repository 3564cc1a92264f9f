"""What every executor receives and returns, and how an unexpected failure is reported."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elastic_agent.backend import Backend
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.gocd.server import GoCDError, GoCDServer
from elastic_agent.redaction import request_values, traceback_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Response:
    status: int
    body: str

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(value))

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text)


class Incident(Exception):
    """An unexpected failure, already logged with its traceback under `incident`. Answers and console
    lines name only the id: an exception's text may carry anything, a secret included."""

    def __init__(self, incident: str) -> None:
        super().__init__(f"incident {incident}")
        self.incident = incident


def new_incident(where: str, request: object = None) -> str:
    """Log the exception being handled, with a fresh incident id, and return the id. `request`: the
    body of the request being answered (text or parsed): its values are hidden from the traceback,
    whose exception messages may quote them (elastic_agent/redaction.py)."""
    incident = uuid.uuid4().hex[:8]
    text = traceback_text(request_values(request))
    log.error("%s failed unexpectedly (incident %s)\n%s", where, incident, text)
    return incident


@dataclass
class RequestContext:
    backend: Backend
    callback_url: str | None

    def gocd(self) -> GoCDServer:
        return self.backend.gocd_servers.for_callback(self.callback_url)

    def console(self, job: JobIdentifier, text: str) -> None:
        """A line in the job's console; failing to write it never fails the request."""
        try:
            gocd = self.gocd()
        except GoCDError as error:
            log.warning("could not write to the console of %s: %s", job.label, error)
            return
        self.backend.narrator.console_now(gocd, job.to_json(), text)


Executor = Callable[[str, RequestContext], Response]
