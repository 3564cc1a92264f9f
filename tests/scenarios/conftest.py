"""Scenarios in virtual time: the in-process backend, the simulated GoCD server and the fake cluster run
hours of jobs in seconds (the simulator, the advisor, the skipping of idle events, reuse, keys, outages).

Every test under this folder is marked `scenarios` (registered in pyproject.toml): `pytest -m scenarios`
runs the same tests as `pytest tests/scenarios`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, "scenarios")
