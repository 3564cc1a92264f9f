"""Reading a JSON request body with typed accessors that explain what is wrong.

Every problem becomes a BadRequest whose message a person can act on; nothing here echoes a value that
might be a secret (property values are never quoted back).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# GoCD's counters and ids are Java longs. Bounding them here also keeps int() away from runs of digits
# it refuses (past 4,300) or misreads ("²" and "--1" pass str.isdigit()).
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_LONG_TEXT = re.compile(r"-?[0-9]{1,19}")


class BadRequest(Exception):
    """The request body is not what GoCD's elastic-agent protocol 5.0 says it must be."""


Properties = dict[str, str]


def read_json(text: str, where: str) -> Any:
    """Any JSON value, or a BadRequest that says why not."""
    if not text or not text.strip():
        raise BadRequest(f"{where}: the request body is empty; a JSON object was expected.")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise BadRequest(
            f"{where}: the request body is not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})."
        ) from None
    except RecursionError:
        # The C decoder recurses once per nesting level: `[[[[...` a hundred thousand deep exhausts
        # Python's stack. No GoCD body nests more than a few levels.
        raise BadRequest(f"{where}: the request body is nested too deeply to be a GoCD request.") from None
    except ValueError:
        raise BadRequest(f"{where}: the request body is not valid JSON.") from None


class Body:
    """A JSON object with typed accessors that explain what is wrong."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    @classmethod
    def parse(cls, text: str, where: str) -> Body:
        data = read_json(text, where)
        if not isinstance(data, dict):
            raise BadRequest(f"{where}: the request body must be a JSON object, not {kind(data)}.")
        return cls(data, where)

    def missing(self, key: str) -> BadRequest:
        return BadRequest(f"{self.where}: the field '{key}' is missing.")

    def wrong(self, key: str, expected: str, value: Any) -> BadRequest:
        return BadRequest(f"{self.where}: the field '{key}' must be {expected}, not {kind(value)}.")

    def string(self, key: str) -> str:
        if key not in self.data or self.data[key] is None:
            raise self.missing(key)
        value = self.data[key]
        if not isinstance(value, str):
            raise self.wrong(key, "a string", value)
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong(key, "a string", value)
        return value

    def integer(self, key: str) -> int:
        """A whole number; GoCD sends some counters as strings, which mean the same."""
        if key not in self.data or self.data[key] is None:
            raise self.missing(key)
        value = self.data[key]
        if isinstance(value, str) and _LONG_TEXT.fullmatch(value.strip()):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and LONG_MIN <= value <= LONG_MAX:
            return value
        if isinstance(value, int | str) and not isinstance(value, bool):
            raise BadRequest(f"{self.where}: the field '{key}' must be a whole number of at most 19 digits.")
        raise self.wrong(key, "a whole number", value)

    def object(self, key: str) -> Body:
        if key not in self.data or self.data[key] is None:
            raise self.missing(key)
        value = self.data[key]
        if not isinstance(value, dict):
            raise self.wrong(key, "an object", value)
        return Body(value, f"{self.where}, '{key}'")

    def optional_object(self, key: str) -> Body | None:
        return None if self.data.get(key) is None else self.object(key)

    def list_of_objects(self, key: str, default: list[Any] | None = None) -> list[dict[str, Any]]:
        if key not in self.data or self.data[key] is None:
            if default is not None:
                return default
            raise self.missing(key)
        value = self.data[key]
        if not isinstance(value, list):
            raise self.wrong(key, "a list of objects", value)
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise BadRequest(
                    f"{self.where}: item {index} of '{key}' must be an object, not {kind(item)}."
                )
        return value

    def properties(self, key: str) -> Properties:
        """A map of profile properties: string keys; values strings or null (null is dropped)."""
        return properties(self.object(key).data, f"{self.where}, '{key}'")

    def properties_list(self, key: str) -> list[Properties]:
        return [
            properties(item, f"{self.where}, '{key}' item {index}")
            for index, item in enumerate(self.list_of_objects(key))
        ]


def properties(data: Mapping[str, Any], where: str) -> Properties:
    result: Properties = {}
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise BadRequest(f"{where}: the value of '{key}' must be a string, not {kind(value)}.")
        result[str(key)] = value if isinstance(value, str) else str(value)
    return result


def plain_properties(value: object) -> Properties | None:
    """A copy of a properties map whose values are all strings; None for anything else (nulls, numbers,
    a wrong type), which `properties` then converts or explains."""
    if type(value) is not dict or not all(type(item) is str for item in value.values()):
        return None
    return dict(value)


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
