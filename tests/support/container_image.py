"""The backend's image (docker/Dockerfile), built for real on a machine without a Docker engine.

tests/unit/deploy/test_docker_image.py reads the Dockerfile; tests/real/test_image.py runs what it builds. No
Docker engine runs where the tests run and Docker Hub cannot be reached, but Debian's podman builds and runs
images as root, and Debian's mmdebstrap makes base images from Debian's packages. So this module:

- installs the Debian packages it needs (podman, buildah, mmdebstrap, runc, uidmap) when they are missing;
- makes the Dockerfile's two base images with mmdebstrap (Debian bookworm: Maven with a JDK 17 for the
  bridge stage, Python 3.11 with its venv module for the backend), caches their tarballs in
  ~/.cache/gocd-reuse-image under a hash of what goes into them, and imports them into podman;
- builds docker/Dockerfile with them as the build arguments MAVEN_IMAGE and PYTHON_IMAGE, whose defaults
  stay the public images; podman's layer cache makes a build with unchanged inputs a lookup.

The bases trust the certificate authorities this machine trusts beyond Debian's (those in
/usr/local/share/ca-certificates: here, the egress proxy's), since pip and Maven reach PyPI and Maven
Central through it during the build; pip is told to use the system's bundle, as on this machine.

crun, podman's first choice, refuses this machine's hybrid cgroups, so runc is the runtime; podman's
default ulimits exceed this machine's hard limits, so every container gets nofile=1024:1024 and
nproc=4096:4096.

    python -m tests.support.container_image build   # scripts/test.sh, before pytest; prints size and time
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import ROOT

IMAGE = "localhost/gocd-reuse-elastic-agent:test"
CACHE = Path.home() / ".cache" / "gocd-reuse-image"
# runc: crun refuses the machine's hybrid cgroups. The ulimits: podman's defaults exceed the hard limits here.
RUNTIME_OPTIONS = ("--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096")
DEBIAN_PACKAGES = {  # command → the Debian package that has it
    "podman": "podman",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
    "runc": "runc",
    "newuidmap": "uidmap",
}
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# As debian:bookworm-slim (debuerreotype's docker-clean): apt-get keeps no downloaded packages and no
# package caches in a layer. Written last, so that mmdebstrap's own runs of apt are as they were.
_CLEAN = "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin"
DOCKER_CLEAN = (
    f'DPkg::Post-Invoke {{ "{_CLEAN} || true"; }};\n'
    f'APT::Update::Post-Invoke {{ "{_CLEAN} || true"; }};\n'
    'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\nAcquire::Languages "none";\n'
)
# As debian:bookworm-slim, the public images' base: no recommends, and no documentation, manuals or
# translations, in the bases and in what the Dockerfile installs on them (dpkg keeps these options).
APT_OPTIONS = ('APT::Install-Recommends "false"',)
DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
)


class BuildError(RuntimeError):
    """The image cannot be built here: the message says which step failed, with its output's tail."""


@dataclass(frozen=True)
class Base:
    """A base image made from Debian's packages: the build argument it stands in for, and its packages."""

    name: str
    build_arg: str
    packages: tuple[str, ...]


BASES = (
    # The bridge stage runs `mvn`; Debian's maven (3.8.7) builds the pom as the public maven:3.9 image does.
    Base("maven", "MAVEN_IMAGE", ("maven", "openjdk-17-jdk-headless", "ca-certificates")),
    # The backend stage runs `python -m venv` and apt-get (the Dockerfile installs libjemalloc2 itself);
    # `advise --timezone` reads the system's time zones, which python:3.11-slim has (Debian's tzdata).
    Base(
        "python",
        "PYTHON_IMAGE",
        ("python3", "python3-venv", "python-is-python3", "ca-certificates", "tzdata"),
    ),
)


@dataclass(frozen=True)
class Built:
    """The built image: its name, its size in bytes, and how long the build took."""

    image: str
    size_bytes: int
    seconds: float


def _run(command: Sequence[str], what: str, cwd: Path | None = None, log: Path | None = None) -> str:
    """Run a step; its output goes to `log` when given (a build's, to follow it), and is returned."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if log is None:
        result = subprocess.run(list(command), capture_output=True, text=True, check=False, cwd=cwd, env=env)
        output, code = result.stdout + result.stderr, result.returncode
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as out:
            code = subprocess.run(
                list(command), stdout=out, stderr=subprocess.STDOUT, check=False, cwd=cwd, env=env
            ).returncode
        output = log.read_text()
    if code != 0:
        tail = "\n".join(output.splitlines()[-40:])
        where = f" (all of it: {log})" if log else ""
        raise BuildError(f"{what} failed (exit {code}): {' '.join(command)}\n{tail}{where}")
    return output


def install_tools() -> None:
    """Install Debian's podman, buildah, mmdebstrap, runc and uidmap where a command of theirs is missing."""
    missing = sorted(
        {package for command, package in DEBIAN_PACKAGES.items() if shutil.which(command) is None}
    )
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(f"Debian's {' '.join(missing)} are missing; install them as root (apt-get install)")
    print(f"installing Debian's {' '.join(missing)}", flush=True)
    _run(["apt-get", "update", "-qq"], "apt-get update")
    _run(["apt-get", "install", "-y", "-qq", *missing], "apt-get install")


