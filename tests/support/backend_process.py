"""The backend as its own process, `python -m elastic_agent serve` on a free loopback port, as the
sidecar container or a service runs it: for the tests that need a real process (signals, start-up)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

import requests

from tests.support.live_stack import wait_until
from tests.support.paths import ROOT

# Given by each test (env=), never inherited: the test decides whether the token comes from a file.
TOKEN_VARIABLES = ("GOCD_ELASTIC_AGENT_TOKEN", "GOCD_ELASTIC_AGENT_CALLBACK_URL")


class BackendProcess:
    """Started by the constructor, which returns once it answers /healthz; `stderr` collects its log."""

    def __init__(
        self,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        launcher: Sequence[str] = ("-m", "elastic_agent"),  # tests/support/scaled_serve.py: on a shared clock
    ) -> None:
        environment = {key: value for key, value in os.environ.items() if key not in TOKEN_VARIABLES}
        environment.update(env or {})
        environment["PYTHONUNBUFFERED"] = "1"
        serve = ["serve", "--bind", "127.0.0.1:0", "--log-level", "WARNING", *args]  # later options win
        self.process = subprocess.Popen(
            [sys.executable, *launcher, *serve],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "listening on http://127.0.0.1:PORT"
        assert line.startswith("listening on "), f"backend did not start: {line!r} {self.stderr}"
        self.url = line.split()[-1]
        wait_until(self._healthy, 20, "the backend to answer /healthz")

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def terminate(self) -> int:
        """SIGTERM, as Kubernetes stops a container; its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(15)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no flush, nothing saved."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
