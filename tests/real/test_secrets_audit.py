"""No secret reaches anything an operator or a pipeline author can see, over a whole run.

One run (tests/support/secrets_run.py) puts distinctive secrets everywhere GoCD puts them (bridge token,
security token, CA certificate, registration keys, resolved `{{SECRET:...}}` values, key material,
access tokens in URLs), goes through the failure paths where secrets leak most (pods refused, profiles
invalid because of the secret's own text, an incident, an unreachable cluster, bad requests), and each
test searches one kind of output for every secret in every form it could leak in
(tests/support/secret_search.py).

Deliberately not searched: the pods' container env, where the registration key and the profile's
environment must go (the agent needs them; Kubernetes RBAC guards them), and answers GoCD stores as
configuration (none in this run: migrate-config is not sent).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from kubernetes import client

from elastic_agent.clock import ManualClock
from elastic_agent.redaction import redact
from elastic_agent.simulation import stack as stack_module
from elastic_agent.simulation.fake_kube import FakeKubeServer
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_callbacks import CallbackServer
from elastic_agent.simulation.gocd_model import GoCDConfig, SimulatedGoCD
from elastic_agent.simulation.gocd_transport import (
    REQUEST_PREFIX,
    HttpPluginTransport,
    create_agent_body,
    encode,
)
from elastic_agent.simulation.stack import Stack
from tests.support.backend_process import BackendProcess
from tests.support.control_plane import ControlPlane
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import wait_until
from tests.support.real_cluster import make_real_stack
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.secret_search import Leak, Secret, find_leaks, forms
from tests.support.secret_values import (
    BRIDGE_TOKEN,
    CA_PEM,
    ENV_SECRET,
    FIXED_SECRETS,
    KEY_LINES,
    POD_TEMPLATE,
    REMOTE_QUERY_SECRET,
    REMOTE_USER_SECRET,
    SECURITY_TOKEN,
    TEMPLATE_SECRET,
    UNREACHABLE_TOKEN,
    URL_USER_SECRET,
    TemplateServer,
    closed_port,
)
from tests.support.secrets_run import (
    REFUSED_KEY,
    Run,
    audit_run,
    bad_requests,
)

__all__ = ["make_real_stack", "real_kube", "real_kube_binaries"]  # fixtures, used by name

PAGES = ("plugin-status-report", "cluster-status-report", "agent-status-report")


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    with audit_run() as audited:
        yield audited


def _report(leaks: list[Leak], searched: str) -> str:
    shown = "\n".join(str(leak) for leak in leaks[:20])
    return f"{len(leaks)} leaks in {searched}:\n{shown}"


def _outside_env(pod: Obj) -> Obj:
    """The pod as stored, but for its containers' env values (the one legitimate place)."""
    pod = copy.deepcopy(pod)
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for variable in container.get("env") or []:
            variable.pop("value", None)
    return pod


def test_the_run_put_every_kind_of_secret_to_work_and_went_through_every_failure_path(run: Run) -> None:
    """Without this the other tests could pass on a run that never handled the secrets."""
    sinks = run.sinks
    env_values = {
        variable.get("value")
        for pod in sinks.pod_versions
        for container in pod["spec"]["containers"]
        for variable in container.get("env") or []
    }
    assert f"{ENV_SECRET}" in env_values and TEMPLATE_SECRET in env_values
    assert any(KEY_LINES[0] in str(value) for value in env_values), "key material went into a pod's env"
    assert set(sinks.keys) & env_values, "registration keys went into pods"
    assert all(run.stack.gocd.job(job_id).result == "Passed" for job_id in run.good_jobs)
    templated = {
        pod["metadata"]["name"] for pod in sinks.pod_versions if pod["metadata"]["name"].startswith("audit-")
    }
    assert len(templated) >= 2, "a pod from the pod template and one from the remote template"
    assert any('"GET /pod.yaml?' in line for _, line in sinks.logs.lines), "the remote fetch was logged"
    consoles = {job_id: " ".join(run.stack.gocd.job(job_id).console) for job_id in run.failing_jobs.values()}
    for what, job_id in run.failing_jobs.items():
        assert "could not create an agent pod" in consoles[job_id], f"{what}: {consoles[job_id]}"
    assert "incident" in consoles[run.failing_jobs["incident"]]
    statuses = {status for _, status, _ in sinks.answers}
    assert {200, 400, 401, 422, 500, 503} <= statuses, statuses
    assert any("exceeded quota" in line for _, line in sinks.console), "Kubernetes refused a pod"
    assert sinks.health, "GoCD was told about the unreachable cluster"
    assert any("GoCD refused the registration of pod" in m for m in sinks.health), "a refused key was read"
    assert any(key == REFUSED_KEY for key in sinks.keys), "and the key it refused is a secret searched for"
    assert sum(1 for name, _, _ in sinks.answers if name in PAGES) >= 10


