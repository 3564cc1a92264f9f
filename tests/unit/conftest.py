"""Unit tests, one package of the product at a time (a folder each, named after it), in process: its pure
decisions, parsers and small components, on a manual clock or the fake API server at most.

Every test under this folder is marked `unit` (pyproject.toml registers the marker): `pytest -m unit`
runs the same tests as `pytest tests/unit`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, "unit")
