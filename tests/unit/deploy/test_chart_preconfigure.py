"""The values' own preconfigure (docker/helm/values-gocd.yaml, `server.preconfigureCommand`): run as the
chart runs it, the command list exactly as written, with the real bash and curl, against GoCD's REST API
served on loopback (tests/support/doubles/gocd_rest/admin_api.py, modelled on gocd/gocd's controllers). A
fresh install gets this plugin's cluster profile, a reuse elastic profile and a pipeline whose second job runs
on the first job's pod (an existing server with pipelines gets the profiles alone); nothing makes the hook
fail, which would make Kubernetes restart the server container. On a server with security on it uses an
admin's token, or stops at the first refusal with one line in the container's log, so that the pod (out of its
Service while the hook runs) is not held back; and it writes nothing to /godata before GoCD answers, leaving
/godata/logs to the image's entrypoint."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_agent.simulation.gocd_model import GoCDConfig, Job
from tests.support.doubles.gocd_rest.admin_api import PLUGIN_ID, AdminState, serving
from tests.support.doubles.gocd_rest.admin_model import ADMIN
from tests.support.doubles.harness import VirtualStack
from tests.support.gocd_chart import charts_script_runs, server_pod
from tests.support.paths import ROOT
from tests.support.virtual_helpers import completed

VALUES = ROOT / "docker" / "helm" / "values-gocd.yaml"
POD_NAME = "gocd-server-6d9f7c8b5-x2x7k"  # a pod of the chart's Deployment "gocd-server"
HOOK_BOUND_S = 60.0  # a bound for the test, not an expectation: the script ends in about a second here


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(VALUES.read_text())
    return loaded


def hook_command() -> list[str]:
    pod = server_pod(values())
    [server] = [c for c in pod["spec"]["containers"] if c["name"] == "gocd-server"]
    command: list[str] = server["lifecycle"]["postStart"]["exec"]["command"]
    return command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def hook(
    state: AdminState, logs: Path, *, server_after_s: float = 0.0, **extra_env: str
) -> Iterator[list[subprocess.CompletedProcess[str]]]:
    """Runs the hook while the API serves; the API starts `server_after_s` after the hook, as GoCD's
    Jetty listens only once the server is up. Yields the finished process (in a list, filled on exit)."""
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOSTNAME": POD_NAME,
        "GOCD_REUSE_PRECONFIGURE_API": f"http://127.0.0.1:{port}/go",
        "GOCD_REUSE_PRECONFIGURE_DIR": str(logs),
        "GOCD_REUSE_PRECONFIGURE_POLL_S": "0.05",
        # The container's log (PID 1's output in the pod) and the admin token's mount (none by default).
        "GOCD_REUSE_PRECONFIGURE_CONSOLE": str(container_log(logs)),
        "GOCD_REUSE_PRECONFIGURE_TOKEN_FILE": str(logs.parent.parent / "no-admin-token" / "token"),
        **extra_env,
    }
    result: list[subprocess.CompletedProcess[str]] = []
    runner = threading.Thread(target=lambda: result.append(subprocess.run(
        hook_command(), env=env, capture_output=True, text=True, timeout=HOOK_BOUND_S,
        check=False)))  # fmt: skip
    runner.start()
    time.sleep(server_after_s)
    with serving(state, port):
        runner.join(HOOK_BOUND_S)
    yield result


def container_log(logs: Path) -> Path:
    return logs.parent.parent / "container.log"


def console_lines(logs: Path) -> list[str]:
    """What the hook wrote to the server container's log (`kubectl logs`)."""
    console = container_log(logs)
    return console.read_text().splitlines() if console.exists() else []


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """The server's /godata/logs, as the image's entrypoint made it before GoCD answered."""
    folder = tmp_path / "godata" / "logs"
    folder.mkdir(parents=True)
    return folder


def log_text(logs: Path) -> str:
    log = logs / "kubernetes-reuse-preconfigure.log"
    return log.read_text() if log.exists() else ""


def test_the_chart_runs_the_values_command_as_the_servers_post_start_hook_not_its_own_script() -> None:
    pod = server_pod(values())
    command = hook_command()
    assert command[:2] == ["/bin/bash", "-c"] and "/preconfigure_server.sh" not in " ".join(command)
    assert not charts_script_runs(values()), "the chart's script posts a profile for the official plugin"
    # The chart still mounts its script (gocd-server-deployment.yaml lines 52-55, 116-119); it is unused.
    assert "config-vol" in {volume["name"] for volume in pod["spec"]["volumes"]}


