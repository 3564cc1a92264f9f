"""The scene the status report tests look at, and how they read the pages.

One stack (the backend over the bridge contract, the simulated GoCD server, the fake API server and its
kubelet) with pods in every state a report shows: a reusable pod of two containers (the agent and a
Docker-in-Docker sidecar) that ran two jobs and runs its third, another that ran one and is idle, two
one-job pods running their jobs, one still booting (a very long boot delay) and one evicted mid-job.
Server pings and GoCD's lost-contact timeout are pushed far out so that nothing is retired or
rescheduled during the tests. The reusable profile's pod template and Environment carry values that look
like any other and are secrets (`ENV_SECRET`, `TEMPLATE_SECRET`): no page may show them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import pytest
import yaml

from elastic_agent.clock import ScaledClock
from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_model import ENV_KEY, GoCDConfig, Job
from elastic_agent.simulation.stack import TOKEN, Stack, StackOptions

PREFIX = "cd.go.elastic-agent."
NAMESPACE = "gocd-agents"
LONG_S = 10 * 3600.0  # a boot or a job that lasts the whole test
SHORT_S = 30.0  # a job that ends within the scene's set-up (model seconds: 1.5 s of real time)
CLUSTER_TOKEN = "k8s-api-token-7c1e93f0b2a54d68"
ENV_SECRET = "envS3cret+Pw/9Kd$Qz=Ma7@Lr2Tx"
TEMPLATE_SECRET = "tplS3cret+Hn/4Vb$Wx=Ke8@Gt5Py"
HEALTH_MESSAGE = "Kubernetes API of cluster staging answered 403: check the security token's RBAC rights."
SIDECAR_LINE = "time=2026-12-01T10:00:00Z level=info msg=API listening on [::]:2375"
WAIT_S = 20.0
BUILDER_TEMPLATE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "builder-{{ POD_POSTFIX }}", "labels": {"team": "platform"}},
    "spec": {
        "containers": [
            {
                "name": "agent",
                "image": "gocd/gocd-agent-wolfi:v24.3.0",
                "imagePullPolicy": "IfNotPresent",
                "env": [
                    {"name": "DEPLOY_TOKEN", "value": TEMPLATE_SECRET},
                    {"name": "REGISTRY_PASSWORD",
                     "valueFrom": {"secretKeyRef": {"name": "registry", "key": "password"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "DOCKER_HOST", "value": "tcp://localhost:2375"},
                ],
            },
            {
                "name": "dind",
                "image": "docker:27-dind",
                "args": ["--host=tcp://0.0.0.0:2375", "--tls=false"],
                "securityContext": {"privileged": True},
                "envFrom": [{"secretRef": {"name": "dind-settings"}}],
            },
        ]
    },
}  # fmt: skip


def _boot_delay(pod: dict[str, Any]) -> float:
    job_name = (pod["metadata"].get("labels") or {}).get(labels.LABEL_JOB_NAME, "")
    return LONG_S if job_name == "slow-boot" else 2.0


def wait_for(what: str, condition: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def job_label(job: Job) -> str:
    return f"{job.pipeline}/{job.pipeline_counter}/{job.stage}/{job.stage_counter}/{job.job_name}"


Reused = tuple[str, list[Job], Job]


@dataclass
class Scene:
    stack: Stack
    cluster: dict[str, str]
    busy: dict[str, Job]  # one-job pods -> the job they run
    booting: tuple[str, Job]
    failed: tuple[str, Job]
    reused: Reused  # the two-container pod, the jobs it ran, the job it runs
    idle: tuple[str, Job]  # the reusable pod idle after one job
    node_of: dict[str, str] = field(default_factory=dict)

    def send(self, request: str, body: dict[str, Any]) -> tuple[int, str]:
        return self.stack.transport.send(PREFIX + request, json.dumps(body))

    def view(self, request: str, body: dict[str, Any]) -> str:
        status, answer = self.send(request, body)
        assert status == 200, f"{request}: {status} {answer}"
        parsed = json.loads(answer)
        assert list(parsed) == ["view"]
        assert isinstance(parsed["view"], str) and parsed["view"].strip()
        return str(parsed["view"])

    def agent_view(self, agent_id: str | None = None, job: Job | None = None, **profile: str) -> str:
        body: dict[str, Any] = {"cluster_profile_properties": {**self.cluster, **profile}}
        if agent_id is not None:
            body["elastic_agent_id"] = agent_id
        if job is not None:
            body["job_identifier"] = job.identifier()
        return self.view("agent-status-report", body)

    def secrets(self) -> list[str]:
        """Everything no page may show: the tokens, every registration key, the profile's secrets."""
        keys = {attempt.key for attempt in self.stack.gocd.registrations + self.stack.gocd.refusals}
        for pod in self.stack.pods():
            for container in pod["spec"].get("containers") or []:
                keys.update(e["value"] for e in container.get("env") or [] if e.get("name") == ENV_KEY)
        assert len(keys) >= 6, keys  # one per pod at least: the check below must have something to check
        return [CLUSTER_TOKEN, TOKEN, ENV_SECRET, TEMPLATE_SECRET, *sorted(keys)]


