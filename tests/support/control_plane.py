"""A real Kubernetes control plane for the tests: kube-apiserver and etcd on loopback, nothing else.

The fake API server (elastic_agent/simulation/fake_kube.py) answers what we taught it; this is the real
thing, to check the adapter against what Kubernetes itself does: authentication, RBAC, TokenRequest,
validation, resource versions, watches. As controller-runtime's envtest does, there is no kubelet, no
scheduler and no controller-manager: pods are stored but never run, and nothing garbage-collects.
tests/support/real_node.py adds a node to a control plane of its own (kubelet, containerd, kube-scheduler);
the client certificates and serving certificate its components need are issued here (client_kubeconfig(),
serving_certificate()).

Nothing of Kubernetes can be downloaded as a binary where the tests run, so both binaries are built from
the pinned, checksum-verified Go modules in kube-control-plane/ (see its README.md) into a cache folder
keyed by their versions; the first build takes minutes, later ones are a lookup. `python -m
tests.support.control_plane build` does it ahead of the tests (scripts/test.sh).

    binaries = build()
    with ControlPlane.start(binaries, workdir) as kube:
        kube.create_namespace("agents")
        token = kube.service_account_token("agents", "plugin")

Tokens and keys are never logged; both processes log to files in the work folder."""

from __future__ import annotations

import atexit
import base64
import datetime
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.support.paths import ROOT

MODULE_DIR = ROOT / "kube-control-plane"
APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"
ETCD_PACKAGE = "./etcd"
KUSTOMIZE_PACKAGE = "sigs.k8s.io/kustomize/kustomize/v5"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

READY_TIMEOUT_S = 60.0  # the apiserver is ready about 3 s after start; a bound, not an expectation
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
LOG_TAIL_LINES = 40


class BuildError(RuntimeError):
    """The binaries cannot be built here (no Go, or Go failed): the message says why, with Go's output."""


class StartError(RuntimeError):
    """The control plane did not come up: the message has the tail of both logs."""


@dataclass(frozen=True)
class Binaries:
    """The two built executables, and the versions they were built from (for messages)."""

    kube_apiserver: Path
    etcd: Path
    kubernetes_version: str
    etcd_version: str
    kustomize: Path  # renders the project's Kustomize manifests in their tests (kube-control-plane/kustomize)


# --- building -------------------------------------------------------------------------------------------


def pinned_versions(module_dir: Path = MODULE_DIR) -> tuple[str, str]:
    """The k8s.io/kubernetes and etcd server versions kube-control-plane/go.mod pins."""
    text = (module_dir / "go.mod").read_text()
    versions = []
    for module in ("k8s.io/kubernetes", "go.etcd.io/etcd/server/v3"):
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
        if match is None:
            raise BuildError(f"{module_dir / 'go.mod'} does not require {module}")
        versions.append(match.group(1))
    return versions[0], versions[1]


def _inputs_digest(module_dir: Path, kubernetes_version: str) -> str:
    """What the binaries are built from (go.mod, go.sum, etcd's main and the build flags): a changed
    input gets a fresh cache folder, never a stale binary."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "etcd/main.go", "kustomize/go.mod", "kustomize/go.sum"):
        digest.update((module_dir / name).read_bytes())
    digest.update(repr(_build_flags(kubernetes_version)).encode())
    return digest.hexdigest()[:12]


def _build_flags(kubernetes_version: str) -> list[str]:
    """Static (CGO_ENABLED=0), path-free binaries, as upstream builds them, without symbol tables (a
    quicker link, a third smaller); the version stamped in so that /version says what runs (else
    v0.0.0-master)."""
    major, minor = kubernetes_version.lstrip("v").split(".")[:2]
    stamp = {"gitVersion": kubernetes_version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    ldflags = " ".join(f"-X k8s.io/component-base/version.{key}={value}" for key, value in stamp.items())
    return ["-trimpath", "-ldflags", f"-s -w {ldflags}"]


def default_cache_root() -> Path:
    """$CONTROL_PLANE_CACHE, else ~/.cache/gocd-reuse-control-plane (XDG_CACHE_HOME honoured)."""
    if os.environ.get("CONTROL_PLANE_CACHE"):
        return Path(os.environ["CONTROL_PLANE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gocd-reuse-control-plane"


def _complete(folder: Path) -> Binaries | None:
    apiserver, etcd, kustomize = folder / "kube-apiserver", folder / "etcd", folder / "kustomize"
    if not all(os.access(binary, os.X_OK) for binary in (apiserver, etcd, kustomize)):
        return None
    kubernetes_version, etcd_version = pinned_versions()
    return Binaries(apiserver, etcd, kubernetes_version, etcd_version, kustomize)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One build at a time per cache folder, across processes (a second waits, then finds it done)."""
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _go_build(
    go: str, output: Path, package: str, kubernetes_version: str, module_dir: Path = MODULE_DIR
) -> None:
    env = dict(os.environ)
    # -mod=readonly: the build list is go.mod's and every module is checked against go.sum; a GOFLAGS of
    # the caller's (-mod=mod) could otherwise update them silently.
    env["GOFLAGS"] = "-mod=readonly -buildvcs=false"
    env["CGO_ENABLED"] = "0"
    command = [go, "build", *_build_flags(kubernetes_version), "-o", str(output), package]
    result = subprocess.run(command, cwd=module_dir, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-LOG_TAIL_LINES:])
        raise BuildError(f"`go build {package}` failed in {module_dir} (exit {result.returncode}):\n{tail}")


