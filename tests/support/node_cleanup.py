"""Removing every trace of the real node: its processes, its pods' containers, its mounts, its cgroups.

A node is more than three processes. containerd starts a shim per pod, which outlives containerd; runc's
containers run in the kubelet's `kubepods` cgroups; the shims and the kubelet mount overlay root
filesystems, /dev/shm of each sandbox and pod volumes. A test run that is killed leaves all of that
behind, and the next node would find pods it does not know, mounts it cannot remove and a busy cgroup.
So the same sweep runs before a node starts and after it stops, and works from what the machine shows
(/proc, /proc/self/mountinfo, the cgroup tree, iptables, the node's folder) rather than from what the
previous run remembered; the pid file only helps to stop the daemons politely first.

`leftovers()` lists what is still there, which is what the tests check after a stop. The kubelet's own
changes to kernel settings (it sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops when it
starts, and has no setting to leave them alone) are undone here too, from the values saved before the
first start (save_sysctls(), which tests/support/real_node.py calls before the kubelet starts). The sweep
takes the `kubepods` cgroups to be the node's own: one node runs per machine (tests/support/real_node.py,
machine_lock).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from tests.support.node_config import CONTAINER_LOG_LINKS, DEVICE_PLUGINS, SHIM_SOCKETS, NodeLayout

CGROUP_V1 = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"  # the kubelet's cgroup of all pods (cgroupfs driver)
STOP_TIMEOUT_S = 10.0
# What the kubelet changes at start (pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables).
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


# The kubelet's iptables chains (pkg/kubelet/kubelet_network_linux.go, syncIPTablesRules): the hint and
# the canary in every table, and in IPv4's filter table KUBE-FIREWALL, jumped to from INPUT and OUTPUT.
_IPTABLES_CLEANUP = tuple(
    [
        (binary, table, action, "KUBE-KUBELET-CANARY")
        for binary in ("iptables", "ip6tables")
        for table in ("mangle", "nat", "filter")
        for action in ("-F", "-X")
    ]
    + [
        (binary, "mangle", action, "KUBE-IPTABLES-HINT")
        for binary in ("iptables", "ip6tables")
        for action in ("-F", "-X")
    ]
)
_FIREWALL_CLEANUP = (
    ("-D", "INPUT", "-j", "KUBE-FIREWALL"),
    ("-D", "OUTPUT", "-j", "KUBE-FIREWALL"),
    ("-F", "KUBE-FIREWALL"),
    ("-X", "KUBE-FIREWALL"),
)


def _remove_kubelet_iptables() -> None:
    """The kubelet adds chains to the machine's iptables at start and leaves them at exit."""
    if shutil.which("iptables") is None:
        return
    commands = [
        [binary, "-w", "-t", table, action, chain] for binary, table, action, chain in _IPTABLES_CLEANUP
    ]
    commands += [["iptables", "-w", "-t", "filter", *rule] for rule in _FIREWALL_CLEANUP]
    for command in commands:
        subprocess.run(command, capture_output=True, check=False)  # a chain that is not there is fine


def _kubelet_chains() -> list[str]:
    if shutil.which("iptables-save") is None:
        return []
    chains = []
    for binary in ("iptables-save", "ip6tables-save"):
        dump = subprocess.run([binary], capture_output=True, text=True, check=False).stdout
        chains += [
            f"{binary}: {line}"
            for line in dump.splitlines()
            if line.startswith(":KUBE-")
            and line.split()[0][1:] in ("KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-FIREWALL")
        ]
    return chains


def _sysctls_file(layout: NodeLayout) -> Path:
    return layout.root / "sysctls.json"


def save_sysctls(layout: NodeLayout) -> None:
    """Keep the machine's values of what the kubelet will change; an older record wins (it was taken
    before a node that crashed changed them)."""
    path = _sysctls_file(layout)
    if path.exists():
        return
    values = {name: (Path("/proc/sys") / name).read_text().strip() for name in KUBELET_SYSCTLS}
    path.write_text(json.dumps(values))


def _restore_sysctls(layout: NodeLayout) -> None:
    path = _sysctls_file(layout)
    if not path.exists():
        return
    for name, value in json.loads(path.read_text()).items():
        target = Path("/proc/sys") / name
        if target.read_text().strip() != value:
            target.write_text(value)
    path.unlink()


def _cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path("/proc") / str(pid) / "stat"
    try:
        return status.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except (OSError, IndexError):
        return False


def _processes_naming(root: Path) -> list[int]:
    """Processes whose command line names the node's folder: its daemons and containerd's shims (which
    are given containerd's socket path)."""
    own = os.getpid()
    return [pid for pid in _pids() if pid != own and str(root) in _cmdline(pid)]


def _cgroup_dirs() -> list[Path]:
    """Every cgroup under `kubepods`, in every v1 hierarchy, deepest first."""
    found: list[Path] = []
    if not CGROUP_V1.is_dir():
        return found
    for hierarchy in CGROUP_V1.iterdir():
        top = hierarchy / KUBEPODS
        if top.is_dir() and not top.is_symlink():
            found.extend(Path(path) for path, _, _ in os.walk(top))
    return sorted(found, key=lambda path: len(path.parts), reverse=True)


