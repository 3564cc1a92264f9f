"""The three status reports, asked for the way GoCD asks, over the bridge contract, with pods in several
states; then the same pages rendered by a real headless Chromium.

One stack serves the whole module: two pods run long jobs, one is still booting (a very long boot delay),
one was evicted mid-job. Server pings are pushed far out so the evicted pod is still there to be shown.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.clock import ManualClock, ScaledClock
from elastic_agent.gocd import status_pages
from elastic_agent.gocd.status_pages import render_plugin_status
from elastic_agent.pool import labels
from elastic_agent.redaction import redact
from elastic_agent.simulation.gocd_model import ENV_KEY, GoCDConfig, Job
from elastic_agent.simulation.stack import TOKEN, Stack, StackOptions
from tests import browser

PREFIX = "cd.go.elastic-agent."
NAMESPACE = "gocd-agents"
LONG_S = 10 * 3600.0  # a boot or a job that lasts the whole test
CLUSTER_TOKEN = "k8s-api-token-7c1e93f0b2a54d68"
HEALTH_MESSAGE = "Kubernetes API of cluster staging answered 403: check the security token's RBAC rights."
WAIT_S = 15.0


def _boot_delay(pod: dict[str, Any]) -> float:
    job_name = (pod["metadata"].get("labels") or {}).get(labels.LABEL_JOB_NAME, "")
    return LONG_S if job_name == "slow-boot" else 2.0


def _wait_for(what: str, condition: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def job_label(job: Job) -> str:
    return f"{job.pipeline}/{job.pipeline_counter}/{job.stage}/{job.stage_counter}/{job.job_name}"


@dataclass
class Scene:
    stack: Stack
    cluster: dict[str, str]
    busy: dict[str, Job]  # pod name -> the job it runs
    booting: tuple[str, Job]
    failed: tuple[str, Job]
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

    def secrets(self) -> list[str]:
        """Everything no page may show: the cluster token, every registration key, the backend token."""
        keys = {attempt.key for attempt in self.stack.gocd.registrations + self.stack.gocd.refusals}
        for pod in self.stack.pods():
            for container in pod["spec"].get("containers") or []:
                keys.update(e["value"] for e in container.get("env") or [] if e.get("name") == ENV_KEY)
        assert len(keys) >= 4, keys  # one per pod at least: the check below must have something to check
        return [CLUSTER_TOKEN, TOKEN, *sorted(keys)]


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    options = StackOptions(
        boot_delay=_boot_delay,
        namespace=NAMESPACE,
        gocd=GoCDConfig(ping_interval_s=LONG_S),  # no ping retires the evicted pod during the test
    )
    stack = Stack(ScaledClock(20), options)
    try:
        cluster = stack.cluster_profile(security_token=CLUSTER_TOKEN)
        elastic = stack.elastic_profile()
        gocd = stack.gocd
        unit = gocd.schedule_job("build", "compile", "unit", elastic, cluster, None, LONG_S)
        push = gocd.schedule_job("deploy", "ship", "push", elastic, cluster, "production", LONG_S)
        slow = gocd.schedule_job("build", "compile", "slow-boot", elastic, cluster, None, 60)
        flaky = gocd.schedule_job("build", "compile", "flaky", elastic, cluster, None, LONG_S)

        def running() -> dict[int, str] | None:
            by_job = {a.running_job_id: a.pod_name for a in gocd.agents() if a.running_job_id is not None}
            return by_job if len(by_job) == 3 else None

        by_job = _wait_for("three jobs to run", running)
        pods = _wait_for("four pods", lambda: len(stack.pods()) == 4 and stack.pods())
        slow_pod = next(
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["labels"][labels.LABEL_JOB_NAME] == "slow-boot"
        )
        pool = _wait_for("the backend's pool", lambda: (p := stack.backend.pools()) and p[0])

        def jobs_written_back() -> bool:  # until then a page may only know the job's id
            views = [pool.port.get(name) for name in by_job.values()]
            return all(v is not None and labels.ANN_CURRENT_JOB in v.annotations for v in views)

        _wait_for("the busy pods' job annotations", jobs_written_back)
        stack.kubelet.evict(by_job[flaky.job_id])
        _wait_for("the eviction to be seen", lambda: (r := pool.record(by_job[flaky.job_id])) and r.failed)
        # An agent that prints its registration key into its log must not leak it through the page.
        key = next(
            e["value"]
            for p in pods
            if p["metadata"]["name"] == slow_pod
            for e in p["spec"]["containers"][0]["env"]
            if e["name"] == ENV_KEY
        )
        stack.kube.store.append_log(NAMESPACE, slow_pod, f"DEBUG env GO_EA_AUTO_REGISTER_KEY={key}")
        stack.backend.health.problem("test:staging", HEALTH_MESSAGE, "warning")
        yield Scene(
            stack=stack,
            cluster=cluster,
            busy={by_job[unit.job_id]: unit, by_job[push.job_id]: push},
            booting=(slow_pod, slow),
            failed=(by_job[flaky.job_id], flaky),
            node_of={p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in stack.pods()},
        )
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def views(scene: Scene) -> dict[str, str]:
    """Every page, asked for once with GoCD's real body shapes."""
    cluster = scene.cluster
    busy_pod, busy_job = next(iter(scene.busy.items()))
    other_cluster = scene.stack.cluster_profile(namespace="never-used", security_token=CLUSTER_TOKEN)
    return {
        "plugin": scene.view("plugin-status-report", {"all_cluster_profiles_properties": [cluster]}),
        "cluster": scene.view("cluster-status-report", {"cluster_profile_properties": cluster}),
        "agent-busy": scene.view(
            "agent-status-report", {"cluster_profile_properties": cluster, "elastic_agent_id": busy_pod}
        ),
        "agent-failed": scene.view(
            "agent-status-report",
            {"cluster_profile_properties": cluster, "elastic_agent_id": scene.failed[0]},
        ),
        "agent-booting": scene.view(
            "agent-status-report",
            {"cluster_profile_properties": cluster, "elastic_agent_id": scene.booting[0]},
        ),
        # From the job details page GoCD sends the job and no agent id.
        "job-busy": scene.view(
            "agent-status-report",
            {"job_identifier": busy_job.identifier(), "cluster_profile_properties": cluster},
        ),
        "job-booting": scene.view(
            "agent-status-report",
            {"job_identifier": scene.booting[1].identifier(), "cluster_profile_properties": cluster},
        ),
        "agent-unknown": scene.view(
            "agent-status-report",
            {"cluster_profile_properties": cluster, "elastic_agent_id": "k8s-ea-0000000000"},
        ),
        "job-unknown": scene.view(
            "agent-status-report",
            {
                "job_identifier": {**busy_job.identifier(), "job_id": 987654},
                "cluster_profile_properties": cluster,
            },
        ),
        "cluster-unused": scene.view("cluster-status-report", {"cluster_profile_properties": other_cluster}),
        "agent-unused-cluster": scene.view(
            "agent-status-report", {"cluster_profile_properties": other_cluster, "elastic_agent_id": busy_pod}
        ),
    }


