"""Images for the real node's containerd, written as OCI archives without a registry or an image builder.

No registry can be reached where the tests run, so every image the node runs is made here and imported
with `ctr images import`: the pod sandbox's `pause` image (the static binary of
kube-control-plane/pause/main.go, alone in one layer) and a Debian bookworm image for test pods, made
from Debian's packages with mmdebstrap (tests/support/container_image.py's command, so it trusts the same
extra CAs). An OCI archive is a tar of an image layout: `oci-layout`, `index.json` naming the image, and the
blobs (manifest, config, layers) by their SHA-256 (the OCI image-spec's image-layout.md; containerd's
import names the image after the index entry's `io.containerd.image.name` annotation, as in its
images/archive importer). Layers are stored uncompressed: the archive is read
once, on this machine, so gzip would only cost time.

Archives are cached in ~/.cache/gocd-reuse-real-node/ under a hash of what they are made from, and an
image's tag is that hash, so a changed input is a new image, never a stale one. Other images can be
written the same way with `write_oci_archive()`.

    archive = debian_image()      # minutes the first time (mmdebstrap), then a lookup
    node.import_image(archive)    # tests/support/real_node.py
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import container_image

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gocd-reuse-real-node"
PAUSE_REPOSITORY = "localhost/gocd-reuse-pause"
DEBIAN_REPOSITORY = "localhost/gocd-reuse-node-debian"
# ca-certificates: mmdebstrap_command's hook runs update-ca-certificates in the new root.
DEBIAN_BASE = container_image.Base("node-debian", "", ("ca-certificates",))
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageArchive:
    """An OCI archive on disk and the image name it carries (what a pod's `image` field names)."""

    name: str
    path: Path


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _descriptor(media_type: str, data_digest: str, size: int) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": f"sha256:{data_digest}", "size": size}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def write_oci_archive(output: Path, name: str, layers: Sequence[Path], config: Mapping[str, Any]) -> None:
    """Write an OCI archive of image `name` (repository:tag) from uncompressed layer tars, lowest first.
    `config` is the image config's `config` object (Env, Entrypoint, Cmd, WorkingDir, User). Written to a
    temporary name beside `output` and renamed, so a reader never sees half an archive."""
    layer_digests = [_sha256_file(layer) for layer in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest}" for digest in layer_digests]},
    }
    config_blob = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _descriptor(
            "application/vnd.oci.image.config.v1+json",
            hashlib.sha256(config_blob).hexdigest(),
            len(config_blob),
        ),
        "layers": [
            _descriptor("application/vnd.oci.image.layer.v1.tar", digest, layer.stat().st_size)
            for digest, layer in zip(layer_digests, layers, strict=True)
        ],
    }
    manifest_blob = json.dumps(manifest, sort_keys=True).encode()
    manifest_entry = _descriptor(
        "application/vnd.oci.image.manifest.v1+json",
        hashlib.sha256(manifest_blob).hexdigest(),
        len(manifest_blob),
    )
    # containerd names an imported image after io.containerd.image.name; the OCI annotation is the tag.
    manifest_entry["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rpartition(":")[2],
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_entry],
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.tmp-{os.getpid()}")
    with tarfile.open(partial, "w") as archive:
        _add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(archive, "index.json", json.dumps(index).encode())
        for blob in (config_blob, manifest_blob):
            _add_bytes(archive, f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
        for digest, layer in zip(layer_digests, layers, strict=True):
            archive.add(layer, arcname=f"blobs/sha256/{digest}")
    partial.rename(output)


def _single_file_layer(output: Path, source: Path, name: str) -> None:
    # A fresh TarInfo: owner root (uid 0), mtime 0, so the layer's digest depends on the binary only.
    info = tarfile.TarInfo(name)
    info.size = source.stat().st_size
    info.mode = 0o755
    with tarfile.open(output, "w") as layer, source.open("rb") as data:
        layer.addfile(info, data)


def pause_image(pause_binary: Path) -> ImageArchive:
    """The pod sandbox image: the static pause binary at /pause, its entrypoint."""
    key = _sha256_file(pause_binary)[:16]
    archive = ImageArchive(f"{PAUSE_REPOSITORY}:{key}", CACHE / f"pause-{key}.oci.tar")
    if archive.path.exists():
        return archive
    with tempfile.TemporaryDirectory(dir=_cache_dir()) as work:
        layer = Path(work) / "layer.tar"
        _single_file_layer(layer, pause_binary, "pause")
        write_oci_archive(archive.path, archive.name, [layer], {"Entrypoint": ["/pause"]})
    _remove_stale("pause-", archive.path)
    return archive


def debian_image() -> ImageArchive:
    """Debian bookworm (mmdebstrap, variant apt) for test pods: bash, coreutils, nothing that listens."""
    key = container_image.base_key(DEBIAN_BASE)
    archive = ImageArchive(f"{DEBIAN_REPOSITORY}:{key}", CACHE / f"debian-{key}.oci.tar")
    if archive.path.exists():
        return archive
    print("making the real node's Debian image with mmdebstrap (the first time takes minutes)", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=_cache_dir()) as work:
        rootfs = Path(work) / "rootfs.tar"
        container_image._run(
            container_image.mmdebstrap_command(DEBIAN_BASE, str(rootfs)),
            "mmdebstrap of the real node's Debian image",
            log=CACHE / "mmdebstrap-debian.log",
        )
        write_oci_archive(
            archive.path,
            archive.name,
            [rootfs],
            {"Env": [f"PATH={container_image.PATH}"], "Cmd": ["/bin/bash"]},
        )
    _remove_stale("debian-", archive.path)
    print(f"  made in {time.monotonic() - started:.0f} s: {archive.path}", flush=True)
    return archive


def _cache_dir() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE


def _remove_stale(prefix: str, keep: Path) -> None:
    """Archives of the same image made from other inputs are never used again."""
    for stale in CACHE.glob(f"{prefix}*.oci.tar"):
        if stale != keep:
            stale.unlink(missing_ok=True)
