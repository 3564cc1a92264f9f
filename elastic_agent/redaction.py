"""Hiding secrets in text the backend did not write itself: exception messages, pod logs, events.

Two layers, because neither is enough alone:
- **Patterns** (`redact`): what follows `token=`, `password:`, `Authorization: Bearer` and the like.
  They catch a secret whose value nobody told us, as long as it is written next to its name.
- **Known values** (`hide`): the values of the request being answered. Every secret GoCD gives the
  plugin (the cluster profile's security token and CA, a registration key, a resolved
  `{{SECRET:...}}`) arrives in a request, so an exception raised while answering it that quotes one,
  as `int(value)` or a Kubernetes validation error does, quotes a value of that request. Hiding every
  value, not only those that look secret, is on purpose: after GoCD resolves `{{SECRET:...}}` a secret
  looks like any other value. An incident's log is read to find *where* it failed, which the frames
  still say; what it failed on may be hidden.

Values shorter than `MIN_HIDDEN_CHARS` are left: hiding "true" or "2m" wherever they appear would make
every message unreadable and protect nothing a guess would not find.
"""

from __future__ import annotations

import contextlib
import json
import re
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

HIDDEN = "[hidden]"
MIN_HIDDEN_CHARS = 6

_SECRET_PATTERNS = (
    re.compile(r"(?i)(auto[-_ ]?register[-_ ]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+"),
    re.compile(r"(?i)((?:token|password|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+"),
    re.compile(r"(?i)(authorization:\s*(?:bearer|basic)\s+)\S+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
)
# A line's value after its name (`NAME=value`, `name: value`), which an exception may quote alone.
_NAMED_VALUE = re.compile(r"^[^=:\s]+\s*[=:]\s*(.+)$")


def redact(text: str) -> str:
    """`text` with whatever follows a secret's name hidden."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(r"\1" + HIDDEN, text)
    return text


def request_values(body: object) -> list[str]:
    """The strings to hide for a request: every string value in its body (JSON text, or already
    parsed), each line of a multi-line value, a line's value after its name and each word of a line,
    longest first (so that a value is hidden whole before any part of it)."""
    if isinstance(body, str):
        # Not JSON, or nested past the parser's depth: the text itself is the one value. This runs while
        # an unexpected failure is handled, so it must not fail itself.
        with contextlib.suppress(ValueError, RecursionError):
            body = json.loads(body)
    found: set[str] = set()
    for value in _strings(body):
        found.add(value)
        for line in value.splitlines():
            found.add(line.strip())
            found.update(line.split())
            named = _NAMED_VALUE.match(line.strip())
            if named:
                found.add(named.group(1).strip("\"' "))
    return sorted((v for v in found if len(v) >= MIN_HIDDEN_CHARS), key=len, reverse=True)


def hide(text: str, values: Iterable[str]) -> str:
    """`text` with each of `values` (longest first, as request_values gives them) and every
    pattern-matched secret hidden."""
    for value in values:
        if value in text:
            text = text.replace(value, HIDDEN)
    return redact(text)


def traceback_text(values: Iterable[str] = ()) -> str:
    """The exception being handled, as logging would print it, with `values` and every
    pattern-matched secret hidden: for the log line of a failure nobody expected."""
    return hide(traceback.format_exc().rstrip(), values)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-shaped value, walked with a stack (a body nested deeper than the
    interpreter's recursion limit must not end the incident's logging)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
