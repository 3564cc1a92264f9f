"""Session fixtures for the real control plane (tests/support/control_plane.py): kube-apiserver and etcd.

Import the fixtures you use into a test module, as with tests/support/kube_fixtures.py:

    from tests.support import real_kube_fixtures
    real_kube = real_kube_fixtures.real_kube  # fixture

Built once per machine (minutes, then cached) and started once per test session (seconds). Where the
binaries cannot be built (no Go, Go failing) the tests that need them are skipped on a developer's
machine, with the reason; with CI=true they fail instead, so that CI never passes by skipping them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from tests.support.control_plane import Binaries, BuildError, ControlPlane, build

# kube-apiserver flags for a history that expires within seconds (see compacting_kube).
COMPACTING_ARGS = ("--etcd-compaction-interval=1s", "--watch-cache-sizes=pods#0")


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the real control plane is required in CI (CI=true): {reason}", pytrace=False)
    pytest.skip(f"no real control plane: {reason}")


@pytest.fixture(scope="session")
def real_kube_binaries() -> Binaries:
    """The built kube-apiserver and etcd (built here when `python -m tests.support.control_plane build` has
    not run yet: the first time takes minutes)."""
    try:
        return build()
    except BuildError as error:
        _unavailable(str(error))


@pytest.fixture(scope="session")
def real_kube(real_kube_binaries: Binaries,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:  # fmt: skip
    """One running control plane for the whole session. Tests share it: each works in a namespace of its
    own, and leaves the apiserver running (restart tests start their own ControlPlane). A failure to start
    is a failure, never a skip: the binaries are there."""
    with ControlPlane.start(real_kube_binaries, tmp_path_factory.mktemp("real-kube")) as plane:
        yield plane


@pytest.fixture(scope="session")
def compacting_kube(real_kube_binaries: Binaries,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:  # fmt: skip
    """A control plane of its own whose history expires within seconds, for 410 Gone: kube-apiserver
    compacts etcd every second and serves pod watches from etcd rather than from its watch cache (which
    reaches back to the server's start). A production cluster does the same every 5 minutes."""
    with ControlPlane.start(real_kube_binaries, tmp_path_factory.mktemp("compacting-kube"),
                            COMPACTING_ARGS) as plane:  # fmt: skip
        yield plane