def _extra_cas() -> list[Path]:
    return sorted(EXTRA_CA_DIR.glob("*.crt")) if EXTRA_CA_DIR.is_dir() else []


def mmdebstrap_command(base: Base, output: str) -> list[str]:
    """The mmdebstrap command that makes `base` into the tarball `output`."""
    hooks = [
        # The CAs this machine trusts beyond Debian's (update-ca-certificates also renews Java's store).
        'mkdir -p "$1/usr/local/share/ca-certificates"',
        *(f'cp {ca} "$1/usr/local/share/ca-certificates/"' for ca in _extra_cas()),
        'chroot "$1" update-ca-certificates',
        "printf '[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > \"$1/etc/pip.conf\"",
        f"cat > \"$1/etc/apt/apt.conf.d/docker-clean\" <<'EOF'\n{DOCKER_CLEAN}EOF",
        'rm -f "$1"/var/cache/apt/*.bin',  # which apt-get clean no longer finds, given docker-clean
    ]  # mmdebstrap leaves no package lists behind, as the public images (the Dockerfile updates them)
    return [
        "mmdebstrap",
        "--variant=apt",
        # merged-/usr by directory links, as debootstrap and the public images make it, and usr-is-merged
        # to say so; else apt proves it by installing usrmerge, and with it perl.
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        "--include=" + ",".join(base.packages),
        *(f"--aptopt={option}" for option in APT_OPTIONS),
        *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
        # update-alternatives links the JDK's manuals: without their folder, its setup fails.
        '--essential-hook=mkdir -p "$1/usr/share/man/man1"',
        *(f"--customize-hook={hook}" for hook in hooks),
        SUITE,
        output,
        MIRROR,
    ]


def base_key(base: Base) -> str:
    """A hash of everything that goes into a base: the command that makes it, the extra CAs it trusts."""
    digest = hashlib.sha256(json.dumps([PATH, *mmdebstrap_command(base, "-")]).encode())
    for ca in _extra_cas():
        digest.update(ca.name.encode() + b"\0" + ca.read_bytes())
    return digest.hexdigest()[:16]


def base_image(base: Base) -> str:
    return f"localhost/gocd-reuse-base-{base.name}:{base_key(base)}"


def _image_id(image: str) -> str | None:
    found = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def _image_exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def make_base(base: Base) -> str:
    """The base in podman: imported from the cached tarball, made with mmdebstrap when there is none."""
    image = base_image(base)
    if _image_exists(image):
        return image
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"{base.name}-{base_key(base)}.tar"
    if not tarball.exists():
        print(
            f"making the {base.name} base image with mmdebstrap ({SUITE}: {' '.join(base.packages)})",
            flush=True,
        )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=CACHE) as work:
            partial = Path(work) / tarball.name
            _run(
                mmdebstrap_command(base, str(partial)),
                f"mmdebstrap of the {base.name} base",
                log=CACHE / f"mmdebstrap-{base.name}.log",
            )
            partial.rename(tarball)
        for stale_tarball in CACHE.glob(f"{base.name}-*.tar"):  # made from other inputs: never used again
            if stale_tarball != tarball:
                stale_tarball.unlink()
        print(f"  made in {time.monotonic() - started:.0f} s: {tarball}", flush=True)
    _run(
        [
            "podman",
            "import",
            "--change",
            f"ENV PATH={PATH}",
            "--change",
            'CMD ["/bin/bash"]',
            str(tarball),
            image,
        ],
        f"podman import of the {base.name} base",
    )
    repository = image.rpartition(":")[0]
    tags = _run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", repository], "podman images")
    for stale in set(tags.split()) - {image}:  # this base made from other inputs: never used again
        subprocess.run(["podman", "rmi", stale], capture_output=True, check=False)
    return image


def image_size(image: str = IMAGE) -> int:
    return int(_run(["podman", "image", "inspect", "--format", "{{.Size}}", image], "podman image inspect"))


def build(image: str = IMAGE) -> Built:
    """Build docker/Dockerfile into `image` with the Debian bases; a build with unchanged inputs is cached."""
    install_tools()
    started = time.monotonic()
    before = _image_id(image)
    build_args = [arg for base in BASES for arg in ("--build-arg", f"{base.build_arg}={make_base(base)}")]
    _run(
        [
            "podman",
            "build",
            *RUNTIME_OPTIONS,
            "--network",
            "host",  # pip and Maven reach PyPI and Maven Central during the build
            *build_args,
            "-f",
            "docker/Dockerfile",
            "-t",
            image,
            ".",
        ],
        "podman build of docker/Dockerfile",
        cwd=ROOT,
        log=CACHE / "podman-build.log",
    )
    seconds = time.monotonic() - started
    if before is not None and before != _image_id(image):  # the image it replaced: never used again
        subprocess.run(["podman", "rmi", before], capture_output=True, check=False)
    return Built(image, image_size(image), seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.container_image", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help=f"build docker/Dockerfile into {IMAGE} with podman")
    parser.parse_args(argv)
    try:
        built = build()
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"{built.image}: {built.size_bytes / 1e6:.1f} MB, built in {built.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
