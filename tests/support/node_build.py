"""Building the real node's programs: kubelet, kube-scheduler and pause, and the Debian packages it runs.

As tests/support/control_plane.py builds kube-apiserver, and for the same reason (nothing of Kubernetes can be
downloaded as a binary here, the Go module proxy can be reached): from the pinned, checksum-verified
k8s.io/kubernetes module in kube-control-plane/ (go.mod lists them as tools), static (CGO_ENABLED=0: the
kubelet needs no cgo on Linux), into a cache folder per machine keyed by go.mod, go.sum, the pause
program and the build flags, under a file lock. containerd, runc, mmdebstrap and the CNI plugins are
Debian's packages, installed where missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.control_plane import (
    MODULE_DIR,
    BuildError,
    _build_flags,
    _exclusive,
    _go_build,
    default_cache_root,
    pinned_versions,
)

PACKAGES = {
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "pause": "./pause",
}
DEBIAN_PACKAGES = {  # a command or file → the Debian package that has it
    "containerd": "containerd",
    "runc": "runc",
    "mmdebstrap": "mmdebstrap",
    "/usr/lib/cni/loopback": "containernetworking-plugins",
}


@dataclass(frozen=True)
class NodeBinaries:
    """The built kubelet, kube-scheduler and pause, and the Kubernetes version they were built from."""

    kubelet: Path
    kube_scheduler: Path
    pause: Path
    kubernetes_version: str


def _inputs_digest(kubernetes_version: str) -> str:
    """go.mod, go.sum, the pause program and the build flags: a changed input is a fresh cache folder."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "pause/main.go"):
        digest.update((MODULE_DIR / name).read_bytes())
    digest.update(repr(_build_flags(kubernetes_version)).encode())
    return digest.hexdigest()[:12]


def _complete(folder: Path, kubernetes_version: str) -> NodeBinaries | None:
    paths = [folder / name for name in PACKAGES]
    if not all(os.access(path, os.X_OK) for path in paths):
        return None
    return NodeBinaries(paths[0], paths[1], paths[2], kubernetes_version)


def build(cache_dir: Path | None = None) -> NodeBinaries:
    """kubelet, kube-scheduler and pause, built once per machine into
    <cache>/node-<version>-<digest>/ as tests/support/control_plane.py builds kube-apiserver (static, under a
    file lock, into a temporary folder renamed into place). Raises BuildError without Go or when Go fails."""
    kubernetes_version, _ = pinned_versions()
    root = cache_dir if cache_dir is not None else default_cache_root()
    folder = root / f"node-{kubernetes_version}-{_inputs_digest(kubernetes_version)}"
    found = _complete(folder, kubernetes_version)
    if found is not None:
        return found
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            f"Go is not installed (no `go` on PATH): it builds kubelet and kube-scheduler from {MODULE_DIR}"
        )
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / f"{folder.name}.lock"):
        found = _complete(folder, kubernetes_version)
        if found is not None:
            return found
        print(
            f"building kubelet, kube-scheduler {kubernetes_version} and pause into {folder} "
            "(the first build takes minutes)",
            file=sys.stderr,
            flush=True,
        )
        staging = root / f"{folder.name}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            for name, package in PACKAGES.items():
                _go_build(go, staging / name, package, kubernetes_version)
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    built = _complete(folder, kubernetes_version)
    assert built is not None
    return built


def install_tools() -> None:
    """Install Debian's containerd, runc, mmdebstrap and CNI plugins where one is missing (as root)."""
    missing = sorted(
        {
            package
            for need, package in DEBIAN_PACKAGES.items()
            if not (Path(need).exists() if need.startswith("/") else shutil.which(need))
        }
    )
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(f"Debian's {' '.join(missing)} are missing; install them as root (apt-get install)")
    print(f"installing Debian's {' '.join(missing)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise BuildError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