def build(cache_dir: Path | None = None) -> Binaries:
    """kube-apiserver and etcd, built once into a folder keyed by their versions and inputs, then reused.

    Quick when the folder is complete; otherwise builds (minutes: kube-apiserver is a big program) under a
    file lock, into a temporary folder renamed into place, so an interrupted build leaves nothing half
    done. `cache_dir` is the root of the cache (default_cache_root() when None). Raises BuildError without
    Go or when Go fails."""
    kubernetes_version, etcd_version = pinned_versions()
    root = cache_dir if cache_dir is not None else default_cache_root()
    folder = root / f"{kubernetes_version}-{etcd_version}-{_inputs_digest(MODULE_DIR, kubernetes_version)}"
    found = _complete(folder)
    if found is not None:
        return found
    go = shutil.which("go")
    if go is None:
        raise BuildError("Go is not installed (no `go` on PATH): it builds kube-apiserver and etcd from "
                         f"{MODULE_DIR}")  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / f"{folder.name}.lock"):
        found = _complete(folder)
        if found is not None:
            return found
        print(f"building kube-apiserver {kubernetes_version}, etcd {etcd_version} and kustomize from Go "
              f"modules into {folder} (the first build takes several minutes)", file=sys.stderr,
              flush=True)  # fmt: skip
        staging = root / f"{folder.name}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            _go_build(go, staging / "kube-apiserver", APISERVER_PACKAGE, kubernetes_version)
            _go_build(go, staging / "etcd", ETCD_PACKAGE, kubernetes_version)
            _go_build(
                go, staging / "kustomize", KUSTOMIZE_PACKAGE, kubernetes_version, MODULE_DIR / "kustomize"
            )
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    built = _complete(folder)
    assert built is not None
    return built


# --- certificates and keys ------------------------------------------------------------------------------


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())  # P-256: generated in microseconds, unlike RSA


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _key_usage(signs_certificates: bool) -> x509.KeyUsage:
    """Signatures only (EC keys do no encipherment); certificate and CRL signing for the CA."""
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=signs_certificates,
                         crl_sign=signs_certificates, encipher_only=False, decipher_only=False)  # fmt: skip


