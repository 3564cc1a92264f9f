"""Where the real node keeps its state, and the configuration of its containerd, CNI and kubelet, as data.

tests/support/real_node.py runs these processes; this module only says how they are configured, so that each
choice sits beside its reason and can be read (and tested) without running anything.

Everything lives under one fixed folder of the machine (NodeLayout.root), never in the system's paths
(/var/lib/containerd, /run/containerd, /var/lib/kubelet, /var/log/pods): the node shares nothing with
another containerd or podman on the machine, and the leftovers of a node that crashed are found at the
next start because they are in the same place. The paths that cannot be moved: the kubelet's
/var/log/containers (symbolic links to the pod logs) and /var/lib/kubelet/device-plugins (its socket),
and the shims' sockets in /run/containerd/s; tests/support/node_cleanup.py removes what the node put there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODE_NAME = "127.0.0.1"  # the kubelet refuses a loopback --node-ip unless the node is named after it
NODE_IP = "127.0.0.1"
# Fixed, not $TMPDIR: the next start must find what a crashed one left, and the socket path stay short.
DEFAULT_ROOT = Path("/tmp/gocd-reuse-real-node")
CNI_PLUGIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CONTAINER_LOG_LINKS = Path("/var/log/containers")  # the kubelet's, fixed in its code
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")  # the kubelet's socket for device plugins, fixed too
SHIM_SOCKETS = Path("/run/containerd/s")  # containerd's shims' sockets, whatever containerd's state folder


@dataclass(frozen=True)
class NodeLayout:
    """The paths of one node, all under `root` (short: containerd's socket path must fit in 108 bytes)."""

    root: Path = DEFAULT_ROOT

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd-state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        """runc's state of this node's containers: runc's default is shared with every containerd here."""
        return self.root / "runc"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def cni_config_dir(self) -> Path:
        return self.root / "cni"

    @property
    def config_dir(self) -> Path:
        """Configuration files, certificates and kubeconfigs."""
        return self.root / "config"

    @property
    def log_dir(self) -> Path:
        """containerd.log, kubelet.log, kube-scheduler.log."""
        return self.root / "logs"

    @property
    def pid_file(self) -> Path:
        """The pids of the node's daemons, read by the next start when this one did not stop cleanly."""
        return self.root / "daemons.json"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def containerd_config(layout: NodeLayout, sandbox_image: str, snapshotter: str) -> str:
    """containerd 1.6's configuration (version 2) for the kubelet's CRI plugin.

    restrict_oom_score_adj: this machine refuses to lower a process's oom_score_adj below its own, and
    the sandbox asks for -998. SystemdCgroup false: the kubelet's cgroup driver is cgroupfs (no systemd
    runs here). runc's Root moves its state out of the machine-wide default, so that stopping this node
    can kill exactly its own containers."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = f"{cri}.containerd.runtimes.runc"
    lines = [
        "version = 2",
        f"root = {_toml_string(str(layout.containerd_root))}",
        f"state = {_toml_string(str(layout.containerd_state))}",
        # Snapshotters this machine has no use for (and whose probing logs errors).
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
        "[grpc]",
        f"  address = {_toml_string(str(layout.containerd_socket))}",
        f"[{cri}]",
        f"  sandbox_image = {_toml_string(sandbox_image)}",
        "  restrict_oom_score_adj = true",
        '  stream_server_address = "127.0.0.1"',
        # Pods without hostNetwork get their network namespace here, not in the machine's /var/run/netns.
        "  netns_mounts_under_state_dir = true",
        f"[{cri}.containerd]",
        f"  snapshotter = {_toml_string(snapshotter)}",
        '  default_runtime_name = "runc"',
        f"[{runc}]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{runc}.options]",
        "  SystemdCgroup = false",
        '  BinaryName = "runc"',
        f"  Root = {_toml_string(str(layout.runc_root))}",
        f"[{cri}.cni]",
        f"  bin_dir = {_toml_string(str(CNI_PLUGIN_DIR))}",
        f"  conf_dir = {_toml_string(str(layout.cni_config_dir))}",
    ]
    return "\n".join(lines) + "\n"


def cni_config() -> dict[str, Any]:
    """A pod network of loopback only. Test pods use hostNetwork, which needs no CNI at all, but without a
    network configuration containerd reports NetworkReady=false and the kubelet keeps the node NotReady.
    With this one, a pod without hostNetwork gets a network namespace with `lo` and nothing else: no
    address outside 127.0.0.0/8 is ever configured."""
    return {"cniVersion": "1.0.0", "name": "loopback-only", "plugins": [{"type": "loopback"}]}


def kubelet_config(
    layout: NodeLayout, port: int, client_ca: Path, tls_cert: Path, tls_key: Path
) -> dict[str, Any]:
    """The KubeletConfiguration. Bound to 127.0.0.1 (the kubelet's default is every address); cgroup v1
    accepted (failCgroupV1: this machine has no unified hierarchy of its own); the read-only port and the
    healthz port off; no static pods; eviction thresholds low, since the disk is shared with other work
    and a test node must not evict its pods because another build fills it."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "failSwapOn": False,
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.kubelet_root / "volume-plugins"),
        "tlsCertFile": str(tls_cert),
        "tlsPrivateKeyFile": str(tls_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        # The one client is kube-apiserver, in system:masters: the SubjectAccessReview always allows it.
        "authorization": {"mode": "Webhook"},
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,  # never remove the imported images: nothing could pull them again
        "imageGCLowThresholdPercent": 99,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusReportFrequency": "10s",
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        "clusterDomain": "cluster.local",
    }