def test_no_log_line_of_any_logger_at_any_level_holds_a_secret(run: Run) -> None:
    # The simulated GoCD, kubelet and API server are not the backend: their own lines are not its log.
    lines = [
        (name, text) for name, text in run.sinks.logs.lines if not name.startswith("elastic_agent.simulation")
    ]
    assert len(lines) > 100
    leaks = find_leaks(run.sinks.secrets(), "log", lines)
    assert not leaks, _report(leaks, f"{len(lines)} log records")


def test_no_status_page_holds_a_secret(run: Run) -> None:
    pages = [(name, body) for name, status, body in run.sinks.answers if name in PAGES and status == 200]
    assert pages
    leaks = find_leaks(run.sinks.secrets(), "status page", pages)
    assert not leaks, _report(leaks, f"{len(pages)} pages")


def test_no_answer_to_a_request_that_failed_or_was_refused_holds_a_secret(run: Run) -> None:
    answers = [(f"{name} ({status})", body) for name, status, body in run.sinks.answers if name not in PAGES]
    leaks = find_leaks(run.sinks.secrets(), "answer", answers)
    assert not leaks, _report(leaks, f"{len(answers)} answers")


def test_no_console_line_or_health_message_holds_a_secret(run: Run) -> None:
    sinks = run.sinks
    leaks = find_leaks(sinks.secrets(), "console", sinks.console)
    leaks += find_leaks(sinks.secrets(), "health message", [("health", text) for text in sinks.health])
    assert not leaks, _report(
        leaks, f"{len(sinks.console)} console lines, {len(sinks.health)} health messages"
    )


def test_no_pod_label_annotation_or_anything_outside_its_env_holds_a_secret(run: Run) -> None:
    pods = run.sinks.pod_versions
    assert pods
    metadata = [
        (f"{pod['metadata']['name']} {part}", json.dumps(pod["metadata"].get(part) or {}))
        for pod in pods
        for part in ("labels", "annotations")
    ]
    leaks = find_leaks(run.sinks.secrets(), "pod metadata", metadata)
    rest = [(pod["metadata"]["name"], json.dumps(_outside_env(pod))) for pod in pods]
    leaks += find_leaks(run.sinks.secrets(), "pod outside env", rest)
    assert not leaks, _report(leaks, f"{len(pods)} pod versions")


def test_no_event_or_api_server_access_log_line_holds_a_secret(run: Run) -> None:
    sinks = run.sinks
    assert sinks.events
    events = [(str(event.get("reason")), json.dumps(event)) for event in sinks.events]
    leaks = find_leaks(sinks.secrets(), "event", events)
    leaks += find_leaks(sinks.secrets(), "API access log", [("request", line) for line in sinks.access_log])
    assert not leaks, _report(leaks, f"{len(events)} events, {len(sinks.access_log)} API requests")


def test_metrics_and_probes_hold_no_secret(run: Run) -> None:
    pages = list(run.sinks.http_pages.items())
    assert "gocd" in run.sinks.http_pages["/metrics"].lower() or run.sinks.http_pages["/metrics"]
    leaks = find_leaks(run.sinks.secrets(), "metrics", pages)
    assert not leaks, _report(leaks, "/metrics and the probes")


