"""The service over real HTTP on loopback: the bridge contract, bad input, the status pages, the backend
as its own process, and the fuzzers of every input it parses.

Every test under this folder is marked `http` (pyproject.toml registers the marker): `pytest -m http`
runs the same tests as `pytest tests/http`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, "http")
