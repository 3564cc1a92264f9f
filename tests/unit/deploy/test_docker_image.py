"""The backend's image (docker/Dockerfile), read with a Dockerfile parser since no Docker engine runs
here: the user, the entrypoint, the jar's path, the dependency set; and the entrypoint command run as
the image would run it."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
import yaml
from dockerfile_parse import DockerfileParser

from benchmarks.soak import allocator_in_use
from tests.support.paths import ROOT

JAR = "/opt/gocd-reuse/plugin/kubernetes-reuse-elastic-agent.jar"
ENTRYPOINT = ["python", "-m", "elastic_agent", "serve", "--bind", "127.0.0.1:8155"]


def parser(build_args: dict[str, str] | None = None) -> DockerfileParser:
    return DockerfileParser(fileobj=(ROOT / "docker" / "Dockerfile").open("rb"), build_args=build_args)


def instructions() -> list[dict[str, Any]]:
    return list(parser().structure)


def final_stage() -> list[dict[str, Any]]:
    steps = instructions()
    last_from = max(i for i, step in enumerate(steps) if step["instruction"] == "FROM")
    return steps[last_from:]


def values(name: str) -> list[str]:
    return [step["value"] for step in final_stage() if step["instruction"] == name]


def chart_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker" / "helm" / "values-gocd.yaml").read_text())
    return loaded


def test_the_image_runs_as_the_gocd_server_does_uid_1000_gid_0() -> None:
    assert values("USER") == ["1000:0"]


def test_the_entrypoint_serves_the_bridge_contract_on_the_pods_loopback() -> None:
    [entrypoint] = values("ENTRYPOINT")
    assert yaml.safe_load(entrypoint) == ENTRYPOINT, "exec form: SIGTERM reaches Python, not a shell"


def test_the_jar_is_copied_from_the_bridge_build_to_the_path_the_init_container_copies_from() -> None:
    copies = [step["value"].split() for step in final_stage() if step["instruction"] == "COPY"]
    assert ["--from=bridge", "/tmp/kubernetes-reuse-elastic-agent.jar", JAR] in copies
    [init] = chart_values()["server"]["initContainers"]
    assert JAR in " ".join(init["command"]) and "/godata/plugins/external" in " ".join(init["command"])
    bridge = [s for s in instructions() if s["instruction"] == "FROM" and s["value"].endswith(" AS bridge")]
    assert bridge, "the jar is built in the image's own bridge stage"
    artifact = re.search(r"<artifactId>([^<]+)</artifactId>", (ROOT / "bridge" / "pom.xml").read_text())
    assert artifact is not None
    built = " ".join(s["value"] for s in instructions() if s["instruction"] == "RUN")
    assert f"target/{artifact.group(1)}-*.jar" in built


def test_the_backend_is_installed_with_the_pinned_dependency_set_the_tests_use() -> None:
    runs = " ".join(values("RUN"))
    assert "pip install -c constraints.txt ." in runs
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    declared = re.findall(r'^\s+"([A-Za-z0-9_.-]+)[><=!~]', _dependencies_block(), re.MULTILINE)
    for name in declared:
        key = name.lower().replace("_", "-")
        assert key in pins, f"{name} is not pinned in constraints.txt"
        assert importlib.metadata.version(name) == pins[key], f"the tests run another {name} than the image"


def _dependencies_block() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("dependencies = [")
    return text[start : text.index("]", start)]


def test_base_images_are_build_arguments_whose_defaults_are_the_public_images() -> None:
    """tests/support/container_image.py builds with bases made from Debian's packages; the defaults stay
    public."""
    froms = [step["value"].split()[0] for step in instructions() if step["instruction"] == "FROM"]
    assert froms == ["${MAVEN_IMAGE}", "${PYTHON_IMAGE}"]
    assert parser().parent_images == ["maven:3.9-eclipse-temurin-17", "python:3.11-slim"]
    swapped = {"MAVEN_IMAGE": "localhost/maven:1", "PYTHON_IMAGE": "localhost/python:1"}
    assert parser(swapped).parent_images == ["localhost/maven:1", "localhost/python:1"]


def test_base_images_are_pinned_and_nothing_is_written_to_the_image_at_run_time() -> None:
    for image in parser().parent_images:
        assert re.search(r":\d+\.\d+", image), f"{image}: pin a major.minor tag"
    env = " ".join(values("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "TMPDIR=/tmp" in env
    for container in (
        chart_values()["server"]["sidecarContainers"] + chart_values()["server"]["initContainers"]
    ):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


def image_preload() -> str:
    [preload] = re.findall(r"\bLD_PRELOAD=(\S+)", " ".join(values("ENV")))
    return str(preload)


def test_the_image_installs_jemalloc_and_preloads_it_by_its_soname() -> None:
    installs = " ".join(step["value"] for step in final_stage() if step["instruction"] == "RUN")
    assert re.search(r"apt-get install\b.*\blibjemalloc2\b", installs)
    assert image_preload() == "libjemalloc.so.2", "a soname, so that any architecture's path is found"


def test_every_file_the_image_copies_exists_and_is_in_the_build_context() -> None:
    kept = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for step in instructions():
        if step["instruction"] != "COPY" or step["value"].startswith("--from"):
            continue
        for source in step["value"].split()[:-1]:
            assert (ROOT / source).exists(), source
            # A folder is in the context when it, or each of the parts of it that are kept, is.
            parts = {k for k in kept if k.startswith(source.rstrip("/") + "/")}
            assert source.rstrip("/") in kept or parts, f"{source} is left out by .dockerignore"
            assert all((ROOT / part).exists() for part in parts)


def test_the_entrypoint_with_the_charts_args_serves_and_answers_the_charts_probes(tmp_path: Path) -> None:
    """The image's command as the chart's sidecar runs it (token from a file, TMPDIR an empty folder,
    no bytecode written, jemalloc preloaded as the image's ENV says), from outside the repository, and
    its exec probes."""
    [sidecar] = chart_values()["server"]["sidecarContainers"]
    token = tmp_path / "token"
    token.write_text("a-secret-from-a-kubernetes-secret\n")
    args = [a if a != "/var/run/secrets/gocd-reuse/token" else str(token) for a in sidecar["args"]]
    command = [sys.executable, *ENTRYPOINT[1:-1], "127.0.0.1:0", *args]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    env["LD_PRELOAD"] = image_preload()
    env.pop("GOCD_ELASTIC_AGENT_TOKEN", None)
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        assert allocator_in_use(process.pid) == "jemalloc"
        url = line.split()[-1]
        deadline = time.monotonic() + 20
        while requests.get(f"{url}/healthz", timeout=2).status_code != 200:
            assert time.monotonic() < deadline
        for probe in ("startupProbe", "livenessProbe"):
            probe_command = sidecar[probe]["exec"]["command"]
            probe_command = [
                sys.executable,
                *probe_command[1:-1],
                probe_command[-1].replace("127.0.0.1:8155", url[7:]),
            ]
            assert subprocess.run(probe_command, env=env, timeout=20, check=False).returncode == 0, probe
        headers = {"Authorization": "Bearer a-secret-from-a-kubernetes-secret"}
        answer = requests.post(
            f"{url}/gocd/plugin/cd.go.elastic-agent.get-capabilities", headers=headers, timeout=5
        )
        assert answer.status_code == 200
    finally:
        process.terminate()
        assert process.wait(15) == 0, "SIGTERM ends it cleanly"
    assert not list(tmp_path.rglob("*.pyc"))


def test_the_charts_init_container_and_sidecar_use_one_image() -> None:
    server = chart_values()["server"]
    images = {container["image"] for container in server["sidecarContainers"] + server["initContainers"]}
    assert len(images) == 1, "the jar and the backend come from one build"