@pytest.mark.parametrize(
    "leaked",
    [
        f"Authorization: Bearer {BRIDGE_TOKEN}",
        f"GET /pod.yaml?access_token={REMOTE_QUERY_SECRET[:16]}",
        "basic " + base64.b64encode(f"agent:{ENV_SECRET}".encode()).decode(),
        f"url=https%3A%2F%2Fx%2F%3Ft%3D{quote(ENV_SECRET, safe='')}",
        json.dumps({"value": f"x/{TEMPLATE_SECRET}"}).replace("/", "\\/"),
        f"key ...{KEY_LINES[1][-20:]}",
    ],
)
def test_the_search_finds_a_secret_in_the_forms_it_leaks_in(leaked: str) -> None:
    secrets = [
        Secret(kind, value)
        for kind, value in (
            ("token", BRIDGE_TOKEN),
            ("query", REMOTE_QUERY_SECRET),
            ("env", ENV_SECRET),
            ("template", TEMPLATE_SECRET),
            ("key", KEY_LINES[1]),
        )
    ]
    assert find_leaks(secrets, "test", [("line", leaked)])
    assert not find_leaks(secrets, "test", [("line", redact("nothing to see here"))])
    assert all(len(form) >= 8 for secret in secrets for form in forms(secret.value))


# ----- the backend as its own process: its stderr at DEBUG -----------------------------------------

PROCESS_KEYS = tuple(f"regKey{i}-7c1e9a40b2d35f68e4a1c09b7d2e5f31" for i in range(5))


def _process_requests(
    send: Callable[[str, object], tuple[int, str]],
    kube_url: str,
    template_port: int,
    answers: list[tuple[str, int, str]],
    service_url: str,
    callback_url: str,
) -> None:
    cluster = {
        "go_server_url": "https://gocd.example.test/go",
        "kubernetes_cluster_url": kube_url,
        "security_token": SECURITY_TOKEN,
        "kubernetes_cluster_ca_cert": CA_PEM,
    }
    unreachable = {
        **cluster,
        "security_token": UNREACHABLE_TOKEN,
        "kubernetes_cluster_url": f"http://admin:{URL_USER_SECRET}@127.0.0.1:{closed_port()}",
    }
    remote = (
        f"http://agent:{REMOTE_USER_SECRET}@127.0.0.1:{template_port}/pod.yaml"
        f"?access_token={REMOTE_QUERY_SECRET}"
    )
    profiles: list[tuple[dict[str, str], dict[str, str]]] = [
        (
            {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "Environment": f"DB_PASSWORD={ENV_SECRET}"},
            cluster,
        ),
        (
            {"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0", "Environment": f"DB_PASSWORD={ENV_SECRET}"},
            cluster,
        ),
        ({"PodSpecType": "yaml", "PodConfiguration": POD_TEMPLATE}, cluster),
        ({"PodSpecType": "remote", "RemoteFile": remote}, cluster),
        ({"Image": "gocd/gocd-agent-alpine-3.19:v24.1.0"}, unreachable),
    ]
    job: dict[str, Any] = {
        "pipeline_name": "p",
        "pipeline_label": "1",
        "pipeline_counter": 1,
        "stage_name": "s",
        "stage_counter": "1",
        "job_name": "j",
    }
    for job_id, (key, (elastic, profile)) in enumerate(zip(PROCESS_KEYS, profiles, strict=True), start=1):
        send("create-agent", create_agent_body(key, elastic, profile, None, {**job, "job_id": job_id}))
    send("server-ping", {"all_cluster_profiles_properties": [cluster, unreachable]})
    send("plugin-status-report", {"all_cluster_profiles_properties": [cluster, unreachable]})
    bad_requests(send, answers, service_url, callback_url, cluster, {**job, "job_id": 1})


