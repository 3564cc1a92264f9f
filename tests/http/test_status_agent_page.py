"""The agent status report, asked for as GoCD asks for it (from an agent's page by its id, from a job's
page by the job alone), over the bridge contract, on the scene of tests/support/status_scene.py: what the
official plugin's report shows (the pod's details, every container, events, every container's log, the
pod's YAML) with every value that may be secret hidden, and what only this plugin knows (the jobs the
pod ran, why it is kept or goes, its reuse fingerprint)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import yaml

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_model import ENV_KEY
from elastic_agent.status.pod import ENV_RULE, HIDDEN_VALUE
from tests.support.status_scene import (
    NAMESPACE,
    SIDECAR_LINE,
    Scene,
    job_label,
    parse,
    scene,
    text_of,
)

__all__ = ["scene"]  # a fixture, used by name


@pytest.fixture(scope="module")
def reused_view(scene: Scene) -> str:
    return scene.agent_view(scene.reused[0])


def pod_of(scene: Scene, name: str) -> dict[str, Any]:
    return next(p for p in scene.stack.pods() if p["metadata"]["name"] == name)


def yaml_of(view: str) -> dict[str, Any]:
    found = re.search(r'<pre class="yaml" data-yaml>(.*?)</pre>', view, re.S)
    assert found, "the page shows the pod's YAML"
    loaded: dict[str, Any] = yaml.safe_load(html.unescape(found.group(1)))
    return loaded


def test_the_pods_details_are_its_node_ips_conditions_and_start(scene: Scene, reused_view: str) -> None:
    pod = pod_of(scene, scene.reused[0])
    text = text_of(reused_view)
    status = pod["status"]
    assert f"Node {pod['spec']['nodeName']} (host IP {status['hostIP']})" in text
    assert f"Pod IP {status['podIP']}" in text
    conditions = parse(reused_view).marked["data-condition"]
    assert set(conditions) == {c["type"] for c in status["conditions"]} >= {"Ready", "PodScheduled"}
    assert "Ready: True" in text and f"Started {status['startTime']}" in text


def test_every_container_is_shown_with_its_image_pull_policy_readiness_restarts_state_and_command(
    scene: Scene, reused_view: str
) -> None:
    containers = parse(reused_view).marked["data-container"]
    assert set(containers) == {"agent", "dind"} and all(c["data-ready"] == "yes" for c in containers.values())
    text = text_of(reused_view)
    started = {s["name"]: s["state"]["running"]["startedAt"] for s in pod_of(scene, scene.reused[0])["status"]
               ["containerStatuses"]}  # fmt: skip
    assert ("agent container ready: yes Image gocd/gocd-agent-wolfi:v24.3.0 Image pull policy IfNotPresent "
            f"State Running since {started['agent']} Restarts 0 Command the image's ENTRYPOINT "
            "Arguments the image's CMD") in text
    assert ("dind container ready: yes Image docker:27-dind Image pull policy the cluster's default "
            f"State Running since {started['dind']} Restarts 0 Command the image's ENTRYPOINT "
            "Arguments --host=tcp://0.0.0.0:2375 --tls=false") in text  # fmt: skip


def test_environment_variables_are_named_with_their_source_and_never_their_value(
    scene: Scene, reused_view: str
) -> None:
    env = parse(reused_view).marked["data-env"]
    assert {"GO_EA_AUTO_REGISTER_KEY", "GO_EA_SERVER_URL", "DB_PASSWORD", "LOG_LEVEL", "DEPLOY_TOKEN",
            "REGISTRY_PASSWORD", "POD_NAME", "DOCKER_HOST", "*"} <= set(env)  # fmt: skip
    text = text_of(reused_view)
    for shown in ("GO_EA_AUTO_REGISTER_KEY set by the plugin", "DB_PASSWORD written in the profile",
                  "REGISTRY_PASSWORD Secret registry, key password", "POD_NAME the pod's metadata.name",
                  "* every key of Secret dind-settings"):  # fmt: skip
        assert shown in text
    assert ENV_RULE in html.unescape(reused_view)
    for secret in scene.secrets():
        assert secret not in reused_view
    assert "tcp://localhost:2375" not in reused_view, "no value is shown, not even a harmless one"


def test_events_are_listed_with_the_container_each_is_about(reused_view: str) -> None:
    text = text_of(reused_view)
    for container in ("agent", "dind"):
        assert re.search(rf"Normal Started {container} Container started 1", text), container
        assert re.search(rf"Normal Pulled {container} Successfully pulled image", text), container
    assert re.search(r"Normal Scheduled Successfully assigned", text)


def test_the_log_of_every_container_is_shown_and_a_key_an_agent_printed_is_hidden(
    scene: Scene, reused_view: str
) -> None:
    assert set(parse(reused_view).marked["data-log"]) == {"agent", "dind"}
    text = text_of(reused_view)
    assert f"Registering elastic agent {scene.reused[0]}" in text and SIDECAR_LINE in text
    unit_pod = next(pod for pod, job in scene.busy.items() if job.job_name == "unit")
    assert "DEBUG env GO_EA_AUTO_REGISTER_KEY=[hidden]" in text_of(scene.agent_view(unit_pod))


def test_the_pods_yaml_carries_no_registration_key_and_no_environment_value(
    scene: Scene, reused_view: str
) -> None:
    shown, stored = yaml_of(reused_view), pod_of(scene, scene.reused[0])
    assert shown["metadata"]["name"] == stored["metadata"]["name"]
    assert "managedFields" not in shown["metadata"]
    assert shown["metadata"]["labels"] == stored["metadata"]["labels"]
    for container in shown["spec"]["containers"]:
        for variable in container.get("env") or []:
            assert "value" not in variable or variable["value"] == HIDDEN_VALUE, variable
    [key] = [e for e in shown["spec"]["containers"][0]["env"] if e["name"] == ENV_KEY]
    assert key == {"name": ENV_KEY, "value": HIDDEN_VALUE}
    assert shown["spec"]["containers"][1]["envFrom"] == [{"secretRef": {"name": "dind-settings"}}]
    assert shown["status"]["phase"] == "Running"


def test_what_only_this_plugin_knows_the_jobs_run_why_it_is_kept_and_its_fingerprint(
    scene: Scene, reused_view: str
) -> None:
    pod, ran, _ = scene.reused
    text = text_of(reused_view)
    assert "Jobs run 2 (its 3rd job is running)" in text
    assert [int(i) for i in parse(reused_view).marked["data-job-id"]] == [ran[1].job_id, ran[0].job_id]
    assert f"{job_label(ran[1])} (job id {ran[1].job_id}) {job_label(ran[0])}" in text
    assert ("Kept or goes kept Kept while it runs its job; then it waits for the next job of its profile, "
            "at most 10m (IdleTimeout).") in text  # fmt: skip
    fingerprint = pod_of(scene, pod)["metadata"]["labels"][labels.LABEL_FINGERPRINT]
    assert f"Fingerprint {fingerprint} (pods with the same one are interchangeable; 1 other here)" in text
    assert "In force IdleTimeout 10m, MaxJobsPerPod no limit, MinIdlePods 0" in text

    idle_pod, _ = scene.idle
    idle_text = text_of(scene.agent_view(idle_pod))
    kept = (r"Kept or goes kept Kept for the next job of its profile: it goes at the first server ping after "
            r"\d\d:\d\d:\d\d UTC \(IdleTimeout 10m\) if no job comes first\.")
    assert re.search(kept, idle_text)
    booting_text = text_of(scene.agent_view(scene.booting[0]))
    starting = "Kept or goes kept Its agent is starting: the pod goes at the first server ping after"
    assert starting in booting_text
    assert "Reuse off: one job, then the pod goes" in booting_text
    failed_text = text_of(scene.agent_view(scene.failed[0]))
    assert "Kept or goes goes The pod failed (Evicted): the next server ping removes it" in failed_text


def test_the_job_page_shows_the_same_view_of_the_pod_that_ran_runs_or_was_started_for_the_job(
    scene: Scene, reused_view: str
) -> None:
    pod, ran, running = scene.reused
    by_agent = parse(reused_view).marked
    for job, relation in ((ran[0], "ran"), (running, "runs")):
        view = scene.agent_view(job=job)
        assert f"Pod {pod} busy This pod {relation} this job." in text_of(view)
        assert parse(view).marked == by_agent, "the same sections, containers, variables, logs and jobs"
    booting_pod, booting_job = scene.booting
    assert f"Pod {booting_pod} booting This pod was started for this job." in text_of(
        scene.agent_view(job=booting_job))  # fmt: skip


def test_a_container_that_has_not_started_has_no_log_and_the_page_says_why(scene: Scene) -> None:
    booting_pod, booting_job = scene.booting
    text = text_of(scene.agent_view(booting_pod))
    assert f"Pod {booting_pod} booting" in text and f"started for {job_label(booting_job)}" in text
    assert "Agent registered not yet" in text and "Pulling image" in text
    container = pod_of(scene, booting_pod)["spec"]["containers"][0]["name"]
    assert (f'The log of container {container} could not be read: the Kubernetes API at '
            f'{scene.stack.kube.url} answered 400 to log: container "{container}" in pod "{booting_pod}" '
            "is waiting to start: ContainerCreating") in text  # fmt: skip


def test_agent_page_of_an_evicted_pod_says_why(scene: Scene) -> None:
    failed_pod, failed_job = scene.failed
    text = text_of(scene.agent_view(failed_pod))
    assert f"Pod {failed_pod} failed" in text
    assert "Evicted: The node was low on resource: memory." in text
    assert "The next server ping removes it." in text
    assert f"was running {job_label(failed_job)}" in text
    assert "the plugin last marked it busy" in text
    assert "Warning Evicted The node was low on resource: memory." in text  # the event, with its type
    assert "ERROR The node was low on resource: memory." in text  # the log line


def test_agent_page_for_an_unknown_agent_job_or_cluster_says_so_in_a_sentence(scene: Scene) -> None:
    busy_pod, busy_job = next(iter(scene.busy.items()))
    unknown_job = {**busy_job.identifier(), "job_id": 987654}
    other = {"namespace": "never-used"}
    views = {
        "agent": scene.agent_view("k8s-ea-0000000000"),
        "job": scene.view("agent-status-report",
                          {"job_identifier": unknown_job, "cluster_profile_properties": scene.cluster}),
        "cluster": scene.agent_view(busy_pod, **other),
    }
    assert (f"There is no pod named k8s-ea-0000000000 of this plugin in namespace {NAMESPACE}. "
            "Its work may be done and the pod removed") in text_of(views["agent"])  # fmt: skip
    assert f"No pod of this plugin in namespace {NAMESPACE} runs or ran the job with id 987654" in text_of(
        views["job"])  # fmt: skip
    assert "The backend has not connected to this cluster since it started" in text_of(views["cluster"])
    for view in views.values():
        assert parse(view).rows == {} and "Traceback" not in view