def finished(stack: Stack, job: Job) -> Job | None:
    """The job as GoCD holds it once it completed, else None."""
    now = stack.gocd.job(job.job_id)
    return now if now.completed_at else None


def builder_profile(stack: Stack) -> dict[str, str]:
    return stack.elastic_profile(
        PodSpecType="yaml", PodConfiguration=yaml.safe_dump(BUILDER_TEMPLATE), Reuse="true",
        Environment=f"DB_PASSWORD={ENV_SECRET}\nLOG_LEVEL=info",
    )  # fmt: skip


def _reused_scene(stack: Stack, cluster: dict[str, str]) -> tuple[Reused, tuple[str, Job]]:
    """A reusable pod that ran two jobs and runs a third; another idle after one."""
    gocd, profile = stack.gocd, builder_profile(stack)
    ran = []
    for job_name in ("compile", "test"):
        job = gocd.schedule_job("app", "build", job_name, profile, cluster, None, SHORT_S)
        ran.append(wait_for(f"{job_name} to complete", lambda j=job: finished(stack, j)))
    pod = ran[0].agent_id
    assert pod is not None and ran[1].agent_id == pod, "the second job reused the first one's pod"
    running = gocd.schedule_job("app", "build", "package", profile, cluster, None, LONG_S)
    wait_for("package to run on the reused pod", lambda: gocd.job(running.job_id).agent_id == pod)
    lint = gocd.schedule_job("app", "build", "lint", profile, cluster, None, SHORT_S)
    done = wait_for("lint to complete on a pod of its own", lambda: finished(stack, lint))
    assert done.agent_id not in (None, pod)
    stack.kube.store.append_log(NAMESPACE, pod, SIDECAR_LINE, container="dind")
    return (pod, ran, running), (done.agent_id, done)


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    """The scene, once per test module that asks for it."""
    yield from build_scene()


