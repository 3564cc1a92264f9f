"""Hypothesis strategies and settings shared by the fuzz tests (tests/test_fuzz_*.py).

Bodies are fuzzed two ways: any JSON value at all, and a valid GoCD body with one part changed (a field
replaced by any JSON value, removed, or joined by an unknown one), because a parser is mostly exercised
past its first check only by input that is nearly right.

Settings: the suite runs a fixed number of examples per test, derandomized so that a run on CI is the
same run as on a laptop; `HYPOTHESIS_PROFILE=long` runs twenty times as many, with fresh randomness and
Hypothesis's example database (`.hypothesis/`), for a long search:

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/test_fuzz_*.py --hypothesis-show-statistics
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"


def fuzz_settings(examples: int) -> settings:
    """`examples` per test in the suite, twenty times as many in the long profile. No deadline: the
    machine is shared and noisy, and slowness is not what these tests look for."""
    return settings(
        max_examples=examples * 20 if LONG else examples,
        deadline=None,
        derandomize=not LONG,
        database=settings.default.database if LONG else None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


# Text people and broken clients send where numbers, names and durations belong. Long runs of digits
# are built by `map` so that Hypothesis's statistics do not print them.
LONG_TEXT = st.sampled_from([20, 309, 400, 4301, 5000]).map(lambda count: "9" * count) | st.just(300).map(
    lambda count: "a" * count
)
AWKWARD_TEXT = LONG_TEXT | st.sampled_from(
    [
        "",
        " ",
        "\t\n",
        "NaN",
        "nan",
        "Infinity",
        "-Infinity",
        "inf",
        "1e400",
        "-0",
        "--1",
        "+1",
        "1_000",
        " 1 ",
        "0x10",
        "1.5",
        "²",
        "١٢",
        "\uff11",
        "\u0000",
        "\ud7ff",
        "☃",
        "\U0001d7d8",
        "null",
        "true",
        "{}",
        "[]",
        "{{ POD_POSTFIX }}",
        "${HOME}",
        "-",
        ".",
        "..",
        "/go",
        "http://",
        "https://[::1]:99999/go",
        "http://x:y@h/go",
        "1h1h",
        "10000000000000d",
        "0",
        "0m",
    ]
)
# What a header may carry (latin-1, no line breaks): anything else is refused by the HTTP client.
HEADER_TEXT = st.text(
    st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=40
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([4000, 63, 64]).map(lambda power: 10**power if power > 64 else 2**power),
    st.sampled_from([4000, 63]).map(lambda power: -(10**power)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    AWKWARD_TEXT,
)

JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def nested(depth: int) -> Any:
    """A list nested `depth` deep: deep, but within what the JSON decoder can take."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


DEEP = st.integers(min_value=50, max_value=900).map(nested)
ANY_VALUE = st.one_of(JSON, JSON, JSON, DEEP)
# What replaces one value of a valid body: awkward scalars as often as structures, since a field's own
# reader is reached by a value of about the right kind.
REPLACEMENT = st.one_of(AWKWARD_TEXT, SCALARS, ANY_VALUE)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside a JSON value: keys of objects and indexes of lists, at every level."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*prefix, index))
            found.extend(paths(item, (*prefix, index)))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """`valid` with one change: a value anywhere replaced by any JSON value, a key removed, an unknown
    key added (at the top or inside an object), or the whole body replaced."""
    body = copy.deepcopy(valid)
    action = draw(st.sampled_from(["replace", "replace", "replace", "remove", "add", "whole"]))
    if action == "whole":
        return draw(ANY_VALUE)
    where = draw(st.sampled_from(paths(body)))
    parent: Any = body
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    if action == "replace":
        parent[last] = draw(REPLACEMENT)
    elif action == "remove":
        del parent[last]
    else:
        target = parent[last] if isinstance(parent[last], dict) else body
        target[draw(st.text(max_size=12))] = draw(ANY_VALUE)
    return body
