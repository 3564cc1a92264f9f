"""A whole run of the system with distinctive secrets everywhere a GoCD installation puts them, and a
record of everything an operator or a pipeline author can see of it: for tests/real/test_secrets_audit.py.

The secrets: the bridge token, the cluster profile's security token and CA certificate, the
registration keys GoCD sends in create-agent, and `{{SECRET:...}}` values (GoCD resolves them before
sending, so they arrive as plain values) in an elastic profile's environment, in a pod template's
env, as multi-line key material, and as access tokens in a remote pod template's URL.

The run goes through the paths where secrets leak most: Kubernetes refusing pods (fault injection),
profiles that fail validation with a secret in the bad value, an unexpected failure (incident),
a cluster URL that cannot be reached, bad requests and a wrong bridge token.

What is recorded (the "sinks"): every log record of every logger, every answer the backend gave
(status pages and error answers among them), every console line and health message GoCD received,
/metrics and the probes, every version of every pod's labels and annotations and the pod outside its
containers' env (env is where the registration key and resolved secrets must go), every event, and the
API server's access log (method, path, query).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from elastic_agent.backend import Backend
from elastic_agent.clock import Clock, ScaledClock
from elastic_agent.simulation import stack as stack_module
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.gocd_records import HealthMessage
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, create_agent_body, encode
from elastic_agent.simulation.stack import FakeCluster, Stack, StackOptions
from tests.support.doubles.fake_kube_faults import faults_of
from tests.support.live_stack import wait_until
from tests.support.secret_search import Records, Secret, every_log_record
from tests.support.secret_values import (
    ALIAS_SECRET,
    BRIDGE_TOKEN,
    CA_LINES,
    CA_PEM,
    ENV_SECRET,
    FIXED_SECRETS,
    INCIDENT_SECRET,
    INVALID_ENV_SECRET,
    POD_TEMPLATE,
    PRIVATE_KEY,
    PROPERTIES_TEMPLATE,
    REMOTE_QUERY_SECRET,
    REMOTE_USER_SECRET,
    SECURITY_TOKEN,
    TAG_SECRET,
    UNREACHABLE_TOKEN,
    URL_USER_SECRET,
    WRONG_BRIDGE_TOKEN,
    TemplateServer,
    closed_port,
    template_with,
)


class SecretCluster(FakeCluster):
    """The fake API server, demanding the security token; the profile carries the CA as well."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.server.api.token = SECURITY_TOKEN

    def profile_properties(self) -> dict[str, str]:
        return {
            "kubernetes_cluster_url": self.url,
            "security_token": SECURITY_TOKEN,
            "kubernetes_cluster_ca_cert": CA_PEM,
        }


@dataclass
class Sinks:
    """Everything seen, as (where, text) per sink."""

    logs: Records
    answers: list[tuple[str, int, str]] = field(default_factory=list)  # (request, status, body)
    keys: list[str] = field(default_factory=list)  # every auto_register_key GoCD sent
    health: list[str] = field(default_factory=list)
    pod_versions: list[Obj] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    access_log: list[str] = field(default_factory=list)
    http_pages: dict[str, str] = field(default_factory=dict)  # /metrics and the probes

    def secrets(self) -> list[Secret]:
        return [*FIXED_SECRETS, *(Secret("registration key", key) for key in sorted(set(self.keys)))]


def _record_answers(stack: Stack, sinks: Sinks) -> None:
    send = stack.transport.send

    def recorded(request_name: str, body: str) -> tuple[int, str]:
        if request_name.endswith("create-agent"):
            try:
                key = json.loads(body)["auto_register_key"]
            except (ValueError, KeyError, TypeError):
                key = None  # a deliberately bad body
            if isinstance(key, str) and len(key) >= 16:
                sinks.keys.append(key)
        status, answer = send(request_name, body)
        sinks.answers.append((request_name.removeprefix(REQUEST_PREFIX), status, answer))
        return status, answer

    stack.transport.send = recorded  # type: ignore[method-assign]
    replace = stack.gocd.replace_health_messages

    def health(messages: list[HealthMessage]) -> None:
        sinks.health.extend(f"{m.type}: {m.message}" for m in messages)
        replace(messages)

    stack.gocd.replace_health_messages = health  # type: ignore[method-assign]


