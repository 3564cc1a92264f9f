"""The backend's image, built (tests/support/container_image.py, with podman) and run as the chart runs it.

tests/unit/deploy/test_docker_image.py reads docker/Dockerfile and runs its entrypoint on this machine's
Python; this runs the image itself: as uid 1000 and gid 0 with a read-only root, every capability dropped, no
network but its loopback, an in-memory /tmp, and the token mounted as a file, as
docker/helm/values-gocd.yaml's sidecar runs it. It checks the chart's probes in the container, a plugin
request from the bridge jar (the one the chart's init container copies out of the image) to the containerised
backend, the end on SIGTERM within the chart's grace period, the advisor, and that the image carries nothing
beyond what the backend and the advisor need.

The image is built ahead of the tests, as the control plane is (scripts/test.sh: `python -m
tests.support.container_image build`), and the fixture builds it again, a cached lookup, so that it is always
the image of the tree under test; without podman, or when the build fails, the tests fail saying so.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
import tomllib
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.container_image import ROOT, RUNTIME_OPTIONS, BuildError, build, image_size

JAR = "/opt/gocd-reuse/plugin/kubernetes-reuse-elastic-agent.jar"
PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes-reuse"
BACKEND = "http://127.0.0.1:8155"  # the entrypoint's bind, on the container's loopback
READY_TIMEOUT_S = 60.0
# Room above the image's size (benchmarks/RESULTS.md section 12: the Debian base, about the size of
# python:3.11-slim, and the backend's venv), so that a stray layer or a forgotten cache fails the test.
SIZE_BUDGET_BYTES = 300_000_000
# What the image's Python has installed, without pip (which the image does not keep).
DISTRIBUTIONS = (
    "import importlib.metadata as m, json; print(json.dumps({d.name: d.version for d in m.distributions()}))"
)


def chart() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker" / "helm" / "values-gocd.yaml").read_text())
    return loaded["server"]


def podman(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}")
    return result


# As the chart's securityContext: non-root uid 1000 with gid 0, read-only root, no capabilities, no
# privilege escalation. No network but loopback: the backend's one client is the jar on the pod's loopback.
RESTRICTED = (
    *RUNTIME_OPTIONS,
    "--user",
    "1000:0",
    "--read-only",
    "--read-only-tmpfs=false",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--network",
    "none",
)


@pytest.fixture(scope="module")
def image() -> str:
    """The image of this very tree: built again here, which podman's layer cache makes a lookup when
    nothing changed (seconds), so that a test run after a change never runs an image of older code."""
    if shutil.which("podman") is None:
        pytest.fail(
            "podman is missing: run `python -m tests.support.container_image build` (scripts/test.sh does it)"
        )
    try:
        return build().image
    except BuildError as error:
        pytest.fail(f"the image could not be built: {error}")


@dataclass(frozen=True)
class Sidecar:
    """A running container of the image, started with the chart's sidecar args and mounts."""

    name: str
    pid: int
    token: str
    token_file: Path

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False)


def start_sidecar(image: str, secret_dir: Path) -> Sidecar:
    """The chart's sidecar: its args, its env, the Secret as a read-only folder, /tmp an emptyDir."""
    [sidecar] = chart()["sidecarContainers"]
    [token_mount] = [m for m in sidecar["volumeMounts"] if m["name"] == "gocd-reuse-token"]
    secret_dir.mkdir()
    token = f"image-test-{uuid.uuid4().hex}"
    token_file = secret_dir / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o440)  # the chart's defaultMode: readable by gid 0, which the container runs as
    name = f"gocd-reuse-image-test-{uuid.uuid4().hex[:8]}"
    env = [f"--env={e['name']}={e['value']}" for e in sidecar["env"]]
    podman(
        "run", "--detach", "--name", name, *RESTRICTED, *env,
        "--tmpfs", "/tmp:rw,size=16m,mode=1777",
        "--volume", f"{secret_dir}:{token_mount['mountPath']}:ro",
        image, *sidecar["args"],
    )  # fmt: skip
    pid = int(podman("inspect", "--format", "{{.State.Pid}}", name).stdout)
    started = Sidecar(name, pid, token, token_file)
    probe = sidecar["startupProbe"]["exec"]["command"]
    deadline = time.monotonic() + READY_TIMEOUT_S
    while started.exec(*probe).returncode != 0:
        if time.monotonic() > deadline:
            logs = podman("logs", name, check=False)
            raise AssertionError(f"the startup probe never passed:\n{logs.stdout}{logs.stderr}")
        time.sleep(0.5)
    return started


