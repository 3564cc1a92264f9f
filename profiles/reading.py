"""Reading a flat GoCD property map against a field table: the one path both validation and the typed
profiles go through, so they can never disagree. Never raises, whatever the input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profiles.fields import Field
from profiles.values import describe

Problem = tuple[str, str]


def read_properties(
    fields: tuple[Field, ...], props: Any, *, report_unknown: bool = True
) -> tuple[dict[str, Any], list[Problem]]:
    """Every field's value (parsed, or its default when absent, null or blank) and every problem, in
    table order, then unknown keys."""
    values: dict[str, Any] = {field.key: field.default for field in fields}
    problems: list[Problem] = []
    if not isinstance(props, Mapping):
        return values, [("", f"the settings must be an object of names and values, not {describe(props)}")]
    known = {field.key for field in fields}
    for field in fields:
        raw = props.get(field.key)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if field.required:
                problems.append((field.key, f"{field.label} must be set. {field.help}"))
            continue
        if not isinstance(raw, str):
            problems.append((field.key, f"must be text, not {describe(raw)}"))
            continue
        try:
            values[field.key] = field.parse(raw)
        except ValueError as error:
            problems.append((field.key, str(error)))
        except Exception as error:  # a parser bug must not become a failed request for GoCD
            problems.append((field.key, f"could not be read ({type(error).__name__})"))
    if report_unknown:
        for key in props:
            if key not in known:
                problems.append((str(key), f"{str(key)!r} is not a setting of this plugin"))
    return values, problems


def as_messages(problems: list[Problem]) -> list[dict[str, str]]:
    """GoCD's validation answer shape."""
    return [{"key": key, "message": message} for key, message in problems]
