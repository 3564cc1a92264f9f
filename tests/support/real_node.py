"""A real node for the real control plane: containerd and runc, a kubelet and kube-scheduler, on loopback.

tests/support/control_plane.py runs kube-apiserver and etcd only, so pods are stored but never run. This
module adds what runs them: Debian's containerd 1.6 with runc, and kubelet and kube-scheduler built from the
same pinned k8s.io/kubernetes module as kube-apiserver (kube-control-plane/go.mod; see its README.md for
the versions and why). Test pods use `hostNetwork: true`: the node's only pod network is loopback
(tests/support/node_config.py), and no address outside 127.0.0.0/8 is used.

What a cluster's controller-manager would do and none runs here: the node lifecycle controller removes
the `node.kubernetes.io/not-ready` taint that admission puts on a new node; start() removes it once the
node is Ready. Nothing garbage-collects, evicts on taints or makes ServiceAccounts.

One node at a time per machine: the kubelet owns the machine's `kubepods` cgroups. NODE_LOCK is held
while a node runs (by the session fixture in tests/support/real_node_fixtures.py, or by a caller of
`machine_lock()`), and every start first sweeps away what a previous node left
(tests/support/node_cleanup.py).

    binaries = node_build.build()                             # minutes the first time, then a lookup
    with machine_lock(), RealNode.start(plane, binaries) as node:
        node.import_image(node_images.debian_image())         # any OCI archive (tests/support/node_images.py)
        ...                                                   # pods on node.name, image pull policy Never

`python -m tests.support.real_node build` (scripts/test.sh, before pytest) installs the Debian packages,
builds the binaries and makes the images; the node's logs are in NodeLayout.log_dir while it runs.
"""

from __future__ import annotations

import atexit
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support import container_image, node_build, node_cleanup, node_images
from tests.support.control_plane import ControlPlane, _exclusive, _free_port, _Process, _tail
from tests.support.node_build import NodeBinaries
from tests.support.node_config import (
    NODE_IP,
    NODE_NAME,
    NodeLayout,
    cni_config,
    containerd_config,
    kubelet_config,
)

NODE_LOCK = Path("/tmp/gocd-reuse-real-node.lock")  # outside the node's folder, which sweeps remove
READY_TIMEOUT_S = 120.0  # a node is Ready in about 10 s here; a bound, not an expectation
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@contextmanager
def machine_lock() -> Iterator[None]:
    """The one node of this machine: a second test session waits here until the first one's node stops."""
    with _exclusive(NODE_LOCK):
        yield


class StartError(RuntimeError):
    """The node did not come up: the message has the tail of its logs."""


