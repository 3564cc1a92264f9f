"""Serves a world over real HTTP on loopback with waitress (service/wsgi.py's WsgiServer), with what a
client's tests need around it: the calls counted by endpoint, the statuses answered, and faults a proxy
in front of GoCD would add.

`Faults` models the network between the client and GoCD, not GoCD: GoCD itself does not rate-limit its
read APIs (the only 429 in its source is the encryption API's, EncryptionControllerDelegate), so a 429
with `Retry-After` comes from a reverse proxy or API gateway in front of it, as do 502 and 503 (the
server restarting behind the proxy), and 504 when GoCD does not answer it in time. A seeded share of the
calls is answered so, before GoCD sees them, with the bodies nginx writes
(ngx_http_special_response.c's pages); `down_after` has the proxy answer every call past that many with
the first of `statuses`, as it does once GoCD behind it is gone; `delay_s` holds every call that long
first (the clock's sleep).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic_agent.clock import Clock, SystemClock
from elastic_agent.service.wsgi import WsgiServer
from tests.support.doubles.gocd_rest.app import Answer, GoCDRestApp, request_path, route_of, write
from tests.support.doubles.gocd_rest.world import World

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse

PROXY_STATUSES = (429, 502, 503, 504)
_PROXY_TEXT = {
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Temporarily Unavailable",
    504: "Gateway Time-out",
}
OTHER = "other"  # the calls to no endpoint the double serves


@dataclass(frozen=True)
class Faults:
    """A seeded `fraction` of the calls (to `endpoints`, default all) answered with one of `statuses` by
    the proxy in front (429 with `Retry-After: retry_after_s`), and `delay_s` before every call."""

    fraction: float = 0.0
    statuses: tuple[int, ...] = PROXY_STATUSES
    retry_after_s: int = 1
    delay_s: float = 0.0
    seed: int = 0
    endpoints: frozenset[str] | None = None
    down_after: int | None = None  # calls (to `endpoints`) answered before GoCD is gone behind the proxy

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"the share of faulty calls must be between 0 and 1, not {self.fraction}")
        if not self.statuses or not set(self.statuses) <= set(PROXY_STATUSES):
            raise ValueError(f"a proxy in front of GoCD answers {PROXY_STATUSES}, not {self.statuses}")
        if self.delay_s < 0 or self.retry_after_s < 0:
            raise ValueError("a delay and a Retry-After cannot be negative")


class CallCounter(Counter[Any]):
    """A Counter whose `add` may be called from several threads at once."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def add(self, key: Any) -> None:
        with self._lock:
            self[key] += 1


@dataclass
class ServedGoCD:
    url: str  # http://127.0.0.1:PORT/go
    world: World
    calls: CallCounter  # endpoint name -> calls, faulted ones included
    answers: CallCounter  # (endpoint name, status) -> calls
    tokens: dict[str, str]  # user name -> personal access token


class _Front:
    """The proxy in front and the call counting, around the application."""

    def __init__(self, app: GoCDRestApp, faults: Faults, served: ServedGoCD, clock: Clock) -> None:
        self._app, self._faults, self._served, self._clock = app, faults, served, clock
        self._random = random.Random(faults.seed)
        self._lock = threading.Lock()
        self._seen = 0  # calls to the faulty endpoints so far

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route, _ = route_of(request_path(environ))
        name = route.name if route else OTHER
        self._served.calls.add(name)
        if self._faults.delay_s:
            self._clock.sleep(self._faults.delay_s)
        answer = self._fault(name) or self._app.answer(environ)
        self._served.answers.add((name, answer.status))
        return write(answer, start_response)

    def _fault(self, name: str) -> Answer | None:
        faults = self._faults
        if faults.endpoints is not None and name not in faults.endpoints:
            return None
        with self._lock:
            self._seen += 1
            if faults.down_after is not None and self._seen > faults.down_after:
                status = faults.statuses[0]
            elif not faults.fraction or self._random.random() >= faults.fraction:
                return None
            else:
                status = self._random.choice(faults.statuses)
        title = f"{status} {_PROXY_TEXT[status]}"
        body = "\r\n".join(
            [
                "<html>",
                f"<head><title>{title}</title></head>",
                "<body>",
                f"<center><h1>{title}</h1></center>",
                "<hr><center>nginx</center>",
                "</body>",
                "</html>",
                "",
            ]
        )
        headers = (("Retry-After", str(faults.retry_after_s)),) if status == 429 else ()
        return Answer(status, body, "text/html", headers)


@contextmanager
def serve(
    world: World, *, faults: Faults | None = None, clock: Clock | None = None, threads: int = 8
) -> Iterator[ServedGoCD]:
    """The world served on 127.0.0.1 (a free port) until the block ends."""
    app = GoCDRestApp(world)
    served = ServedGoCD("", world, CallCounter(), CallCounter(), world.tokens)
    server = WsgiServer(
        _Front(app, faults or Faults(), served, clock or SystemClock()), "127.0.0.1", 0, threads
    )
    served.url = f"http://127.0.0.1:{server.port}/go"
    server.start()
    try:
        yield served
    finally:
        # Real time on purpose: how long the answers in flight may take to be written.
        server.stop(time.monotonic() + 2.0)