@pytest.fixture(scope="module")
def sidecar(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    started = start_sidecar(image, tmp_path_factory.mktemp("sidecar") / "gocd-reuse")
    yield started
    podman("rm", "--force", "--time", "0", started.name, check=False)


@pytest.fixture(scope="module")
def godata(image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty /godata into which the chart's init container command, run in the image, copied the jar."""
    [init] = chart()["initContainers"]
    [mount] = init["volumeMounts"]
    folder = tmp_path_factory.mktemp("godata")
    folder.chmod(0o770)  # writable by gid 0, as the chart's volume is for the GoCD server's group
    command = init["command"]
    podman(
        "run", "--rm", *RESTRICTED, "--volume", f"{folder}:{mount['mountPath']}",
        "--entrypoint", command[0], image, *command[1:],
    )  # fmt: skip
    return folder


@pytest.mark.slow
def test_the_charts_probes_pass_in_a_read_only_container_with_only_loopback(sidecar: Sidecar) -> None:
    [chart_sidecar] = chart()["sidecarContainers"]
    probe = chart_sidecar["livenessProbe"]["exec"]["command"]
    assert sidecar.exec(*probe).returncode == 0
    for path in ("/readyz", "/healthz"):
        answered = sidecar.exec("python", "-m", "elastic_agent", "probe", "--url", f"{BACKEND}{path}")
        assert answered.returncode == 0, f"{path}: {answered.stdout}{answered.stderr}"
    interfaces = sidecar.exec("cat", "/proc/net/dev").stdout.splitlines()[2:]
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]
    refused = sidecar.exec("touch", "/opt/gocd-reuse/written")
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    assert (
        sidecar.exec("id", "-u").stdout.strip() == "1000" and sidecar.exec("id", "-g").stdout.strip() == "0"
    )


@pytest.mark.slow
def test_the_init_containers_command_copies_the_jar_into_an_empty_godata(godata: Path) -> None:
    [copied] = [p.relative_to(godata).as_posix() for p in godata.rglob("*") if p.is_file()]
    assert copied == "plugins/external/kubernetes-reuse-elastic-agent.jar"
    with zipfile.ZipFile(godata / copied) as jar:
        assert f'id="{PLUGIN_ID}"' in jar.read("plugin.xml").decode()


def go_plugin_api(tmp_path: Path) -> str:
    """go-plugin-api, which GoCD provides to the jar: the version bridge/pom.xml names, through Maven."""
    listing = tmp_path / "provided.classpath"
    subprocess.run(
        [
            "mvn", "-q", "-B", "-ntp", "-f", str(ROOT / "bridge" / "pom.xml"), "dependency:build-classpath",
            "-Dmdep.includeScope=provided", f"-Dmdep.outputFile={listing}",
        ],
        check=True, timeout=300,
    )  # fmt: skip
    return listing.read_text().strip()


@pytest.mark.slow
def test_a_plugin_request_from_the_bridge_jar_reaches_the_backend_in_the_container_and_back(
    sidecar: Sidecar, godata: Path, tmp_path: Path
) -> None:
    """The bridge jar, as the GoCD server container runs it (GOCD_REUSE_BACKEND_URL, GOCD_REUSE_TOKEN_FILE),
    in the container's network namespace: the backend's loopback is the pod's, shared with the server."""
    jar = godata / "plugins" / "external" / "kubernetes-reuse-elastic-agent.jar"
    classpath = f"{jar}:{go_plugin_api(tmp_path)}"
    program = Path(__file__).parent / "image_bridge" / "PluginRequests.java"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "GOCD_REUSE_BACKEND_URL": BACKEND}
    env["GOCD_REUSE_TOKEN_FILE"] = str(sidecar.token_file)
    ran = subprocess.run(
        ["nsenter", f"--target={sidecar.pid}", "--net", "java", "-cp", classpath, str(program)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    answers = {line.split("\t")[0]: line.split("\t")[1:] for line in ran.stdout.splitlines()}
    code, calls, body = answers["get-capabilities"]
    assert code == "200", body
    assert json.loads(body)["supports_agent_status_report"] is True
    code, calls, body = answers["server-ping"]
    assert code == "200", body
    assert "go.processor.elastic-agents.list-agents" in calls.split(","), "the backend called back"
    assert sidecar.token not in ran.stdout + ran.stderr


@pytest.mark.slow
def test_sigterm_ends_the_backend_with_exit_code_0_within_the_charts_grace_period(
    image: str, tmp_path: Path
) -> None:
    grace_s = chart()["terminationGracePeriodSeconds"]
    stopping = start_sidecar(image, tmp_path / "gocd-reuse")
    try:
        started = time.monotonic()
        # As kubelet: SIGTERM, and SIGKILL only once the grace period is over (which would exit 137).
        podman("stop", "--time", str(grace_s), stopping.name, timeout=grace_s + 30)
        took_s = time.monotonic() - started
        exit_code = int(podman("inspect", "--format", "{{.State.ExitCode}}", stopping.name).stdout)
        logs = podman("logs", stopping.name).stderr
    finally:
        podman("rm", "--force", "--time", "0", stopping.name, check=False)
    assert exit_code == 0, logs
    assert took_s < grace_s / 2, f"{took_s:.1f} s of a {grace_s} s grace period"


def run_in_image(
    image: str, *command: str, volume: str | None = None, user: str = "1000:0"
) -> subprocess.CompletedProcess[str]:
    """A command in a new container of the image, restricted as the chart's containers are."""
    mounts = ["--volume", volume] if volume else []
    options = [*RESTRICTED, *mounts, "--user", user]  # the last --user wins
    return podman("run", "--rm", *options, "--entrypoint", command[0], image, *command[1:], check=False)


@pytest.mark.slow
def test_the_advisor_runs_in_the_image_on_a_trace_in_a_named_time_zone(image: str, tmp_path: Path) -> None:
    folder = tmp_path / "trace"  # pytest's own folder is closed to uid 1000
    folder.mkdir(mode=0o755)
    trace = folder / "trace.csv"
    trace.write_text(
        "at,profile,environment,pipeline,duration\n" + "".join(f"{i * 90},build,,app,60\n" for i in range(40))
    )
    trace.chmod(0o444)
    advised = run_in_image(
        image, "python", "-m", "elastic_agent", "advise", "/trace/trace.csv", "--timezone", "Europe/Berlin",
        volume=f"{folder}:/trace:ro",
    )  # fmt: skip
    assert advised.returncode == 0, advised.stderr
    assert re.search(r"^Recommended: IdleTimeout=", advised.stdout, re.MULTILINE), advised.stdout
    assert run_in_image(image, "python", "-m", "elastic_agent", "advise", "--help").returncode == 0


@pytest.mark.slow
def test_the_image_carries_the_pinned_runtime_dependencies_and_no_build_or_test_tools(image: str) -> None:
    listed = run_in_image(image, "python", "-c", DISTRIBUTIONS)
    assert listed.returncode == 0, listed.stderr
    installed = {
        name.lower().replace("_", "-"): version for name, version in json.loads(listed.stdout).items()
    }
    pins = dict(
        line.lower().replace("_", "-").split("==")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    unpinned = {
        name for name in installed if name not in pins and name != "gocd-kubernetes-reuse-elastic-agent"
    }
    assert not unpinned, f"installed but not in constraints.txt: {unpinned}"
    assert all(installed[name] == pins[name] for name in installed if name in pins)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, requirements in extras.items():
        for requirement in requirements:
            name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            assert name not in installed, f"{name}: of the {extra} extra, not needed to serve or advise"
    assert "pip" not in installed and "setuptools" not in installed, "they install the backend, and are done"
    tools = "for tool in java javac mvn gcc cc make git apt-get; do command -v $tool || true; done"
    found = run_in_image(image, "sh", "-c", tools).stdout.split()
    assert found == ["/usr/bin/apt-get"], f"no build tools: {found}"  # apt-get: Debian's own, in every base
    leftovers = (
        "ls -d /root/.cache /home/*/.cache /opt/gocd-reuse/src /var/lib/apt/lists/*_Packages* "
        "/var/cache/apt/*.bin /var/cache/apt/archives/*.deb 2>/dev/null || true"
    )
    left = run_in_image(image, "sh", "-c", leftovers, user="0:0")  # root: /root is closed to uid 1000
    assert left.returncode == 0 and left.stdout == "", f"no caches, sources or package lists: {left.stdout}"
    assert image_size(image) < SIZE_BUDGET_BYTES, f"{image_size(image) / 1e6:.0f} MB"


@pytest.mark.slow
def test_the_jar_in_the_image_is_the_one_the_init_container_copies(image: str, godata: Path) -> None:
    listed = run_in_image(image, "sh", "-c", f"sha256sum {JAR}")
    assert listed.returncode == 0, listed.stderr
    copied = godata / "plugins" / "external" / "kubernetes-reuse-elastic-agent.jar"
    assert hashlib.sha256(copied.read_bytes()).hexdigest() in listed.stdout


@pytest.mark.slow
def test_the_jar_and_the_backend_in_the_image_are_of_one_release(image: str, godata: Path) -> None:
    """The image carries the jar and the backend of one build: the version the copied jar sends
    (bridge-version.properties, filtered by Maven) is the version the image's backend answers with."""
    copied = godata / "plugins" / "external" / "kubernetes-reuse-elastic-agent.jar"
    with zipfile.ZipFile(copied) as jar:
        properties = jar.read("bridge-version.properties").decode()
    [jar_version] = re.findall(r"^version=(\S+)$", properties, re.MULTILINE)
    answered = run_in_image(image, "python", "-m", "elastic_agent", "--version")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == jar_version, (answered.stdout, jar_version)
