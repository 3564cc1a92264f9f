"""The plugin and cluster status reports, asked for the way GoCD asks, over the bridge contract, with pods
in every state (tests/support/status_scene.py); then every report rendered by a real headless Chromium, which
also takes the screenshots of docs/operations.md (`STATUS_PAGE_SCREENSHOTS=docs/screenshots`). The agent
report's content is tests/http/test_status_agent_page.py's.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.redaction import redact
from elastic_agent.status import pages as status_pages
from elastic_agent.status.pages import render_plugin_status
from tests.support import browser
from tests.support.status_scene import (
    CLUSTER_TOKEN,
    HEALTH_MESSAGE,
    NAMESPACE,
    SIDECAR_LINE,
    Scene,
    job_label,
    parse,
    row_of,
    scene,
    text_of,
)

__all__ = ["scene"]  # a fixture, used by name


@pytest.fixture(scope="module")
def views(scene: Scene) -> dict[str, str]:
    """Every page, asked for once with GoCD's real body shapes."""
    cluster = scene.cluster
    other_cluster = scene.stack.cluster_profile(namespace="never-used", security_token=CLUSTER_TOKEN)
    return {
        "plugin": scene.view("plugin-status-report", {"all_cluster_profiles_properties": [cluster]}),
        "cluster": scene.view("cluster-status-report", {"cluster_profile_properties": cluster}),
        "agent-reused": scene.agent_view(scene.reused[0]),
        "cluster-unused": scene.view("cluster-status-report", {"cluster_profile_properties": other_cluster}),
    }


@pytest.mark.parametrize("page", ["plugin", "cluster"])
def test_pods_table_lists_every_pod_with_its_state_phase_jobs_and_job(
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
        assert row["Jobs run"] == "0 +1 running", "none finished, its first one running"
        assert row["Reuse"] == "one job", "these profiles run one job per pod"
    [push_pod] = [pod for pod, job in scene.busy.items() if job.job_name == "push"]
    assert row_of(view, push_pod)["Environment"] == "production"

    reused, _, running = scene.reused
    row = row_of(view, reused)
    assert (row["State"], row["Jobs run"]) == ("busy", "2 +1 running")
    assert row["Job"] == f"running {job_label(running)}"
    assert re.fullmatch(r"v1-[0-9a-f]{20}", row["Reuse"]), "the label form, as in the profile tables"
    idle_pod, idle_job = scene.idle
    row = row_of(view, idle_pod)
    assert (row["State"], row["Jobs run"], row["Job"]) == ("idle", "1", f"last {job_label(idle_job)}")
    assert row["Reuse"] == row_of(view, reused)["Reuse"], "the same profile: the same fingerprint"

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
    assert page.tiles == {"booting": "1", "idle": "1", "busy": "3", "retiring": "0", "failed": "1"}
    text = text_of(view)
    assert "6 pods in all" in text
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
    assert "Nodes" not in text, "the plugin page lists no nodes: one API call per cluster would be too many"


def test_cluster_status_lists_the_nodes_with_what_they_hold_and_this_plugins_pods_on_each(
    scene: Scene, views: dict[str, str]
) -> None:
    nodes = parse(views["cluster"]).marked["data-node"]
    assert set(nodes) == set(scene.stack.kube.store.nodes), "the fake's admin token may list nodes"
    assert all(node["data-ready"] == "True" for node in nodes.values())
    text = text_of(views["cluster"])
    # fake_kube_nodes.py: 16374584Ki total, 16272184Ki allocatable, 4 cores, 110 pods, its kubelet
    assert "v1.30.0-fake Debian GNU/Linux 12 (bookworm) (linux/amd64, kernel 6.1.0-28-amd64)" in text
    for name in nodes:  # the "Agent pods" column: this plugin's pods bound to the node
        count = sum(1 for node in scene.node_of.values() if node == name)
        assert f"{name} 10.0.1.{int(name[-1])} True 4 / 4 15.52 GiB / 15.62 GiB 110 / 110 {count} " in text
    assert sum(1 for node in scene.node_of.values() if node) == 6, "every pod is bound, the booting one too"


def test_cluster_status_of_a_cluster_the_backend_never_used_says_so(views: dict[str, str]) -> None:
    text = text_of(views["cluster-unused"])
    assert "This cluster has not been used since the backend started" in text
    assert parse(views["cluster-unused"]).rows == {}


def test_no_page_shows_a_token_a_registration_key_or_a_profile_secret(
    scene: Scene, views: dict[str, str]
) -> None:
    for name, view in views.items():
        for secret in scene.secrets():
            assert secret not in view, f"the {name} page shows a secret"


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
        status_pages.cluster_url("https://admin:pw@k8s.example.test:6443/") == "https://k8s.example.test:6443/"
    )
    assert status_pages.cluster_url(None).startswith("in-cluster")


