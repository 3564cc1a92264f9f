"""docs/install.md and the values it tells an administrator to use, read as the guide's tests read them.

The fenced blocks that follow a `<!-- marker -->` are what the tests run or compare; the guide's own tests
and the server tuning guide's read them the same way."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.support.paths import ROOT

GUIDE = ROOT / "docs" / "install.md"
VALUES = ROOT / "docker" / "helm" / "values-gocd.yaml"


def guide() -> str:
    return GUIDE.read_text()


def block_after(marker: str) -> str:
    """The fenced block that follows `<!-- marker -->` in the guide."""
    found = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", guide(), re.S)
    assert found, f"the guide has the block {marker}"
    return found.group(1)


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(VALUES.read_text())
    return loaded
