"""The test levels' markers: every test under a level's folder carries the level's marker.

Each level folder's conftest.py marks its own tests, so `pytest -m unit` and `pytest tests/unit` run the
same tests, and a test moved to another folder changes level with it. pytest hands every conftest the
whole session's items, so each marks only those under its folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_level(items: list[pytest.Item], folder: Path, level: str) -> None:
    marker = getattr(pytest.mark, level)
    for item in items:
        if folder in item.path.parents:
            item.add_marker(marker)