def test_a_fresh_server_gets_this_plugins_cluster_profile_a_reuse_profile_and_a_pipeline(
    logs: Path,
) -> None:
    state = AdminState()
    with hook(state, logs, server_after_s=0.5) as result:
        pass
    [done] = result
    assert done.returncode == 0, (done.stdout, done.stderr, log_text(logs))
    [cluster] = state.cluster_profiles.values()
    assert cluster["plugin_id"] == PLUGIN_ID
    properties = {p["key"]: p["value"] for p in cluster["properties"]}
    # The chart's Service is its Deployment's name, "<release>-server"; the namespace is the service
    # account's (here none is mounted, so the guide's `gocd`).
    assert properties == {"go_server_url": "http://gocd-server.gocd:8153/go", "namespace": "gocd-agents"}
    [elastic] = state.elastic_profiles.values()
    assert elastic["cluster_profile_id"] == cluster["id"]
    assert {p["key"]: p["value"] for p in elastic["properties"]} == {
        "Image": "gocd/gocd-agent-wolfi:v26.1.0",  # the agent image of the server's own version
        "Reuse": "true",
    }
    [pipeline] = state.pipelines.values()
    assert [stage["name"] for stage in pipeline["stages"]] == ["first", "second"]
    assert pipeline["name"] not in state.paused, "it runs at its material's first revision"
    assert sorted(path.name for path in logs.iterdir()) == [
        "kubernetes-reuse-preconfigure.done",
        "kubernetes-reuse-preconfigure.log",
    ], "no answer left behind"
    assert console_lines(logs) == [f"kubernetes-reuse preconfigure: preconfigured: what it did is in "
                                   f"{logs}/kubernetes-reuse-preconfigure.log"]  # fmt: skip


def test_the_preconfigured_pipelines_second_job_runs_on_the_first_jobs_pod(logs: Path) -> None:
    """The profiles as the hook posted them, run by the simulated GoCD and the backend: the pipeline's
    second stage starts once the first passed, and its job gets the first job's pod. (The cluster URL is
    the simulator's: in the GoCD server's pod the blank URL means the pod's service account.)"""
    state = AdminState()
    with hook(state, logs) as result:
        pass
    assert result and result[0].returncode == 0
    [cluster] = state.cluster_profiles.values()
    [elastic] = state.elastic_profiles.values()
    [pipeline] = state.pipelines.values()
    cluster_properties = {p["key"]: p["value"] for p in cluster["properties"]}
    elastic_properties = {p["key"]: p["value"] for p in elastic["properties"]}
    stack = VirtualStack(namespace=cluster_properties["namespace"], gocd=GoCDConfig(seed=1))
    cluster_properties = stack.cluster_profile(**cluster_properties)
    pods: list[str] = []
    jobs: list[Job] = []
    for stage in pipeline["stages"]:
        [job] = stage["jobs"]
        scheduled = stack.gocd.schedule_job(pipeline["name"], stage["name"], job["name"], elastic_properties,
                                            cluster_properties, None, 20.0, pipeline_counter=1)  # fmt: skip
        done = completed(stack, scheduled)
        assert done.agent_id is not None
        pods.append(done.agent_id)
        jobs.append(done)
    assert pods[0] == pods[1], "the second stage's job reused the first one's pod"
    assert f"reused pod {pods[0]}, its 2nd job" in stack.gocd.job(jobs[1].job_id).console_text
    assert stack.pods_created == [pods[0]]


def test_a_second_start_posts_nothing(logs: Path) -> None:
    state = AdminState()
    with hook(state, logs):
        pass
    posts = [call for call in state.calls if call[0] == "POST"]
    assert len(posts) == 3
    with hook(state, logs) as again:
        pass
    assert again[0].returncode == 0
    assert [call for call in state.calls if call[0] == "POST"] == posts, "the marker: it ran once"


def test_profiles_an_administrator_made_already_are_kept_as_they_are(logs: Path) -> None:
    state = AdminState()
    own = {"id": "kubernetes-reuse", "plugin_id": PLUGIN_ID, "properties": [
        {"key": "go_server_url", "value": "https://gocd.example.com/go"}]}  # fmt: skip
    state.cluster_profiles["kubernetes-reuse"] = own
    with hook(state, logs) as result:
        pass
    assert result[0].returncode == 0
    assert state.cluster_profiles["kubernetes-reuse"] is own
    assert ("POST", "/go/api/admin/elastic/cluster_profiles", 200) not in state.calls
    assert "cluster profile kubernetes-reuse exists already" in log_text(logs)
    assert state.elastic_profiles and state.pipelines


