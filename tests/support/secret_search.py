"""Looking for secrets in what operators and pipeline authors can see: the forms a secret takes when
it leaks (as typed, JSON- or URL-escaped, base64-encoded at any alignment, a prefix or suffix), and a
capture of every log record of every logger, at every level.

Why the forms: a leak is rarely the plain value. A token goes out base64-encoded in a Basic header, a
URL quotes it percent-encoded, JSON escapes its slashes, a message truncates it. Searching the forms
catches those without knowing where the leak is.

Why every logger at every level: an operator may switch any logger to DEBUG (the backend's
--log-level, or a logging configuration), and third-party libraries (urllib3, the Kubernetes client)
log request lines and bodies there. Some set their own level (the Kubernetes client puts urllib3 at
WARNING): the capture makes every logger emit everything, so a leak cannot hide behind a level.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

import pytest

PREFIX_CHARS = 16


def _base64_cores(secret: bytes) -> set[str]:
    """The part of base64(x + secret + y) that does not depend on x and y, for each alignment of the
    secret in the encoded stream, in both alphabets."""
    cores: set[str] = set()
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + secret).decode()
            start = 4 if offset else 0  # the first quantum mixes the padding bytes in
            core = encoded[start:-4]  # the last quantum depends on what follows
            if len(core) >= 8:
                cores.add(core)
    return cores


def forms(secret: str) -> set[str]:
    """Every text whose presence means `secret` leaked."""
    found = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        *_base64_cores(secret.encode()),
    }
    if len(secret) > PREFIX_CHARS:
        found.update({secret[:PREFIX_CHARS], secret[-PREFIX_CHARS:]})
    return found


@dataclass(frozen=True)
class Secret:
    kind: str  # what it is, for the report: "bridge token", "registration key", ...
    value: str


@dataclass(frozen=True)
class Leak:
    sink: str  # log, page, answer, console, health, metrics, annotation, label, event, ...
    where: str
    kind: str
    form: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.kind} in {self.sink} ({self.where}) as {self.form!r}: ...{self.excerpt}..."


def find_leaks(secrets: Iterable[Secret], sink: str, texts: Iterable[tuple[str, str]]) -> list[Leak]:
    """Every (secret, text) where the text holds a form of the secret; `texts` are (where, text)."""
    searched = [(secret, sorted(forms(secret.value), key=len, reverse=True)) for secret in secrets]
    leaks = []
    for where, text in texts:
        for secret, variants in searched:
            for form in variants:
                at = text.find(form)
                if at >= 0:
                    excerpt = text[max(0, at - 60) : at + len(form) + 20].replace("\n", " ")
                    leaks.append(Leak(sink, where, secret.kind, form, excerpt))
                    break
    return leaks


class Records(logging.Handler):
    """Every record, formatted as an operator's log would show it (tracebacks included)."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.lines: list[tuple[str, str]] = []  # (logger name, formatted record)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception as error:  # a record that cannot be formatted is still searched by its parts
            text = f"{record.msg!r} {record.args!r} ({type(error).__name__})"
        self.lines.append((record.name, text))


@contextmanager
def every_log_record(monkeypatch: pytest.MonkeyPatch) -> Iterator[Records]:
    """Capture what every logger would write at DEBUG, whatever levels are set meanwhile."""
    records = Records()
    monkeypatch.setattr(logging.Logger, "isEnabledFor", lambda self, level: True)
    monkeypatch.setattr(logging, "disable", lambda level=logging.CRITICAL: None)
    root = logging.getLogger()
    root.addHandler(records)
    try:
        yield records
    finally:
        root.removeHandler(records)