def _break_spec_for_marked_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in building the pod spec, hit only by profiles marked INCIDENT (so the rest runs on)."""
    spec = Backend.spec

    def broken(self: Backend, elastic: Mapping[str, str], *args: Any, **kwargs: Any) -> Any:
        environment = str(elastic.get("Environment", ""))
        if "INCIDENT=1" in environment:
            # A value taken for a number: the ValueError quotes the value, a resolved secret.
            int(environment.split("API_TOKEN=", 1)[1])
        return spec(self, elastic, *args, **kwargs)

    monkeypatch.setattr(Backend, "spec", broken)


@dataclass
class Run:
    stack: Stack
    sinks: Sinks
    good_jobs: list[int]
    failing_jobs: dict[str, int]  # what fails -> job id


def _send(stack: Stack, name: str, body: object) -> tuple[int, str]:
    return stack.transport.send(REQUEST_PREFIX + name, body if isinstance(body, str) else encode(body))


Send = Callable[[str, object], tuple[int, str]]


def bad_requests(
    send: Send,
    answers: list[tuple[str, int, str]],
    service_url: str,
    callback_url: str,
    cluster: dict[str, str],
    job: dict[str, Any],
) -> None:
    """Requests that fail, each with secrets in it. `send` records its answers; the requests with a
    wrong bridge token bypass it and are added to `answers` here."""
    remote_url = (
        f"ftp://agent:{REMOTE_USER_SECRET}@templates.example.test/pod.yaml?token={REMOTE_QUERY_SECRET}"
    )
    for elastic in (
        {"Image": PROPERTIES_TEMPLATE, "Environment": f"DB_PASSWORD {INVALID_ENV_SECRET}"},
        {"Image": PROPERTIES_TEMPLATE, "Environment": f"SSH_KEY={PRIVATE_KEY}"},
        {"Image": PROPERTIES_TEMPLATE, "Environment": f"1DB_PASSWORD={INVALID_ENV_SECRET}"},
        {"PodSpecType": "yaml", "PodConfiguration": template_with(TAG_SECRET)},
        {"PodSpecType": "yaml", "PodConfiguration": template_with(ALIAS_SECRET)},
        {"PodSpecType": "remote", "RemoteFile": remote_url},
        {"PodSpecType": "remote", "RemoteFile": f"https://t.example.test/p y?token={REMOTE_QUERY_SECRET}"},
    ):
        send("validate-elastic-agent-profile", elastic)
        send("create-agent", create_agent_body("key-of-a-bad-request", elastic, cluster, None, job))
    for bad_cluster in (
        {**cluster, "security_token": f"{SECURITY_TOKEN} {UNREACHABLE_TOKEN}"},
        {**cluster, "kubernetes_cluster_ca_cert": f"not a certificate {SECURITY_TOKEN}"},
        {**cluster, "kubernetes_cluster_ca_cert": CA_PEM.replace(CA_LINES[3], CA_LINES[3][:-3] + "!!!")},
        {**cluster, "kubernetes_cluster_url": f"https://admin:{URL_USER_SECRET}@k8s.example.test/ x"},
        {**cluster, "kubernetes_cluster_url": f"ftp://admin:{URL_USER_SECRET}@k8s.example.test/"},
    ):
        send("validate-cluster-profile", bad_cluster)
    truncated = encode(create_agent_body(BRIDGE_TOKEN, {"Environment": ENV_SECRET}, cluster, None, job))
    send("create-agent", truncated[: len(truncated) // 2])
    send("create-agent", {"auto_register_key": 5, "cluster_profile_properties": SECURITY_TOKEN})
    send("should-assign-work", {"agent": ENV_SECRET, "cluster_profile_properties": cluster})
    send("job-completion", f'{{"elastic_agent_id": "{ENV_SECRET}"')
    for token in (WRONG_BRIDGE_TOKEN, ""):
        answer = requests.post(
            f"{service_url}/gocd/plugin/{REQUEST_PREFIX}create-agent",
            data=truncated,
            headers={"Authorization": f"Bearer {token}", "X-GoCD-Callback-URL": callback_url},
            timeout=30,
        )
        answers.append(("create-agent with a wrong bridge token", answer.status_code, answer.text))


def _record_cluster(stack: Stack, sinks: Sinks) -> None:
    """Every version of every pod the API server stores, as it is stored."""
    stack.kube.store.add_listener(lambda kind, pod: sinks.pod_versions.append(pod))


def _ask_every_page(stack: Stack, clusters: list[dict[str, str]]) -> None:
    """The status pages GoCD can show, for every cluster, pod and job: answers are recorded."""
    _send(stack, "plugin-status-report", {"all_cluster_profiles_properties": clusters})
    for cluster in clusters:
        _send(stack, "cluster-status-report", {"cluster_profile_properties": cluster})
        for pod in stack.pods():
            body = {"cluster_profile_properties": cluster, "elastic_agent_id": pod["metadata"]["name"]}
            _send(stack, "agent-status-report", body)
        for job in stack.gocd.jobs():
            body = {"cluster_profile_properties": cluster, "job_identifier": job.identifier()}
            _send(stack, "agent-status-report", body)


REFUSED_KEY = "refused-registration-key-4e1b9c"  # a key GoCD never issued: it refuses it, naming it


def _refused_key(stack: Stack, cluster: dict[str, str], job: dict[str, Any]) -> None:
    """A pod whose key GoCD refuses: GoCD's answer, which names the key, is in the pod's log, which the
    agent page shows and the plugin reads at the next server-ping (then it deletes the pod and tells
    GoCD's health). Last in the run: it bounds the keys the cluster's later pods may use."""
    refused_job = {**job, "job_id": 990001, "job_name": "refused"}
    _send(stack, "create-agent", create_agent_body(REFUSED_KEY, stack.elastic_profile(), cluster, None,
                                                   refused_job))  # fmt: skip
    wait_until(lambda: any(r.key == REFUSED_KEY for r in stack.gocd.refusals), 120, "GoCD refusing the key")
    pod = next(r.pod_name for r in stack.gocd.refusals if r.key == REFUSED_KEY)
    _send(stack, "agent-status-report", {"cluster_profile_properties": cluster, "elastic_agent_id": pod})
    told = lambda: any("GoCD refused the registration" in m.message for m in stack.gocd.health_messages)  # noqa: E731
    wait_until(told, 120, "the refusal in GoCD's health messages")


def _collect(stack: Stack, sinks: Sinks) -> None:
    assert stack.service is not None
    for path in ("/metrics", "/healthz", "/readyz", "/livez"):
        sinks.http_pages[path] = requests.get(stack.service.url + path, timeout=30).text
    sinks.console = [(f"job {job.job_id}", line) for job in stack.gocd.jobs() for line in job.console]
    sinks.console += [
        (f"console of {key}", line) for key, lines in stack.gocd.orphan_console.items() for line in lines
    ]
    events, _ = stack.kube.store.list_events(stack.options.namespace)
    sinks.events = events
    sinks.access_log = [f"{r.method} {r.path}?{r.query}" for r in stack.kube.api.requests]


@contextmanager
def audit_run(speed: float = 60.0) -> Iterator[Run]:
    """The run, with every sink recorded until the backend has stopped."""
    with pytest.MonkeyPatch.context() as monkeypatch, every_log_record(monkeypatch) as logs:
        monkeypatch.setattr(stack_module, "TOKEN", BRIDGE_TOKEN)
        _break_spec_for_marked_profiles(monkeypatch)
        clock = ScaledClock(speed)
        templates = TemplateServer()
        stack = Stack(
            clock, StackOptions(boot_delay=5, gocd=GoCDConfig(), start_gocd=False), SecretCluster(clock)
        )
        sinks = Sinks(logs)
        try:
            _record_answers(stack, sinks)
            _record_cluster(stack, sinks)
            yield _drive(stack, sinks, templates.port)
        finally:
            stack.stop()
            templates.stop()
            _collect_after_stop(stack, sinks)


def _collect_after_stop(stack: Stack, sinks: Sinks) -> None:
    sinks.console = [(f"job {job.job_id}", line) for job in stack.gocd.jobs() for line in job.console]
    sinks.console += [
        (f"console of {key}", line) for key, lines in stack.gocd.orphan_console.items() for line in lines
    ]


def _drive(stack: Stack, sinks: Sinks, template_port: int) -> Run:
    gocd = stack.gocd
    cluster = stack.cluster_profile()
    unreachable = stack.cluster_profile(
        kubernetes_cluster_url=f"http://admin:{URL_USER_SECRET}@127.0.0.1:{closed_port()}",
        security_token=UNREACHABLE_TOKEN,
    )
    reuse = stack.elastic_profile(Reuse="true", Environment=f"DB_PASSWORD={ENV_SECRET}\nMODE=audit")
    template = {"PodSpecType": "yaml", "PodConfiguration": POD_TEMPLATE}
    remote_url = f"http://agent:{REMOTE_USER_SECRET}@127.0.0.1:{template_port}/pod.yaml?access_token={REMOTE_QUERY_SECRET}"
    remote = {"PodSpecType": "remote", "RemoteFile": remote_url}
    unreachable_remote = {
        "PodSpecType": "remote",
        "RemoteFile": f"http://127.0.0.1:{closed_port()}/pod.yaml?access_token={REMOTE_QUERY_SECRET}",
    }
    # Kubernetes refuses the first pods (a quota, then an internal error), and an annotation write.
    faults_of(stack.kube).add(
        "POST",
        r"/pods$",
        status=403,
        times=2,
        message='pods "x" is forbidden: exceeded quota: compute, requested: pods=1',
    )
    faults_of(stack.kube).add("POST", r"/pods$", status=500, times=1, message="etcdserver: request timed out")
    faults_of(stack.kube).add("PATCH", r"/pods/", status=500, times=2, message="etcdserver: leader changed")
    gocd.start()
    good = [gocd.schedule_job("build", "compile", f"unit-{i}", reuse, cluster, None, 90) for i in range(3)]
    good.append(gocd.schedule_job("build", "compile", "template", template, cluster, "production", 60))
    good.append(gocd.schedule_job("deploy", "ship", "remote", remote, cluster, None, 60))
    failing = {
        "unreachable cluster": gocd.schedule_job("build", "compile", "far", reuse, unreachable, None, 60),
        "invalid Environment": gocd.schedule_job(
            "build",
            "compile",
            "badenv",
            stack.elastic_profile(Environment=f"DB_PASSWORD={ENV_SECRET}\nSSH_KEY={PRIVATE_KEY}"),
            cluster,
            None,
            60,
        ),
        "YAML tag": gocd.schedule_job(
            "build",
            "compile",
            "tag",
            {"PodSpecType": "yaml", "PodConfiguration": template_with(TAG_SECRET)},
            cluster,
            None,
            60,
        ),
        "YAML alias": gocd.schedule_job(
            "build",
            "compile",
            "alias",
            {"PodSpecType": "yaml", "PodConfiguration": template_with(ALIAS_SECRET)},
            cluster,
            None,
            60,
        ),
        "unreachable RemoteFile": gocd.schedule_job(
            "build", "compile", "farfile", unreachable_remote, cluster, None, 60
        ),
        "incident": gocd.schedule_job(
            "build",
            "compile",
            "bug",
            stack.elastic_profile(Environment=f"INCIDENT=1\nAPI_TOKEN={INCIDENT_SECRET}"),
            cluster,
            None,
            60,
        ),
    }

    def running() -> bool:
        return any(a.running_job_id is not None for a in gocd.agents())

    wait_until(running, 120, "a job to run")
    _ask_every_page(stack, [cluster, unreachable])  # while pods are busy
    assert stack.service is not None
    bad_requests(
        lambda name, body: _send(stack, name, body),
        sinks.answers,
        stack.service.url,
        stack.callback_url,
        cluster,
        good[0].identifier(),
    )
    wait_until(
        lambda: all(gocd.job(j.job_id).completed_at is not None for j in good),
        300,
        "every job of a usable profile to complete",
    )
    wait_until(
        lambda: all(gocd.job(j.job_id).console for j in failing.values()),
        120,
        "a console line for every job that cannot start",
    )
    _refused_key(stack, cluster, good[0].identifier())
    _ask_every_page(stack, [cluster, unreachable])
    _collect(stack, sinks)
    return Run(stack, sinks, [j.job_id for j in good], {what: j.job_id for what, j in failing.items()})