def test_a_server_with_pipelines_gets_the_profiles_but_no_example_pipeline(logs: Path) -> None:
    state = AdminState()
    state.pipelines["build"] = {"name": "build", "group": "team", "stages": []}
    with hook(state, logs) as result:
        pass
    assert result[0].returncode == 0
    assert state.cluster_profiles and state.elastic_profiles
    assert list(state.pipelines) == ["build"]
    assert "the server has pipelines already (GET /api/admin/pipeline_groups: 200): no example pipeline" in (
        log_text(logs)
    )
    assert (logs / "kubernetes-reuse-preconfigure.done").exists()


@pytest.mark.parametrize(
    "server, logged",
    [
        (AdminState(plugins={}), "gave up waiting for /api/admin/plugin_info/" + PLUGIN_ID),
        (
            AdminState(plugins={PLUGIN_ID: "invalid"}),
            "gave up waiting for /api/admin/plugin_info/" + PLUGIN_ID,
        ),
    ],
    ids=["plugin-not-loaded", "plugin-invalid"],
)
def test_nothing_fails_the_hook_and_what_went_wrong_is_logged(
    server: AdminState, logged: str, logs: Path
) -> None:
    """A failed postStart hook makes Kubernetes kill and restart the server container, at every start: a
    server whose preconfigure cannot work starts without the profiles and says why in /godata/logs."""
    with hook(server, logs) as result:
        pass
    [done] = result
    assert done.returncode == 0
    assert logged in log_text(logs)
    assert "not preconfigured" in log_text(logs)
    [line] = console_lines(logs)
    assert line.startswith("kubernetes-reuse preconfigure: not preconfigured: ") and logged in line
    assert not (logs / "kubernetes-reuse-preconfigure.done").exists(), "it tries again at the next start"
    assert not server.cluster_profiles


def test_a_profile_the_plugin_refuses_is_logged_with_gocds_answer(logs: Path) -> None:
    """GoCD asks the plugin to validate a profile before it saves it; a go_server_url on the loopback is
    refused (pods would reach themselves), and the hook logs GoCD's answer and posts nothing after it."""
    state = AdminState()
    with hook(state, logs, GOCD_REUSE_GO_SERVER_URL="http://localhost:8153/go") as result:
        pass
    assert result[0].returncode == 0
    assert not state.cluster_profiles and not state.elastic_profiles and not state.pipelines
    text = log_text(logs)
    assert "POST /api/admin/elastic/cluster_profiles answered 422" in text
    assert "go_server_url" in text and "not preconfigured" in text


ADMIN_TOKEN = "4f1c2a9be0d3c7a8e56b1f0d9c2e7a4b6d8f0e1c"  # GoCD's personal access tokens have 40 characters


def admin_token_file(logs: Path, token: str = ADMIN_TOKEN) -> str:
    """The Secret gocd-reuse-preconfigure-token as kubelet mounts it: the token in a file `token`."""
    secret = logs.parent.parent / "gocd-reuse-preconfigure"
    secret.mkdir()
    (secret / "token").write_text(token + "\n")
    return str(secret / "token")


def test_with_security_on_and_an_admin_token_the_profiles_are_created(logs: Path) -> None:
    state = AdminState(require_auth=True, tokens={ADMIN_TOKEN: ADMIN})
    with hook(state, logs, GOCD_REUSE_PRECONFIGURE_TOKEN_FILE=admin_token_file(logs)) as result:
        pass
    assert result[0].returncode == 0, log_text(logs)
    assert state.cluster_profiles and state.elastic_profiles and state.pipelines
    assert ("GET", f"/go/api/admin/plugin_info/{PLUGIN_ID}", 401) in state.calls, "anonymous first"
    assert (logs / "kubernetes-reuse-preconfigure.done").exists()
    outputs = [log_text(logs), *console_lines(logs), result[0].stdout, result[0].stderr]
    assert not [text for text in outputs if ADMIN_TOKEN in text], "the token is never written out"