def pod_processes() -> set[int]:
    """Every process in a pod's cgroup: the containers' processes, however they were started."""
    pids: set[int] = set()
    for folder in _cgroup_dirs():
        try:
            pids.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
        except OSError:
            continue
    return pids


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under `root`, deepest first (mountinfo's octal escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    return sorted(set(points), key=lambda point: point.count("/"), reverse=True)


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue


def _wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    remaining = [pid for pid in pids if is_alive(pid)]
    while remaining and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = [pid for pid in remaining if is_alive(pid)]
    return remaining


def _stop(pids: list[int], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, a bounded wait, then SIGKILL."""
    _signal_all(pids, signal.SIGTERM)
    _signal_all(_wait_gone(pids, timeout_s), signal.SIGKILL)
    _wait_gone(pids, timeout_s)


def _daemon_pids(layout: NodeLayout) -> dict[str, int]:
    try:
        recorded: dict[str, int] = json.loads(layout.pid_file.read_text())
    except (OSError, ValueError):
        return {}
    # Only a process that still names the folder is ours: a pid may have been reused since.
    return {name: pid for name, pid in recorded.items() if str(layout.root) in _cmdline(pid)}


def shim_sockets(layout: NodeLayout) -> list[Path]:
    """The sockets of this containerd's shims that exist: each is named after the SHA-256 of containerd's
    address, the namespace and the task id (containerd's runtime/v2/shim, SocketAddress). A shim that is
    killed leaves its socket; the task ids are the folders of containerd's state."""
    tasks = layout.containerd_state / "io.containerd.runtime.v2.task"
    found = []
    for namespace in tasks.iterdir() if tasks.is_dir() else []:
        for task in namespace.iterdir():
            name = hashlib.sha256(
                f"{layout.containerd_socket}/{namespace.name}/{task.name}".encode()
            ).hexdigest()
            found += [path for path in (SHIM_SOCKETS / name,) if path.exists()]
    return found


def _remove_kubelet_files(layout: NodeLayout) -> None:
    """What the kubelet writes outside its root folder: the log links to its pods' logs, its device
    plugin socket (and the folders, when nothing else is in them)."""
    if CONTAINER_LOG_LINKS.is_dir():
        for link in CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and str(os.readlink(link)).startswith(f"{layout.pod_logs}/"):
                link.unlink()
        with contextlib.suppress(OSError):  # the kubelet made it; kept when something else is in it
            CONTAINER_LOG_LINKS.rmdir()
    for name in ("kubelet.sock", "kubelet_internal_checkpoint"):
        (DEVICE_PLUGINS / name).unlink(missing_ok=True)
    for folder in (DEVICE_PLUGINS, DEVICE_PLUGINS.parent):
        try:
            folder.rmdir()
        except OSError:
            break  # missing, or holding something that is not the node's


def sweep(layout: NodeLayout) -> None:
    """Stop and remove everything of a node under `layout`, running or left by a crash, then the folder.

    In order: the kubelet and the scheduler (so that nothing restarts a container), every pod's processes
    (SIGKILL: a pod's grace period is the kubelet's business, and the kubelet is gone), runc's state of
    them, containerd and its shims (and their sockets), then the mounts, the pods' cgroups, the kubelet's
    files outside the folder, the kernel settings and the folder. Raises when a mount under the folder
    cannot be removed, rather than deleting files through it."""
    daemons = _daemon_pids(layout)
    sockets = shim_sockets(layout)
    _stop([pid for name, pid in daemons.items() if name != "containerd"])
    pods = pod_processes()
    _signal_all(pods, signal.SIGKILL)
    _wait_gone(pods, STOP_TIMEOUT_S)
    if layout.runc_root.is_dir():
        for container in os.listdir(layout.runc_root):
            subprocess.run(
                ["runc", "--root", str(layout.runc_root), "delete", "--force", container],
                capture_output=True,
                check=False,
            )
    _stop([pid for name, pid in daemons.items() if name == "containerd"])
    stragglers = _processes_naming(layout.root)
    _signal_all(stragglers, signal.SIGKILL)
    _wait_gone(stragglers, STOP_TIMEOUT_S)
    for socket in sockets:
        socket.unlink(missing_ok=True)
    for point in _mounts_under(layout.root):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
    remaining = _mounts_under(layout.root)
    if remaining:
        raise RuntimeError(f"cannot unmount {remaining}: {layout.root} is left as it is")
    for folder in _cgroup_dirs():
        try:
            folder.rmdir()
        except OSError:
            continue  # a cgroup still in use by a process that would not die: leftovers() names it
    _remove_kubelet_files(layout)
    _remove_kubelet_iptables()
    if layout.root.exists():
        _restore_sysctls(layout)
    shutil.rmtree(layout.root, ignore_errors=True)


def leftovers(layout: NodeLayout, pids: Iterable[int] = ()) -> list[str]:
    """What of a node is still on the machine: processes naming its folder, pods' processes, any of
    `pids` alive, mounts under its folder, pods' cgroups. Empty after sweep()."""
    found = [f"process {pid}: {_cmdline(pid)}" for pid in _processes_naming(layout.root)]
    found += [f"pod process {pid}: {_cmdline(pid)}" for pid in sorted(pod_processes())]
    found += [f"process {pid} still alive" for pid in pids if is_alive(pid)]
    found += [f"mount {point}" for point in _mounts_under(layout.root)]
    found += [f"cgroup {folder}" for folder in _cgroup_dirs()]
    found += [f"iptables chain {chain}" for chain in _kubelet_chains()]
    found += [f"shim socket {path}" for path in shim_sockets(layout)]
    found += [f"file {path}" for path in (DEVICE_PLUGINS / "kubelet.sock",) if path.exists()]
    return found
