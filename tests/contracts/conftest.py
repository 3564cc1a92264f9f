"""Contracts that hold the doubles to the real thing: the fake API server to a real kube-apiserver, the
GoCD REST and admin API doubles to gocd/gocd's source, the OpenAPI document to the dispatch table.

Every test under this folder is marked `contracts` (registered in pyproject.toml): `pytest -m contracts`
runs the same tests as `pytest tests/contracts`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, "contracts")