# ----- in a real browser --------------------------------------------------------------------------

BROWSER_PAGES = {  # name: (view, title, window size: the agent page is long)
    "plugin-status": ("plugin", "Plugin status", (1280, 900)),
    "cluster-status": ("cluster", "Cluster status", (1280, 1700)),
    "agent-status": ("agent-reused", "Agent status", (1280, 1820)),
}
WHITE = b"\xff\xff\xff"


@pytest.mark.browser
def test_pages_render_in_headless_chromium(scene: Scene, views: dict[str, str], tmp_path: Path) -> None:
    documents = {name: browser.html_page(title, views[key])
                 for name, (key, title, _) in BROWSER_PAGES.items()}  # fmt: skip
    sizes = {name: size for name, (_, _, size) in BROWSER_PAGES.items()}
    rendered = browser.render_all(documents, tmp_path, sizes=sizes)

    for name in ("plugin-status", "cluster-status"):
        dom = parse(rendered[name].dom)
        served = parse(views[BROWSER_PAGES[name][0]])
        assert set(dom.rows) == set(served.rows) == set(scene.node_of), name  # one browser row per pod
        assert {row["state"] for row in dom.rows.values()} == {"booting", "idle", "busy", "failed"}
    cluster_dom = parse(rendered["cluster-status"].dom)
    assert set(cluster_dom.marked["data-node"]) == set(scene.stack.kube.store.nodes)
    reused = next(row for name, row in cluster_dom.rows.items() if name == scene.reused[0])
    profile = reused["cells"][6]
    assert cluster_dom.marked["data-profile"][profile]["data-busy"] == "1", "pods per profile, as built"
    assert profile in cluster_dom.marked["data-saved"], "what reuse saved, per profile"
    assert "python -m elastic_agent advise trace.jsonl" in text_of(rendered["cluster-status"].dom)
    agent = parse(rendered["agent-status"].dom)
    assert set(agent.marked["data-container"]) == {"agent", "dind"}
    assert set(agent.marked["data-log"]) == {"agent", "dind"}
    assert SIDECAR_LINE in text_of(rendered["agent-status"].dom)

    for name, result in rendered.items():
        png = result.screenshot
        assert png.stat().st_size > 10_000, f"{name}: a near-empty screenshot"
        image = browser.read_png(png, max_rows=400)  # the top is enough, and quicker to decode
        assert (image.width, image.height) == BROWSER_PAGES[name][2], name
        assert len(image.colours()) > 20, f"{name}: the screenshot is (nearly) one colour"
        assert image.pixel(0, 0)[:3] == WHITE, f"{name}: the page background is not white"
        assert image.rows_with_ink(image.pixel(0, 0)) > 150, f"{name}: almost nothing was drawn"

    if target := os.environ.get("STATUS_PAGE_SCREENSHOTS"):  # refresh docs/screenshots for docs/operations.md
        Path(target).mkdir(parents=True, exist_ok=True)
        for name in BROWSER_PAGES:
            shutil.copyfile(rendered[name].screenshot, Path(target) / f"{name}.png")
