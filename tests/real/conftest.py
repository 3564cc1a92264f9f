"""On the real thing: kube-apiserver and etcd built from the pinned module, the real node (kubelet,
containerd, runc), and the images built with podman. Needs the builds of scripts/test.sh (and root for
the node).

Every test under this folder is marked `real` (pyproject.toml registers the marker): `pytest -m real`
runs the same tests as `pytest tests/real`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, "real")
