"""Starting the service: refusals are one clear line, never a traceback; a started service is healthy and
has loaded nothing of the simulator."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import requests


def serve(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "GOCD_ELASTIC_AGENT_TOKEN"}
    if token is not None:
        env["GOCD_ELASTIC_AGENT_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "elastic_agent", "serve", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def one_clear_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_refuses_to_start_without_a_token() -> None:
    line = one_clear_line(serve("--bind", "127.0.0.1:0"))
    assert "no token" in line and "GOCD_ELASTIC_AGENT_TOKEN" in line


def test_a_bad_bind_address_is_one_clear_line() -> None:
    assert "HOST:PORT" in one_clear_line(serve("--bind", "nonsense", token="t"))


def test_an_unreadable_token_file_is_one_clear_line(tmp_path: Path) -> None:
    line = one_clear_line(serve("--token-file", str(tmp_path / "missing"), token=None))
    assert "cannot read the token file" in line


def test_a_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_clear_line(serve("--bind", f"127.0.0.1:{port}", token="t"))
    assert f"cannot listen on 127.0.0.1:{port}" in line


def test_the_service_starts_answers_healthz_and_stops_on_sigterm(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "elastic_agent",
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--token-file",
            str(token_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"listening on http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                break
        wrong = requests.post(f"http://127.0.0.1:{port}/gocd/plugin/cd.go.elastic-agent.get-icon", timeout=5)
        assert wrong.status_code == 401
        right = requests.post(
            f"http://127.0.0.1:{port}/gocd/plugin/cd.go.elastic-agent.get-icon",
            headers={"Authorization": "Bearer file-token"},
            timeout=5,
        )
        assert right.status_code == 200
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
    assert "file-token" not in (process.stderr.read() if process.stderr else "")


def test_a_negative_heap_trim_interval_is_one_clear_line() -> None:
    line = one_clear_line(serve("--heap-trim-every", "-5", token="t"))
    assert "--heap-trim-every must be 0 (never) or a number of seconds" in line


# Runs `serve` as `python -m elastic_agent serve` does (main thread, SIGTERM to stop) and lists, once it
# has answered requests and stopped, the simulator's modules it loaded, the advisor's module that runs
# the simulator, and matplotlib (the advisor's HTML report's plots). The lazy imports of the command line
# and of request handling count: they are why this is a running process and not the import-linter
# contract, which sees only the code.
_SERVE_AND_LIST = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time, urllib.request

    import elastic_agent.service.app
    import elastic_agent.service.cli
    import elastic_agent.service.wsgi
    from elastic_agent.cli import main

    url = "http://127.0.0.1:" + sys.argv[1]
    answers = []

    def exercise():
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(url + "/healthz", timeout=2)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            for name in ("get-capabilities", "get-icon", "plugin-status-report"):
                request = urllib.request.Request(
                    url + "/gocd/plugin/cd.go.elastic-agent." + name,
                    data=b"{}",
                    headers={"Authorization": "Bearer t"},
                    method="POST",
                )
                with urllib.request.urlopen(request, timeout=10) as answer:
                    answers.append(answer.status)
            with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
                answers.append(answer.status)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=exercise, daemon=True).start()
    code = main(["serve", "--bind", "127.0.0.1:" + sys.argv[1]])
    loaded = sorted(
        m for m in sys.modules
        if m.startswith("elastic_agent.simulation") or m == "elastic_agent.advisor.advise"
        or m.split(".")[0] == "matplotlib"
    )
    print(json.dumps({"code": code, "answers": answers, "simulation_modules": loaded}))
    """
)


def test_a_serving_backend_loads_no_module_of_the_simulator_nor_matplotlib() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GOCD_ELASTIC_AGENT_TOKEN": "t"}
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_AND_LIST, str(port)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["answers"] == [200, 200, 200, 200], result.stderr
    assert report["simulation_modules"] == []
    assert report["code"] == 0
