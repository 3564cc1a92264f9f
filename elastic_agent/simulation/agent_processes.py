"""Agents as processes: an AgentHost (agents.py) that runs an agent process (`command`) for each pod the
simulated kubelet starts, as a container runtime would run the pod's agent container.

The process gets the pod's GO_EA_* variables as they are, and STANDIN_SERVER_URL, the agent API of the
simulated GoCD server on loopback (gocd_agent_api.py), where the stand-in goes instead of GO_EA_SERVER_URL.
The plugin's go_server_url must name a host pods can reach, never a loopback address, so the pod's own value
stands for the server's name on a pod network; this host plays that network. Stopping the pod sends SIGTERM,
as the kubelet does, and does not wait (the kubelet's thread must not block); `stop()` ends and reaps every
process.

What runs is `command`'s: the tests' stand-in agent with this interpreter
(tests/support/doubles/standin_agent.py, `standin_command`), or a container of the agent image
(tests/real/test_agent_image.py); the demo runs no agent processes. It is given the pod's name and the names
of the variables, whose values are in its own environment (`podman run -e NAME` takes them from there, so no
key appears in a command line). Its output goes to a file per stream and, when the kubelet gives a console,
line by line to the pod's log too, as a container runtime's goes to the kubelet's.

A process that ends by itself (it exited, or something killed it) is reported to `on_exit` with its exit
code, as a container runtime reports a container's end to the kubelet, which then writes the container's
terminated state (the Stack gives the simulated kubelet's `agent_exited`). An end the host asked for (the
pod stopped) is not reported: the kubelet already knows."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from elastic_agent.simulation.agents import Console

SERVER_URL_VAR = "STANDIN_SERVER_URL"
AgentCommand = Callable[[str, Sequence[str]], list[str]]  # (pod name, variable names) -> argv
ExitListener = Callable[[str, int], None]  # (pod name, exit code)


class ProcessAgentHost:
    def __init__(
        self,
        server_url: str,
        extra_env: Mapping[str, str] | None,
        command: AgentCommand,
    ) -> None:
        """`extra_env`: set in every agent process beside the pod's variables (the stand-in's intervals)."""
        self._server_url = server_url
        self._command = command
        self._extra_env = dict(extra_env or {})
        self._lock = threading.Lock()
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._stopping: set[str] = set()
        self.on_exit: ExitListener | None = None
        self._outputs = Path(tempfile.mkdtemp(prefix="standin-agents-"))

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        variables = {**env, **self._extra_env, SERVER_URL_VAR: self._server_url}
        # A container's variables are the pod's alone; PATH and HOME are for the command that starts it.
        process_env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), **variables}
        argv = self._command(pod_name, sorted(variables))
        with self._lock:
            if pod_name in self._processes:
                return
            out, err = self.stdout_path(pod_name), self.stderr_path(pod_name)
            if console is None:
                with out.open("wb") as stdout, err.open("wb") as stderr:
                    process = subprocess.Popen(argv, env=process_env, stdout=stdout, stderr=stderr)
            else:  # as a container runtime: both streams to the pod's log, and to the files
                pipe = subprocess.PIPE
                process = subprocess.Popen(argv, env=process_env, stdout=pipe, stderr=pipe)
                for stream, path in ((process.stdout, out), (process.stderr, err)):
                    threading.Thread(target=_pump, args=(stream, path, console), name=f"output-{pod_name}",
                                     daemon=True).start()  # fmt: skip
            self._processes[pod_name] = process
        threading.Thread(
            target=self._watch, args=(pod_name, process), name=f"agent-{pod_name}", daemon=True
        ).start()

    def _watch(self, pod_name: str, process: subprocess.Popen[bytes]) -> None:
        code = process.wait()
        with self._lock:
            asked = pod_name in self._stopping
            listener = self.on_exit
        if not asked and listener is not None:
            listener(
                pod_name, code if code >= 0 else 128 - code
            )  # killed by signal N: 128 + N, as a shell says

    def agent_stopped(self, pod_name: str) -> None:
        with self._lock:
            self._stopping.add(pod_name)
            process = self._processes.get(pod_name)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)

    def process(self, pod_name: str) -> subprocess.Popen[bytes] | None:
        with self._lock:
            return self._processes.get(pod_name)

    def pod_names(self) -> list[str]:
        with self._lock:
            return list(self._processes)

    def stdout_path(self, pod_name: str) -> Path:
        return self._outputs / f"{pod_name}.out"

    def stderr_path(self, pod_name: str) -> Path:
        return self._outputs / f"{pod_name}.err"

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            self._stopping.update(self._processes)
            processes = list(self._processes.values())
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _pump(stream: IO[bytes] | None, path: Path, console: Console) -> None:
    """Each line of a process's output to its file and to the pod's log, until the process closes it."""
    if stream is None:
        return
    with path.open("wb") as out, stream:
        for line in stream:
            out.write(line)
            out.flush()
            console(line.decode("utf-8", "replace").rstrip("\n"))