def test_the_backend_process_writes_no_secret_to_its_log_at_debug() -> None:
    kube = FakeKubeServer(token=SECURITY_TOKEN)
    kube_url = kube.start()
    faults_of(kube).add(
        "POST", r"/pods$", status=403, times=1, message="pods is forbidden: exceeded quota: q"
    )
    gocd = SimulatedGoCD(ManualClock(), HttpPluginTransport("http://127.0.0.1:1", "-", "-"), GoCDConfig())
    callbacks = CallbackServer(gocd, BRIDGE_TOKEN)
    callback_url = callbacks.start()
    templates = TemplateServer()
    process = BackendProcess(["--log-level", "DEBUG"], env={"GOCD_ELASTIC_AGENT_TOKEN": BRIDGE_TOKEN})
    answers: list[tuple[str, int, str]] = []
    try:
        with HttpPluginTransport(process.url, BRIDGE_TOKEN, callback_url) as transport:

            def send(name: str, body: object) -> tuple[int, str]:
                status, text = transport.send(
                    REQUEST_PREFIX + name, body if isinstance(body, str) else encode(body)
                )
                answers.append((name, status, text))
                return status, text

            _process_requests(send, kube_url, templates.port, answers, process.url, callback_url)
            wait_until(lambda: len(kube.store.list_pods("default")[0]) >= 3, 30, "the pods to be created")
    finally:
        code = process.terminate() if process.process.poll() is None else process.process.returncode
        process.kill()
        callbacks.stop()
        templates.stop()
        kube.stop()
    assert code == 0
    secrets = [*FIXED_SECRETS, *(Secret("registration key", key) for key in PROCESS_KEYS)]
    lines = [("stderr", line) for line in process.stderr]
    assert any(" DEBUG " in line for _, line in lines), "the log is at DEBUG"
    assert {400, 401, 422, 503} <= {status for _, status, _ in answers}
    assert any("exceeded quota" in text for _, _, text in answers), "Kubernetes refused a pod"
    leaks = find_leaks(secrets, "backend stderr", lines)
    leaks += find_leaks(secrets, "answer", [(f"{n} ({st})", text) for n, st, text in answers])
    assert not leaks, _report(leaks, f"{len(lines)} stderr lines, {len(answers)} answers")


# ----- the real API server: what it stores and answers ---------------------------------------------


def test_what_a_real_api_server_stores_and_says_of_the_pods_holds_no_secret(
    make_real_stack: Callable[..., Stack], real_kube: ControlPlane
) -> None:
    stack = make_real_stack(boot_delay=2.0)
    gocd = stack.gocd
    cluster = stack.cluster_profile()
    profile = stack.elastic_profile(Reuse="true", Environment=f"DB_PASSWORD={ENV_SECRET}")
    # A pod the real server refuses (an unknown pull policy) with secrets beside it in the env.
    invalid = POD_TEMPLATE.replace("    env:\n", "    imagePullPolicy: Sometimes\n    env:\n")
    refused = {"PodSpecType": "yaml", "PodConfiguration": invalid}
    jobs = [gocd.schedule_job("build", "compile", f"unit-{i}", profile, cluster, None, 30) for i in range(2)]
    bad = gocd.schedule_job("build", "compile", "refused", refused, cluster, None, 30)
    wait_until(lambda: all(gocd.job(j.job_id).completed_at is not None for j in jobs), 240, "the jobs")
    wait_until(lambda: gocd.job(bad.job_id).console, 60, "the refused pod's console line")
    pods = stack.pods()
    assert pods and any("Unsupported value" in line for line in gocd.job(bad.job_id).console)
    assert stack.service is not None
    transport = HttpPluginTransport(stack.service.url, stack_module.TOKEN, stack.callback_url)
    pages = []
    with transport:
        for pod in pods:
            body = {"cluster_profile_properties": cluster, "elastic_agent_id": pod["metadata"]["name"]}
            pages.append(transport.send(REQUEST_PREFIX + "agent-status-report", encode(body))[1])
    keys = {
        e["value"]
        for p in pods
        for c in p["spec"]["containers"]
        for e in c.get("env") or []
        if e["name"] == "GO_EA_AUTO_REGISTER_KEY"
    }
    real = cluster["security_token"], cluster["kubernetes_cluster_ca_cert"]
    secrets = [
        Secret("env secret", ENV_SECRET),
        Secret("template secret", TEMPLATE_SECRET),
        Secret("real service-account token", real[0]),
        *(Secret("real CA line", line) for line in real[1].splitlines()[2:-2]),
        *(Secret("registration key", key) for key in keys),
    ]
    stored = [(p["metadata"]["name"], json.dumps(_outside_env(p))) for p in pods]
    core = client.CoreV1Api(real_kube.admin_api_client())
    events = core.list_namespaced_event(stack.options.namespace).to_dict()["items"]
    leaks = find_leaks(secrets, "pod as stored", stored)
    leaks += find_leaks(
        secrets, "event", [(str(e.get("reason")), json.dumps(e, default=str)) for e in events]
    )
    leaks += find_leaks(secrets, "agent page", [("page", page) for page in pages])
    leaks += find_leaks(secrets, "console", [("console", line) for j in gocd.jobs() for line in j.console])
    assert not leaks, _report(leaks, f"{len(pods)} pods, {len(events)} events, {len(pages)} pages")
