"""The agent image: the stand-in GoCD agent (tests/support/doubles/standin_agent.py) on Debian's python3,
made from Debian's packages and written as an OCI archive, for pods that really run.

No Docker engine or Docker Hub is needed: mmdebstrap makes a bookworm `minbase` root filesystem with
`python3` (no recommends, no documentation, no package lists or caches; nothing is fetched when it runs),
and this module writes the OCI image layout around it by hand (two gzip layers: that root filesystem,
then the agent file; a config whose entrypoint runs the agent as uid 65534, nobody), tarred: the file
`ctr -n k8s.io images import` takes, and that podman runs as `oci-archive:<file>`. Written by hand
rather than with `podman save` so that building needs neither podman's storage nor a daemon, and the same
inputs give the same bytes (fixed times, sorted members).

Cached in ~/.cache/gocd-reuse-agent-image/ (or $AGENT_IMAGE_CACHE): the root filesystem's layer under a
hash of the mmdebstrap command, the archive under a hash of everything that goes into it, both built
under a file lock, so a second build, or one from another process at the same time, is a lookup.

    python -m tests.support.agent_image build   # scripts/test.sh, before pytest; prints archive, size, time
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.container_image import (
    APT_OPTIONS,
    DPKG_OPTIONS,
    MIRROR,
    PATH,
    SUITE,
    BuildError,
    _run,
    install_tools,
)
from tests.support.doubles import standin_agent

CACHE = Path(os.environ.get("AGENT_IMAGE_CACHE", Path.home() / ".cache" / "gocd-reuse-agent-image"))
REPOSITORY = "localhost/gocd-reuse-standin-agent"
AGENT_PATH = "/opt/standin-agent/standin_agent.py"
PACKAGES = ("python3",)
USER = "65534:65534"  # nobody: the agent needs no privilege and writes nothing
FORMAT_VERSION = "1"  # of this module's layout: a change here makes a new archive
_EPOCH = 0  # the time of every member and of the config: same inputs, same bytes
_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class AgentImage:
    """The built archive, the image name inside it, its size in bytes and how long the build took."""

    archive: Path
    name: str
    size_bytes: int
    seconds: float


def mmdebstrap_command(output: str) -> list[str]:
    hooks = [
        # Nothing of apt's state is needed at run time: the image never installs anything.
        'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/cache/debconf/*-old "$1"/var/log/*',
    ]
    return [
        "mmdebstrap",
        "--variant=minbase",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        "--include=" + ",".join(PACKAGES),
        *(f"--aptopt={option}" for option in APT_OPTIONS),
        *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
        *(f"--customize-hook={hook}" for hook in hooks),
        SUITE,
        output,
        MIRROR,
    ]


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def base_key() -> str:
    return hashlib.sha256(json.dumps(mmdebstrap_command("-")).encode()).hexdigest()[:16]


def agent_source() -> bytes:
    return Path(standin_agent.__file__).read_bytes()


def image_key() -> str:
    """A hash of all that goes into the archive: the base's command, the agent file, this layout."""
    digest = hashlib.sha256(f"{FORMAT_VERSION}\0{base_key()}\0{PATH}\0{USER}\0".encode())
    digest.update(agent_source())
    return digest.hexdigest()[:16]


def image_name() -> str:
    return f"{REPOSITORY}:{image_key()}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Layer:
    blob: Path  # the gzipped tar
    digest: str  # of the blob
    diff_id: str  # of the tar before compression
    size: int


def _gzip_layer(tar_path: Path, blob: Path) -> Layer:
    uncompressed = hashlib.sha256()
    with (
        tar_path.open("rb") as source,
        blob.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=_EPOCH, compresslevel=6) as out,
    ):
        while chunk := source.read(1 << 20):
            uncompressed.update(chunk)
            out.write(chunk)
    compressed = hashlib.sha256(blob.read_bytes())
    return Layer(
        blob, "sha256:" + compressed.hexdigest(), "sha256:" + uncompressed.hexdigest(), blob.stat().st_size
    )