@dataclass(frozen=True)
class _Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls) -> _Authority:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        name = _name("gocd-reuse test control plane CA")
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(signs_certificates=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(self, subject: x509.Name, usage: x509.ObjectIdentifier,
              names: list[x509.GeneralName] | None = None) -> tuple[bytes, bytes]:  # fmt: skip
        """A leaf certificate and its key, as PEM."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return _cert_pem(builder.sign(self.key, hashes.SHA256())), _key_pem(key)


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


# --- processes ------------------------------------------------------------------------------------------


def _free_port() -> int:
    """A loopback port free now (the kernel's choice). Another process may take it before ours binds:
    start() then fails with the log saying so, and is retried once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


class _Process:
    """One child process logging to a file (appended to across restarts)."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        self._log.write(f"--- {time.strftime('%H:%M:%S')} starting {self.name}\n".encode())
        self._log.flush()
        self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT)  # fmt: skip

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Signal, wait a bounded time, then SIGKILL; always reaps the child and closes the log."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None


# --- the control plane ----------------------------------------------------------------------------------


class ControlPlane:
    """A running etcd and kube-apiserver on loopback, with an admin identity (group system:masters).

    Everything lives in `workdir`: certificates and keys, etcd's data, both logs (etcd.log,
    kube-apiserver.log) and a kubeconfig for the admin. stop() ends the processes and leaves the folder."""

    def __init__(self, binaries: Binaries, workdir: Path, extra_apiserver_args: Sequence[str] = ()) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.extra_apiserver_args = tuple(extra_apiserver_args)  # appended to kube-apiserver's flags
        self.url = ""
        self.ca_pem = ""
        self.kubeconfig_path = workdir / "kubeconfig"
        self.ca_path = workdir / "ca.crt"
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._ssl: ssl.SSLContext | None = None
        self._frozen = False  # SIGSTOPped by freeze_apiserver()
        self._authority: _Authority | None = None  # issues the identities of a node's components

    # lifecycle

    @classmethod
    def start(cls, binaries: Binaries, workdir: Path,
              extra_apiserver_args: Sequence[str] = ()) -> ControlPlane:  # fmt: skip
        """Certificates, free ports, etcd, kube-apiserver; returns once /readyz answers 200.
        `extra_apiserver_args` are added to kube-apiserver's command line (e.g. a short
        --etcd-compaction-interval for a test that needs 410 Gone)."""
        workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            plane = cls(binaries, workdir, extra_apiserver_args)
            try:
                plane._start()
                return plane
            except StartError as error:
                plane.stop()
                if attempt == 0 and "address already in use" in str(error):
                    continue  # a free port taken between the probe and the bind: new ports, once
                raise
        raise AssertionError("unreachable")

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """apiserver first (it flushes to etcd), then etcd; each SIGTERM, then SIGKILL after a bound."""
        atexit.unregister(self.stop)
        if self._apiserver is not None:
            if self._frozen and self._apiserver.popen is not None:
                self._apiserver.popen.send_signal(signal.SIGCONT)  # SIGTERM waits for a stopped process
            self._apiserver.stop()
        if self._etcd is not None:
            self._etcd.stop()

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver, as a crash would; etcd keeps running. restart_apiserver() brings it
        back."""
        assert self._apiserver is not None
        self._apiserver.stop(signal.SIGKILL)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver (if it runs) and start it again on the same port with the same keys, so that
        clients, kubeconfig and issued tokens stay valid; returns once it is ready again."""
        assert self._apiserver is not None
        self._apiserver.stop()
        self._apiserver.start()
        self._wait_ready()

    def freeze_apiserver(self) -> None:
        """SIGSTOP kube-apiserver: its sockets stay open and the kernel still accepts connections, but
        nothing is answered (a process stuck in a long pause, a VM paused) until thaw_apiserver()."""
        assert self._apiserver is not None and self._apiserver.popen is not None
        self._apiserver.popen.send_signal(signal.SIGSTOP)
        self._frozen = True

    def thaw_apiserver(self) -> None:
        """SIGCONT: kube-apiserver carries on with what it was doing; returns once it answers again."""
        assert self._apiserver is not None and self._apiserver.popen is not None
        self._apiserver.popen.send_signal(signal.SIGCONT)
        self._frozen = False
        self._wait_ready()

    def stop_etcd(self) -> None:
        """SIGTERM etcd (kube-apiserver keeps running, answering 5xx or hanging until etcd is back)."""
        assert self._etcd is not None
        self._etcd.stop()

    def start_etcd(self) -> None:
        """Start etcd again on the same ports with the same data folder; returns once kube-apiserver,
        reconnected, is ready again."""
        assert self._etcd is not None
        self._etcd.start()
        self._wait_ready()

    def restart_etcd(self, down_s: float = 0.0) -> None:
        """stop_etcd(), `down_s` seconds of no etcd, start_etcd()."""
        self.stop_etcd()
        time.sleep(down_s)
        self.start_etcd()

    def _start(self) -> None:
        work = self.workdir
        authority = self._authority = _Authority.create()
        self.ca_pem = _cert_pem(authority.cert).decode()
        _write(self.ca_path, self.ca_pem.encode())
        serving_cert, serving_key = authority.issue(
            _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH,
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])  # fmt: skip
        admin = _name("admin", "system:masters")  # the group RBAC lets do anything
        admin_cert, admin_key = authority.issue(admin, ExtendedKeyUsageOID.CLIENT_AUTH)
        _write(work / "serving.crt", serving_cert)
        _write(work / "serving.key", serving_key, private=True)
        admin_cert_path = _write(work / "admin.crt", admin_cert)
        admin_key_path = _write(work / "admin.key", admin_key, private=True)
        # How kube-apiserver reaches a kubelet (pod logs, exec): as a member of system:masters, which a
        # kubelet's webhook authorization lets do anything. Unused while no kubelet runs.
        kubelet_client_cert, kubelet_client_key = authority.issue(
            _name("kube-apiserver-kubelet-client", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)
        _write(work / "kubelet-client.crt", kubelet_client_cert)
        _write(work / "kubelet-client.key", kubelet_client_key, private=True)
        signing_key = _key()
        _write(work / "sa.key", _key_pem(signing_key), private=True)
        _write(work / "sa.pub", signing_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # fmt: skip

        etcd_client, etcd_peer, secure_port = _free_port(), _free_port(), _free_port()
        self.url = f"https://127.0.0.1:{secure_port}"
        self._ssl = ssl.create_default_context(cafile=str(self.ca_path))
        self._ssl.load_cert_chain(str(admin_cert_path), str(admin_key_path))
        self._write_kubeconfig(admin_cert, admin_key)

        etcd_url = f"http://127.0.0.1:{etcd_client}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        self._etcd = _Process("etcd", [
            str(self.binaries.etcd),
            "--name=test", f"--data-dir={work / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=test={peer_url}",
            "--unsafe-no-fsync",  # a test's data need not survive a power cut; fsync costs seconds
            "--log-level=warn",
        ], work / "etcd.log")  # fmt: skip
        self._apiserver = _Process("kube-apiserver", [
            str(self.binaries.kube_apiserver),
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={secure_port}",
            f"--etcd-servers={etcd_url}",
            f"--tls-cert-file={work / 'serving.crt'}", f"--tls-private-key-file={work / 'serving.key'}",
            f"--client-ca-file={self.ca_path}",
            "--authorization-mode=RBAC",
            # No controller-manager creates service-account tokens or the default ServiceAccount, so the
            # admission plugin that expects them would refuse every pod.
            "--disable-admission-plugins=ServiceAccount",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={work / 'sa.pub'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # The `kubernetes` Service's endpoints would be 127.0.0.1, which validation refuses: the
            # reconciler would log an error every 10 s. Nothing here needs that Service.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={work / 'kubelet-client.crt'}",
            f"--kubelet-client-key={work / 'kubelet-client.key'}",
            f"--kubelet-certificate-authority={self.ca_path}",
            # A node on loopback has no name that resolves to it: use the address it reports.
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            *self.extra_apiserver_args,
        ], work / "kube-apiserver.log")  # fmt: skip
        atexit.register(self.stop)  # a test run that dies without teardown leaves no processes behind
        self._etcd.start()
        self._apiserver.start()
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Poll /readyz until 200; fail early when a process exits, and after READY_TIMEOUT_S at worst."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = "no answer yet"
        while time.monotonic() < deadline:
            for process in (self._etcd, self._apiserver):
                if process is not None and process.exited() is not None:
                    raise StartError(f"{process.name} exited with {process.exited()}\n{self.log_tails()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", context=self._ssl, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except urllib.error.HTTPError as error:
                last = f"/readyz answered {error.code}"
            except (OSError, ssl.SSLError) as error:
                last = f"/readyz: {error}"
            time.sleep(0.1)
        raise StartError(f"kube-apiserver not ready after {READY_TIMEOUT_S:.0f} s ({last})\n"
                         f"{self.log_tails()}")  # fmt: skip

    def log_tails(self) -> str:
        """The last lines of both logs, for failure messages."""
        return "\n".join(f"--- {name}.log (last lines):\n{_tail(self.workdir / f'{name}.log')}"
                         for name in ("etcd", "kube-apiserver"))  # fmt: skip

    def _write_kubeconfig(self, cert_pem: bytes, key_pem: bytes, user: str = "admin",
                          path: Path | None = None) -> Path:  # fmt: skip
        """Self-contained (data embedded): kubectl, client libraries, or a copy elsewhere can use it."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        cluster = {"server": self.url, "certificate-authority-data": b64(self.ca_pem.encode())}
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": f"{user}@test", "preferences": {},
            "clusters": [{"name": "test", "cluster": cluster}],
            "users": [{"name": user, "user": {"client-certificate-data": b64(cert_pem),
                                              "client-key-data": b64(key_pem)}}],
            "contexts": [{"name": f"{user}@test", "context": {"cluster": "test", "user": user}}],
        }  # fmt: skip
        return _write(path or self.kubeconfig_path, yaml.safe_dump(kubeconfig).encode(), private=True)

    def client_kubeconfig(self, user: str, groups: Sequence[str], path: Path) -> Path:
        """A kubeconfig at `path` for a client certificate of `user` in `groups` (the organisations of
        its subject), issued by this control plane's CA: how a kubelet or a scheduler signs in."""
        assert self._authority is not None, "start() first"
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        cert, key = self._authority.issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH)
        return self._write_kubeconfig(cert, key, user, path)

    def serving_certificate(self, ip: str, cert_path: Path, key_path: Path) -> None:
        """A serving certificate for `ip`, issued by this control plane's CA (which kube-apiserver checks
        a kubelet's against), written as PEM to the two paths."""
        assert self._authority is not None, "start() first"
        cert, key = self._authority.issue(_name(ip), ExtendedKeyUsageOID.SERVER_AUTH,
                                          [x509.IPAddress(ipaddress.ip_address(ip))])  # fmt: skip
        _write(cert_path, cert)
        _write(key_path, key, private=True)

    # clients and helpers

    def admin_api_client(self) -> client.ApiClient:
        """A client of the official library as the admin (client certificate, group system:masters)."""
        return config.new_client_from_config(config_file=str(self.kubeconfig_path))

    def request(self, method: str, path: str, token: str | None = None,
                body: Mapping[str, Any] | None = None) -> tuple[int, Any]:  # fmt: skip
        """One raw HTTPS request: as the admin without `token`, else as that bearer token alone (no client
        certificate is offered then). Returns the status and the decoded JSON body."""
        context = self._ssl if token is None else ssl.create_default_context(cadata=self.ca_pem)
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, context=context, timeout=10) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                return error.code, json.loads(payload)
            except ValueError:
                return error.code, payload.decode(errors="replace")

    def create_namespace(self, name: str) -> None:
        """Create a namespace; one that exists already is fine."""
        core = client.CoreV1Api(self.admin_api_client())
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise

    def service_account_token(self, namespace: str, name: str, duration_s: int = 3600) -> str:
        """A bound token of ServiceAccount `name` from the TokenRequest API (the ServiceAccount is created
        when missing). Kubernetes refuses durations under 600 s."""
        core = client.CoreV1Api(self.admin_api_client())
        try:
            core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise
        answer = core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": duration_s}})  # fmt: skip
        return str(answer.status.token)

    def apply_role(self, namespace: str, role_manifest: Mapping[str, Any], subject_sa: str) -> None:
        """Create or replace a Role and a RoleBinding of it to ServiceAccount `subject_sa`, then wait until
        the authorizer grants the Role's first rule to that ServiceAccount: RBAC reads bindings from a
        watch cache, and a request right after the write could still be refused."""
        role: dict[str, Any] = json.loads(json.dumps(role_manifest))  # a deep copy we may change
        role.setdefault("apiVersion", "rbac.authorization.k8s.io/v1")
        role.setdefault("kind", "Role")
        role.setdefault("metadata", {})["namespace"] = namespace
        role_name = role["metadata"]["name"]
        binding: dict[str, Any] = {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{role_name}-{subject_sa}", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": subject_sa, "namespace": namespace}],
        }  # fmt: skip
        rbac = client.RbacAuthorizationV1Api(self.admin_api_client())
        for body, create, replace in (
            (role, rbac.create_namespaced_role, rbac.replace_namespaced_role),
            (binding, rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding),
        ):
            try:
                create(namespace, body)
            except ApiException as error:
                if error.status != 409:
                    raise
                replace(body["metadata"]["name"], namespace, body)
        rules = role.get("rules") or []
        if rules:
            self._wait_granted(namespace, subject_sa, rules[0])

    def _wait_granted(self, namespace: str, service_account: str, rule: Mapping[str, Any]) -> None:
        groups, verbs, resources = rule.get("apiGroups") or [""], rule.get("verbs"), rule.get("resources")
        if not verbs or not resources:
            return  # a nonResourceURLs rule or an empty one: nothing simple to ask about
        review = {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": f"system:serviceaccount:{namespace}:{service_account}",
                     "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                "system:authenticated"],
                     "resourceAttributes": {"namespace": namespace, "group": groups[0], "verb": verbs[0],
                                            "resource": resources[0]}},
        }  # fmt: skip
        deadline = time.monotonic() + 10.0
        while True:
            status, answer = self.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
            if status == 201 and answer.get("status", {}).get("allowed"):
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"the Role's first rule was not granted to {service_account} within "
                                     f"10 s: {status} {answer}")  # fmt: skip
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    """`python -m tests.support.control_plane build`: build (or find) the binaries and print where they
    are."""
    if argv != ["build"]:
        print("usage: python -m tests.support.control_plane build", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        binaries = build()
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(f"control plane: kube-apiserver {binaries.kubernetes_version} at {binaries.kube_apiserver}, "
          f"etcd {binaries.etcd_version} at {binaries.etcd} ({took:.1f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