def build_scene() -> Iterator[Scene]:
    options = StackOptions(
        boot_delay=_boot_delay,
        namespace=NAMESPACE,
        # No ping retires the evicted pod, and GoCD does not lose contact with its agent and reschedule the
        # job onto a new pod, however slowly the machine runs the tests.
        gocd=GoCDConfig(ping_interval_s=LONG_S, lost_contact_after_s=LONG_S),
    )
    stack = Stack(ScaledClock(20), options)
    try:
        cluster = stack.cluster_profile(security_token=CLUSTER_TOKEN)
        reused, idle = _reused_scene(stack, cluster)
        elastic = stack.elastic_profile()
        gocd = stack.gocd
        unit = gocd.schedule_job("build", "compile", "unit", elastic, cluster, None, LONG_S)
        push = gocd.schedule_job("deploy", "ship", "push", elastic, cluster, "production", LONG_S)
        slow = gocd.schedule_job("build", "compile", "slow-boot", elastic, cluster, None, 60)
        flaky = gocd.schedule_job("build", "compile", "flaky", elastic, cluster, None, LONG_S)
        one_job = {unit.job_id, push.job_id, flaky.job_id}

        def running() -> dict[int, str] | None:
            by_job = {a.running_job_id: a.pod_name for a in gocd.agents() if a.running_job_id in one_job}
            return by_job if len(by_job) == 3 else None

        by_job: dict[int, str] = wait_for("three one-job jobs to run", running)
        pods = wait_for("six pods", lambda: len(stack.pods()) == 6 and stack.pods())
        slow_pod = next(p["metadata"]["name"] for p in pods
                        if p["metadata"]["labels"].get(labels.LABEL_JOB_NAME) == "slow-boot")  # fmt: skip
        pool = wait_for("the backend's pool", lambda: (p := stack.backend.pools()) and p[0])

        def jobs_written_back() -> bool:  # until then a page may only know the job's id
            views = [pool.port.get(name) for name in [*by_job.values(), reused[0]]]
            return all(v is not None and labels.ANN_CURRENT_JOB in v.annotations for v in views)

        wait_for("the busy pods' job annotations", jobs_written_back)
        stack.kubelet.evict(by_job[flaky.job_id])
        wait_for("the eviction to be seen", lambda: (r := pool.record(by_job[flaky.job_id])) and r.failed)
        # An agent that prints its registration key into its log must not leak it through the page.
        unit_pod = by_job[unit.job_id]
        [key] = [e["value"] for p in pods if p["metadata"]["name"] == unit_pod
                 for e in p["spec"]["containers"][0]["env"] if e["name"] == ENV_KEY]  # fmt: skip
        stack.kube.store.append_log(NAMESPACE, unit_pod, f"DEBUG env GO_EA_AUTO_REGISTER_KEY={key}")
        stack.backend.health.problem("test:staging", HEALTH_MESSAGE, "warning")
        yield Scene(
            stack=stack, cluster=cluster, busy={unit_pod: unit, by_job[push.job_id]: push},
            booting=(slow_pod, slow), failed=(by_job[flaky.job_id], flaky), reused=reused, idle=idle,
            node_of={p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in stack.pods()},
        )  # fmt: skip
    finally:
        stack.stop()


# ----- reading the pages --------------------------------------------------------------------------


class Page(HTMLParser):
    """Collects the pods table rows (by data-pod), the summary tiles, the elements carrying a `data-`
    attribute of interest (containers, nodes, env rows, logs) and the page's visible text."""

    MARKS = ("data-container", "data-node", "data-env", "data-log", "data-condition", "data-job-id",
             "data-profile", "data-saved")  # fmt: skip

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, Any]] = {}
        self.tiles: dict[str, str] = {}
        self.marked: dict[str, dict[str, dict[str, str | None]]] = {mark: {} for mark in self.MARKS}
        self.text: list[str] = []
        self._row: dict[str, Any] | None = None
        self._cell: list[str] | None = None
        self._tile: str | None = None
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        for mark in self.MARKS:
            if attr.get(mark) is not None:
                self.marked[mark][str(attr[mark])] = attr
        if tag == "style":
            self._in_style = True
        elif tag == "tr" and attr.get("data-pod"):
            self._row = {"state": attr.get("data-state"), "cells": []}
            self.rows[str(attr["data-pod"])] = self._row
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "div" and attr.get("data-state") and "tile" in (attr.get("class") or ""):
            self._tile = attr["data-state"]
            self.tiles[str(self._tile)] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "div":
            self._tile = None

    def handle_data(self, data: str) -> None:
        if self._in_style:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._tile is not None and data.strip() and not self.tiles[self._tile]:
            self.tiles[self._tile] = data.strip()


def parse(view: str) -> Page:
    page = Page()
    page.feed(view)
    return page


def text_of(view: str) -> str:
    """The page's text, one space between pieces (as a reader sees block elements apart)."""
    text = " ".join(" ".join(parse(view).text).split())
    return re.sub(r" ([.,:;)])", r"\1", text)


COLUMNS = ["Pod", "State", "For", "Age", "Phase", "Node", "Reuse", "Jobs run", "Job", "Environment", "Note"]


def row_of(view: str, pod: str) -> dict[str, str]:
    row = parse(view).rows[pod]
    return {"data-state": row["state"], **dict(zip(COLUMNS, row["cells"], strict=True))}