def base_layer() -> Layer:
    """The root filesystem as a layer: made with mmdebstrap once per command, then found."""
    folder = CACHE / f"base-{base_key()}"
    meta = folder / "layer.json"
    with _locked(CACHE / "base.lock"):
        if not meta.exists():
            install_tools()
            print(
                f"making the agent's root filesystem with mmdebstrap ({SUITE} minbase: {' '.join(PACKAGES)})",
                flush=True,
            )
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder) as work:
                rootfs = Path(work) / "rootfs.tar"
                _run(
                    mmdebstrap_command(str(rootfs)),
                    "mmdebstrap of the agent's root filesystem",
                    log=folder / "mmdebstrap.log",
                )
                layer = _gzip_layer(rootfs, folder / "layer.tar.gz")
            meta.write_text(
                json.dumps({"digest": layer.digest, "diff_id": layer.diff_id, "size": layer.size})
            )
        recorded = json.loads(meta.read_text())
        return Layer(folder / "layer.tar.gz", recorded["digest"], recorded["diff_id"], recorded["size"])


def _agent_layer(work: Path) -> Layer:
    """The agent file, alone in a layer of its own (a change to it rebuilds only this)."""
    tar_path = work / "agent.tar"
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo(str(Path(AGENT_PATH).parent).lstrip("/"))
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, _EPOCH
        tar.addfile(folder)
        source = agent_source()
        member = tarfile.TarInfo(AGENT_PATH.lstrip("/"))
        member.size, member.mode, member.mtime = len(source), 0o644, _EPOCH
        tar.addfile(member, io.BytesIO(source))
    return _gzip_layer(tar_path, work / "agent.tar.gz")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = len(data), 0o644, _EPOCH
    tar.addfile(member, io.BytesIO(data))


def _add_file(tar: tarfile.TarFile, name: str, path: Path) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = path.stat().st_size, 0o644, _EPOCH
    with path.open("rb") as source:
        tar.addfile(member, source)


def _write_archive(archive: Path, name: str, layers: Sequence[Layer]) -> None:
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {
                "User": USER,
                "Env": [f"PATH={PATH}", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"],
                "Entrypoint": ["/usr/bin/python3", AGENT_PATH],
                "WorkingDir": "/tmp",
            },
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": {"mediaType": _CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": _LAYER, "digest": layer.digest, "size": layer.size} for layer in layers],
        },
        sort_keys=True,
    ).encode()
    # ref.name for podman and the OCI layout; io.containerd.image.name for `ctr images import`.
    annotations = {"org.opencontainers.image.ref.name": name, "io.containerd.image.name": name}
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": _INDEX,
            "manifests": [
                {
                    "mediaType": _MANIFEST,
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "annotations": annotations,
                }
            ],
        },
        sort_keys=True,
    ).encode()
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(tar, "index.json", index)
        for blob in (config, manifest):
            _add_bytes(tar, f"blobs/sha256/{_digest(blob).removeprefix('sha256:')}", blob)
        for layer in layers:
            _add_file(tar, f"blobs/sha256/{layer.digest.removeprefix('sha256:')}", layer.blob)
    partial.rename(archive)


def build() -> AgentImage:
    """The archive for the current inputs: built when missing, else found."""
    started = time.monotonic()
    name = image_name()
    folder = CACHE / image_key()
    archive = folder / "agent-image.oci.tar"
    with _locked(CACHE / "image.lock"):
        if not archive.exists():
            base = base_layer()
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder) as work:
                _write_archive(archive, name, [base, _agent_layer(Path(work))])
            for stale in CACHE.iterdir():  # archives of other inputs: never used again (rebuilt cheaply)
                if stale.is_dir() and stale != folder and not stale.name.startswith("base-"):
                    shutil.rmtree(stale, ignore_errors=True)
    return AgentImage(archive, name, archive.stat().st_size, time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.agent_image", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the stand-in agent's image as an OCI archive")
    parser.parse_args(argv)
    try:
        built = build()
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"{built.name}: {built.archive} ({built.size_bytes / 1e6:.1f} MB), in {built.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
