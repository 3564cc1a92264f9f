"""What every executor receives and returns."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elastic_agent.backend import Backend
from elastic_agent.gocd import GoCDError, GoCDServer
from elastic_agent.messages import JobIdentifier

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