# ----- reading the pages --------------------------------------------------------------------------


class _Page(HTMLParser):
    """Collects the pods table rows (by data-pod), the summary tiles and the page's visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, Any]] = {}
        self.tiles: dict[str, str] = {}
        self.text: list[str] = []
        self._row: dict[str, Any] | None = None
        self._cell: list[str] | None = None
        self._tile: str | None = None
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
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


def parse(view: str) -> _Page:
    page = _Page()
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


# ----- content ------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["plugin", "cluster"])
def test_pods_table_lists_every_pod_with_its_state_phase_and_job(
    scene: Scene, views: dict[str, str], page: str
) -> None:
    view = views[page]
    pod_names = {p["metadata"]["name"] for p in scene.stack.pods()}
    assert set(parse(view).rows) == pod_names
    for pod, job in scene.busy.items():
        row = row_of(view, pod)
        assert row["data-state"] == "busy" and row["State"] == "busy"
        assert row["Phase"] == "Running"
        assert row["Job"] == f"running {job_label(job)}"  # the job it runs, not any other
        assert row["Node"] == scene.node_of[pod] != ""
        assert row["Jobs run"] == "0"
        assert row["Reuse"] == "one job", "these profiles run one job per pod"
    [push_pod] = [pod for pod, job in scene.busy.items() if job.job_name == "push"]
    assert row_of(view, push_pod)["Environment"] == "production"

    booting_pod, booting_job = scene.booting
    row = row_of(view, booting_pod)
    assert (row["data-state"], row["State"], row["Phase"]) == ("booting", "booting", "Pending")
    assert row["Job"] == f"started for {job_label(booting_job)}"

    failed_pod, failed_job = scene.failed
    row = row_of(view, failed_pod)
    assert (row["data-state"], row["State"]) == ("failed", "failed")
    assert row["Phase"] == "Failed (Evicted)"
    assert row["Job"] == f"was running {job_label(failed_job)}"
    assert "Evicted: The node was low on resource: memory." in row["Note"]


def test_plugin_status_counts_pods_by_state_and_shows_health_and_settings(views: dict[str, str]) -> None:
    view = views["plugin"]
    page = parse(view)
    assert page.tiles == {"booting": "1", "idle": "0", "busy": "2", "retiring": "0", "failed": "1"}
    text = text_of(view)
    assert "4 pods in all" in text
    assert HEALTH_MESSAGE in text
    assert f"Namespace {NAMESPACE}" in text
    for setting in (
        "idle_timeout 10m",
        "max_pods no limit",
        "pending_pods_count 10",
        "auto_register_timeout 10m",
    ):
        assert setting in text
    assert "security_token set (not shown)" in text


def test_cluster_status_of_a_cluster_the_backend_never_used_says_so(views: dict[str, str]) -> None:
    text = text_of(views["cluster-unused"])
    assert "This cluster has not been used since the backend started" in text
    assert "never-used" not in parse(views["cluster-unused"]).rows


def test_agent_page_of_a_busy_pod_shows_job_node_labels_events_and_log(
    scene: Scene, views: dict[str, str]
) -> None:
    busy_pod, busy_job = next(iter(scene.busy.items()))
    text = text_of(views["agent-busy"])
    assert f"Pod {busy_pod} busy" in text
    assert f"running {job_label(busy_job)}" in text
    assert f"Node {scene.node_of[busy_pod]}" in text
    assert f"{labels.LABEL_JOB_ID} {busy_job.job_id}" in text  # the labels table
    assert f"{labels.LABEL_PIPELINE} {busy_job.pipeline}" in text
    for reason in ("Scheduled", "Pulling", "Pulled", "Created", "Started"):  # the events table
        assert reason in text
    assert f"Successfully assigned {NAMESPACE}/{busy_pod} to {scene.node_of[busy_pod]}" in text
    assert "Starting GoCD agent in container" in text  # the log
    assert f"Registering elastic agent {busy_pod}" in text
    assert "Agent registered yes" in text


def test_agent_page_of_an_evicted_pod_says_why(scene: Scene, views: dict[str, str]) -> None:
    failed_pod, failed_job = scene.failed
    text = text_of(views["agent-failed"])
    assert f"Pod {failed_pod} failed" in text
    assert "Evicted: The node was low on resource: memory." in text
    assert "The next server ping removes it." in text
    assert f"was running {job_label(failed_job)}" in text
    assert "the plugin last marked it busy" in text
    assert "Warning Evicted The node was low on resource: memory." in text  # the event, with its type
    assert "ERROR The node was low on resource: memory." in text  # the log line


def test_agent_page_of_a_booting_pod_hides_a_key_its_log_printed(scene: Scene, views: dict[str, str]) -> None:
    booting_pod, booting_job = scene.booting
    text = text_of(views["agent-booting"])
    assert f"Pod {booting_pod} booting" in text
    assert f"started for {job_label(booting_job)}" in text
    assert "Agent registered not yet" in text
    assert "Pulling image" in text
    assert "GO_EA_AUTO_REGISTER_KEY=[hidden]" in text


def test_agent_page_from_the_job_details_page_finds_the_pod_of_the_job(
    scene: Scene, views: dict[str, str]
) -> None:
    busy_pod, busy_job = next(iter(scene.busy.items()))
    text = text_of(views["job-busy"])
    assert f"Pod {busy_pod} busy" in text
    assert "This pod runs this job." in text
    assert f"running {job_label(busy_job)}" in text

    booting_pod, _ = scene.booting
    text = text_of(views["job-booting"])
    assert f"Pod {booting_pod} booting" in text
    assert "This pod was started for this job." in text


def test_agent_page_for_an_unknown_agent_job_or_cluster_says_so_in_a_sentence(views: dict[str, str]) -> None:
    assert (
        f"There is no pod named k8s-ea-0000000000 of this plugin in namespace {NAMESPACE}. "
        "Its work may be done and the pod removed" in text_of(views["agent-unknown"])
    )
    assert f"No pod of this plugin in namespace {NAMESPACE} runs or ran the job with id 987654" in text_of(
        views["job-unknown"]
    )
    assert "The backend has not connected to this cluster since it started" in text_of(
        views["agent-unused-cluster"]
    )
    for name in ("agent-unknown", "job-unknown", "agent-unused-cluster"):
        assert parse(views[name]).rows == {}
        assert "Traceback" not in views[name]


def test_no_page_shows_a_token_a_registration_key_or_pod_environment(
    scene: Scene, views: dict[str, str]
) -> None:
    secrets = scene.secrets()
    for name, view in views.items():
        for secret in secrets:
            assert secret not in view, f"the {name} page shows a secret"
        # No environment listing: the variables' names appear nowhere (the redacted log line aside).
        for variable in (
            "GO_EA_SERVER_URL",
            "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID",
            "GO_EA_AUTO_REGISTER_ENVIRONMENT",
        ):
            assert variable not in view, f"the {name} page lists the pod's environment"


def test_plugin_status_before_any_cluster_is_used_explains_why_it_is_empty() -> None:
    view = render_plugin_status([], [], ManualClock())
    assert "No cluster has been used since the backend started" in text_of(view)
    assert parse(view).rows == {}


@pytest.mark.parametrize(
    "line",
    [
        "GO_EA_AUTO_REGISTER_KEY=3f9a0c1d-secret-key",
        'config: {"auto_register_key": "3f9a0c1d-secret-key"}',
        "Authorization: Bearer 3f9a0c1d-secret-key",
        "using token: 3f9a0c1d-secret-key for the API",
    ],
)
def test_log_and_event_text_hides_what_looks_like_a_key_or_token(line: str) -> None:
    shown = redact(line)
    assert "3f9a0c1d-secret-key" not in shown and "[hidden]" in shown


def test_cluster_url_is_shown_without_credentials() -> None:
    assert (
        status_pages._cluster_url("https://admin:pw@k8s.example.test:6443/")
        == "https://k8s.example.test:6443/"
    )
    assert status_pages._cluster_url(None).startswith("in-cluster")


# ----- in a real browser --------------------------------------------------------------------------

BROWSER_PAGES = {
    "plugin-status": ("plugin", "Plugin status"),
    "cluster-status": ("cluster", "Cluster status"),
    "agent-status": ("agent-busy", "Agent status"),
}
WHITE = b"\xff\xff\xff"


@pytest.mark.browser
def test_pages_render_in_headless_chromium(scene: Scene, views: dict[str, str], tmp_path: Path) -> None:
    documents = {name: browser.html_page(title, views[key]) for name, (key, title) in BROWSER_PAGES.items()}
    rendered = browser.render_all(documents, tmp_path)

    pod_names = {p["metadata"]["name"] for p in scene.stack.pods()}
    for name in ("plugin-status", "cluster-status"):
        dom = parse(rendered[name].dom)
        assert set(dom.rows) == pod_names, name  # the browser built one table row per pod
        assert {row["state"] for row in dom.rows.values()} == {"booting", "busy", "failed"}
    busy_pod = next(iter(scene.busy))
    assert f"Registering elastic agent {busy_pod}" in text_of(rendered["agent-status"].dom)

    for name, result in rendered.items():
        png = result.screenshot
        assert png.stat().st_size > 10_000, f"{name}: a near-empty screenshot"
        image = browser.read_png(png, max_rows=400)  # the top is enough, and quicker to decode
        assert (image.width, image.height) == (1280, 900), name
        assert len(image.colours()) > 20, f"{name}: the screenshot is (nearly) one colour"
        assert image.pixel(0, 0)[:3] == WHITE, f"{name}: the page background is not white"
        assert image.rows_with_ink(image.pixel(0, 0)) > 150, f"{name}: almost nothing was drawn"

    if target := os.environ.get("STATUS_PAGE_SCREENSHOTS"):  # refresh docs/screenshots for the README
        Path(target).mkdir(parents=True, exist_ok=True)
        for name in ("plugin-status", "cluster-status", "agent-status"):
            shutil.copyfile(rendered[name].screenshot, Path(target) / f"{name}.png")
