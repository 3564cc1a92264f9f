"""The three ways GoCD writes JSON, byte for byte, since a double that answers with other bytes hides a
client that depends on them:

- Jackson's DefaultPrettyPrinter (spark-base JsonOutputWriter: every representer, and MessageJson, the
  `{"message": ...}` body of a halt): objects open a line per field, indented two spaces per enclosing
  object, with `" : "` between name and value; arrays stay on the line, `[ a, b ]`, `[ ]` when empty;
  an empty object is `{ }`. Strings keep non-ASCII characters as they are.
- Gson's default (util JsonHelper.toJson: RoutesHelper.httpException, the body of a 400 or 404 thrown as
  an HttpException): compact, and HTML-safe, so `'` is written `\\u0027` (also `<`, `>`, `&`, `=`).
- Gson's pretty printing (newsecurity JsonErrorMessageRenderer: the 401 and 403 of the security
  filters): two-space indent, `": "`, HTML-safe like the default.

`Raw` lets a caller splice text rendered earlier (at the same nesting) into a document: the history
answers are pages of items each rendered once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_INDENT = "  "
_GSON_HTML = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "=": "\\u003d", "'": "\\u0027"}
    | {"\u2028": "\\u2028", "\u2029": "\\u2029"}
)


class Raw(str):
    """Text already written by `pretty` at the nesting where it is spliced in."""

    __slots__ = ()


def pretty(value: Any, nesting: int = 0) -> str:
    """`value` as Jackson's DefaultPrettyPrinter writes it inside `nesting` enclosing objects (arrays do
    not count: their items stay on the array's line)."""
    if isinstance(value, Raw):
        return value
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = "\n" + _INDENT * (nesting + 1)
        fields = f",{inner}".join(
            f"{_string(name)} : {pretty(item, nesting + 1)}" for name, item in value.items()
        )
        return "{" + inner + fields + "\n" + _INDENT * nesting + "}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(pretty(item, nesting) for item in value) + " ]"
    return _scalar(value)


def gson(value: Mapping[str, Any]) -> str:
    """A flat object as Gson's default writer writes it."""
    return "{" + ",".join(f"{_gson_string(name)}:{_gson_scalar(item)}" for name, item in value.items()) + "}"


def gson_pretty(value: Mapping[str, Any]) -> str:
    """A flat object as Gson's pretty printer writes it."""
    fields = ",\n".join(
        f"{_INDENT}{_gson_string(name)}: {_gson_scalar(item)}" for name, item in value.items()
    )
    return "{\n" + fields + "\n}"


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    raise TypeError(f"no JSON for a {type(value).__name__}")


def _gson_string(text: str) -> str:
    return _string(text).translate(_GSON_HTML)


def _gson_scalar(value: Any) -> str:
    return _gson_string(value) if isinstance(value, str) else _scalar(value)