def test_with_security_on_and_no_token_the_hook_says_so_in_one_line_and_ends_at_the_first_refusal(
    logs: Path,
) -> None:
    """The chart's probes call /go/api/v1/health anonymously, which GoCD allows with security on, so the
    server answers; the admin API refuses the anonymous caller. The hook stops at that answer instead
    of waiting for it to change, so the pod, out of its Service while the hook runs, is not held back."""
    state = AdminState(require_auth=True)
    started = time.monotonic()
    with hook(state, logs, GOCD_REUSE_PRECONFIGURE_POLL_S="5") as result:  # the real pause between tries
        pass
    took = time.monotonic() - started
    assert result[0].returncode == 0
    assert took < 5.0, f"{took:.1f} s: it paused to try again"
    assert [call for call in state.calls if "plugin_info" in call[1]] == [
        ("GET", f"/go/api/admin/plugin_info/{PLUGIN_ID}", 401)
    ], "one refused call, no retries"
    [line] = console_lines(logs)
    assert line.startswith("kubernetes-reuse preconfigure: not preconfigured: GoCD's security is on and "
                           "it refused an anonymous call (401: You are not authenticated!)")  # fmt: skip
    assert "no admin token in" in line and "docs/install.md, step 4" in line
    assert not state.cluster_profiles
    assert not (logs / "kubernetes-reuse-preconfigure.done").exists(), "a token added later is used"


def test_a_token_gocd_does_not_know_is_refused_with_gocds_message_and_ends_the_hook(logs: Path) -> None:
    state = AdminState(require_auth=True, tokens={ADMIN_TOKEN: ADMIN})
    wrong = "0" * 40
    with hook(state, logs, GOCD_REUSE_PRECONFIGURE_TOKEN_FILE=admin_token_file(logs, wrong)) as result:
        pass
    assert result[0].returncode == 0
    [line] = console_lines(logs)
    assert "GoCD refused the admin token of " in line and "(401: Invalid Personal Access Token.)" in line
    assert wrong not in line and wrong not in log_text(logs)
    assert len([call for call in state.calls if "plugin_info" in call[1]]) == 2, "anonymous, then the token"
    assert not state.cluster_profiles


def test_with_security_off_a_mounted_token_is_not_sent(logs: Path) -> None:
    """GoCD refuses any bearer token while its security is off (401 "Bearer authentication credentials
    are not required"), so a Secret left in place after security was turned off must not stop the hook."""
    state = AdminState(tokens={ADMIN_TOKEN: ADMIN})
    with hook(state, logs, GOCD_REUSE_PRECONFIGURE_TOKEN_FILE=admin_token_file(logs)) as result:
        pass
    assert result[0].returncode == 0, log_text(logs)
    assert state.cluster_profiles and state.elastic_profiles
    assert not [call for call in state.calls if call[2] == 401]


def test_the_hook_writes_nothing_to_godata_before_gocd_answers(tmp_path: Path) -> None:
    """The image's entrypoint (gocd/gocd buildSrc/.../gocd-docker-server/docker-entrypoint.sh) creates
    /godata/logs, then starts GoCD; the hook runs beside it from the container's start. The hook leaves
    that directory to the entrypoint: while GoCD does not answer, it creates nothing in /godata, and once
    GoCD answers (the directory made by then) it writes its log there."""
    godata = tmp_path / "godata"
    godata.mkdir()
    logs = godata / "logs"
    state = AdminState()
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOSTNAME": POD_NAME, "GOCD_REUSE_PRECONFIGURE_POLL_S": "0.05",
           "GOCD_REUSE_PRECONFIGURE_API": f"http://127.0.0.1:{port}/go",
           "GOCD_REUSE_PRECONFIGURE_DIR": str(logs),
           "GOCD_REUSE_PRECONFIGURE_CONSOLE": str(tmp_path / "container.log"),
           "GOCD_REUSE_PRECONFIGURE_TOKEN_FILE": str(tmp_path / "none")}  # fmt: skip
    runner = subprocess.Popen(hook_command(), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # the hook polls GoCD meanwhile, twenty times
        assert runner.poll() is None and list(godata.iterdir()) == [], "nothing of the hook's yet"
        logs.mkdir()  # the entrypoint's `mkdir -v -p /godata/logs`, then GoCD starts and answers
        with serving(state, port):
            assert runner.wait(HOOK_BOUND_S) == 0
    finally:
        runner.kill()
        runner.wait()
    assert state.cluster_profiles and (logs / "kubernetes-reuse-preconfigure.done").exists()
    assert "created cluster profile kubernetes-reuse" in log_text(logs)