class RealNode:
    """A running containerd, kubelet and kube-scheduler, registered with `plane` as node `name`.

    `name` is 127.0.0.1, the node's name and address. stop() ends everything and removes the node's
    folder; the Node object stays in the API (nothing deletes it), NotReady once its lease runs out."""

    name = NODE_NAME

    def __init__(
        self,
        plane: ControlPlane,
        binaries: NodeBinaries,
        layout: NodeLayout,
        test_image: node_images.ImageArchive | None = None,
    ) -> None:
        self.plane = plane
        self.binaries = binaries
        self.layout = layout
        self.test_image = test_image  # imported at every start
        self.snapshotter = "overlayfs"
        self._processes: dict[str, _Process] = {}

    @classmethod
    def start(
        cls,
        plane: ControlPlane,
        binaries: NodeBinaries,
        layout: NodeLayout | None = None,
        test_image: node_images.ImageArchive | None = None,
    ) -> RealNode:
        """Sweep, configure, start containerd (with the pause image and `test_image`), the kubelet and
        the scheduler; returns once the node is Ready and schedulable. Hold machine_lock() around it."""
        node = cls(plane, binaries, layout or NodeLayout(), test_image)
        try:
            node._start()
        except BaseException:
            node.stop()
            raise
        return node

    def __enter__(self) -> RealNode:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the daemons and remove all the node's pods' containers, mounts, cgroups and files."""
        atexit.unregister(self.stop)
        for name in ("kube-scheduler", "kubelet"):
            if name in self._processes:
                self._processes[name].stop()
        node_cleanup.sweep(self.layout)
        for process in self._processes.values():
            process.stop()  # reaped here (the sweep killed it) and its log closed
        self._processes = {}

    def kill(self) -> None:
        """SIGKILL containerd, the kubelet and the scheduler, as a crash of the test run would: the pods'
        containers and containerd's shims keep running, and the mounts stay. start_again() sweeps them."""
        for process in self._processes.values():
            process.stop(signal.SIGKILL)
        self._processes = {}

    def start_again(self) -> None:
        """Start the node again after stop() or kill(), on the same control plane, under the same name.
        The start sweeps away what the previous run left first, as after a crashed test session."""
        assert not self._processes, "stop() or kill() first"
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def daemon_pids(self) -> dict[str, int]:
        """containerd's, the kubelet's and the scheduler's pids."""
        return {
            name: process.popen.pid for name, process in self._processes.items() if process.popen is not None
        }

    def import_image(self, archive: node_images.ImageArchive) -> None:
        """Import an OCI archive into the node's containerd, where the kubelet finds it: pods then name
        `archive.name` with imagePullPolicy Never (or IfNotPresent)."""
        self._ctr("images", "import", "--snapshotter", self.snapshotter, str(archive.path))

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {path.name} (last lines):\n{_tail(path)}"
            for path in sorted(self.layout.log_dir.glob("*.log"))
        )

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.plane.admin_api_client())

    # starting

    def _ctr(self, *args: str) -> str:
        command = ["ctr", "--address", str(self.layout.containerd_socket), "--namespace", "k8s.io", *args]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise StartError(f"{' '.join(command)} failed: {result.stderr.strip()}\n{self.log_tails()}")
        return result.stdout

    def _start(self) -> None:
        layout = self.layout
        node_cleanup.sweep(layout)
        atexit.register(self.stop)  # a test run that ends without teardown leaves no node behind
        for folder in (
            layout.root,
            layout.config_dir,
            layout.log_dir,
            layout.cni_config_dir,
            layout.pod_logs,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        node_cleanup.save_sysctls(layout)
        pause = node_images.pause_image(self.binaries.pause)
        self._start_containerd(pause.name)
        self.import_image(pause)
        if self.test_image is not None:
            self.import_image(self.test_image)
        self._start_kubelet()
        self._start_scheduler()
        self._wait_ready()

    def _launch(self, name: str, argv: list[str]) -> None:
        process = _Process(name, argv, self.layout.log_dir / f"{name}.log")
        process.start()
        self._processes[name] = process
        self.layout.pid_file.write_text(json.dumps(self.daemon_pids()))

    def _start_containerd(self, sandbox_image: str) -> None:
        config = self.layout.config_dir / "containerd.toml"
        config.write_text(containerd_config(self.layout, sandbox_image, self.snapshotter))
        (self.layout.cni_config_dir / "10-loopback.conflist").write_text(json.dumps(cni_config()))
        self._launch("containerd", ["containerd", "--config", str(config)])
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            self._check_running()
            probe = subprocess.run(
                ["ctr", "--address", str(self.layout.containerd_socket), "version"],
                capture_output=True,
                check=False,
            )
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise StartError(
                    f"containerd did not answer within {READY_TIMEOUT_S:.0f} s\n{self.log_tails()}"
                )
            time.sleep(0.1)

    def _start_kubelet(self) -> None:
        config_dir = self.layout.config_dir
        cert, key = config_dir / "kubelet.crt", config_dir / "kubelet.key"
        self.plane.serving_certificate(NODE_IP, cert, key)
        kubeconfig = self.plane.client_kubeconfig(
            f"system:node:{NODE_NAME}", ["system:nodes"], config_dir / "kubelet.kubeconfig"
        )
        self._bind_node_role()
        config = config_dir / "kubelet.yaml"
        settings = kubelet_config(self.layout, _free_port(), self.plane.ca_path, cert, key)
        config.write_text(yaml.safe_dump(settings))
        self._launch(
            "kubelet",
            [
                str(self.binaries.kubelet),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.layout.kubelet_root}",
                f"--cert-dir={config_dir / 'kubelet-pki'}",
                # No --node-ip: the kubelet refuses a loopback one, but takes a hostname that is an address as
                # the node's address (pkg/kubelet/nodestatus/setters.go, NodeAddress).
                f"--hostname-override={NODE_NAME}",
                "--v=1",
            ],
        )

    def _bind_node_role(self) -> None:
        """The kubelet's rights: the bootstrap ClusterRole system:node. A cluster grants them through the
        Node authorizer instead; kube-apiserver runs here with RBAC alone, and one node needs no more."""
        rbac = client.RbacAuthorizationV1Api(self.plane.admin_api_client())
        binding = {
            "metadata": {"name": f"system:node:{NODE_NAME}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"system:node:{NODE_NAME}"}
            ],
        }
        try:
            rbac.create_cluster_role_binding(binding)
        except ApiException as error:
            if error.status != 409:
                raise

    def _start_scheduler(self) -> None:
        kubeconfig = self.plane.client_kubeconfig(
            "system:kube-scheduler", [], self.layout.config_dir / "scheduler.kubeconfig"
        )
        self._launch(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )

    def _check_running(self) -> None:
        for name, process in self._processes.items():
            if process.exited() is not None:
                raise StartError(f"{name} exited with {process.exited()}\n{self.log_tails()}")

    def _wait_ready(self) -> None:
        """Until the Node reports Ready; then remove the not-ready taint, as the node lifecycle
        controller would, and wait until the change is stored."""
        core = self.core()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            self._check_running()
            try:
                node = core.read_node(NODE_NAME)
            except ApiException as error:
                if error.status != 404:
                    raise
                node = None
            if node is not None and _ready(node):
                taints = node.spec.taints or []
                if not any(taint.key == NOT_READY_TAINT for taint in taints):
                    return
                kept = [
                    {"key": t.key, "value": t.value, "effect": t.effect}
                    for t in taints
                    if t.key != NOT_READY_TAINT
                ]
                core.patch_node(
                    NODE_NAME,
                    {
                        "metadata": {"resourceVersion": node.metadata.resource_version},
                        "spec": {"taints": kept},
                    },
                )
                continue
            if time.monotonic() > deadline:
                raise StartError(
                    f"node {NODE_NAME} not Ready within {READY_TIMEOUT_S:.0f} s\n{self.log_tails()}"
                )
            time.sleep(0.2)


def _ready(node: client.V1Node) -> bool:
    return any(
        condition.type == "Ready" and condition.status == "True"
        for condition in (node.status.conditions or [])
    )


def main(argv: list[str]) -> int:
    """`python -m tests.support.real_node build`: the Debian packages, the binaries and the images."""
    if argv != ["build"]:
        print("usage: python -m tests.support.real_node build", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        node_build.install_tools()
        binaries = node_build.build()
        images = [node_images.pause_image(binaries.pause), node_images.debian_image()]
    except (node_build.BuildError, container_image.BuildError) as error:
        print(error, file=sys.stderr)
        return 1
    print(
        f"real node: kubelet and kube-scheduler {binaries.kubernetes_version} in {binaries.kubelet.parent}, "
        f"images {', '.join(image.name for image in images)} ({time.monotonic() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
