"""What the agent status report reads from a pod object (status/pod.py) and why it says a pod is
kept or goes (status/keep.py), on pods shaped as the API serves them, in every case a page meets:
init containers and native sidecars, waiting and ended containers, every kind of environment source,
and secrets wherever a template may have put them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.redaction import request_values
from elastic_agent.status.keep import keeping
from elastic_agent.status.pod import HIDDEN_VALUE, pod_details, pod_yaml
from profiles.cluster import ClusterProfile

SECRET_TOKEN = "clusterTok.9Hd3Lq7Wm2Zp5Ys8"
POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2030-01-01T00:00:00Z",
                 "managedFields": [{"manager": "kubelet"}],
                 "annotations": {"vault/token": SECRET_TOKEN, "note": "password: hunter2hunter2"}},
    "spec": {
        "nodeName": "node-a",
        "initContainers": [
            {"name": "setup", "image": "busybox:1", "command": ["sh", "-c", "echo ready > /work/flag"]},
            {"name": "dind", "image": "docker:27-dind", "restartPolicy": "Always",
             "env": [{"name": "DOCKER_TLS_CERTDIR", "value": ""}]},
        ],
        "containers": [{
            "name": "agent", "image": "gocd/gocd-agent-wolfi:v24.3.0", "imagePullPolicy": "Always",
            "command": ["/bin/sh"], "args": ["-c", f"run --token={SECRET_TOKEN} && echo 'a b'"],
            "env": [
                {"name": "GO_EA_AUTO_REGISTER_KEY", "value": "key-3f9a0c1d-aaaa"},
                {"name": "PLAIN", "value": "visible-or-not"},
                {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "FROM_MAP", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
                {"name": "UNSET"},
            ],
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "APP_"},
                        {"secretRef": {"name": "creds"}}],
        }],
    },
    "status": {
        "phase": "Running", "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}, {"ip": "fd00::3"}],
        "hostIP": "192.168.1.7", "startTime": "2030-01-01T00:00:02Z", "qosClass": "Burstable",
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
        "initContainerStatuses": [
            {"name": "setup", "ready": False, "restartCount": 0,
             "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
            {"name": "dind", "ready": True, "restartCount": 1,
             "state": {"running": {"startedAt": "2030-01-01T00:00:05Z"}},
             "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}},
        ],
        "containerStatuses": [{"name": "agent", "ready": False, "restartCount": 3, "state": {"waiting": {
            "reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=agent"}}}],
    },
}  # fmt: skip
SECURE = request_values([SECRET_TOKEN])
POD_SECRET_REF = {"name": "s", "key": "k"}


def test_the_details_are_the_pods_ips_host_conditions_start_and_qos() -> None:
    details = pod_details(POD, SECURE)
    assert (details.node, details.pod_ips, details.host_ip) == ("node-a", "10.1.2.3, fd00::3", "192.168.1.7")
    assert details.conditions == (("Ready", "False", "ContainersNotReady"),)
    assert (details.started, details.qos, details.phase) == ("2030-01-01T00:00:02Z", "Burstable", "Running")


def test_init_containers_and_native_sidecars_come_first_each_with_its_state_and_last_run() -> None:
    setup, dind, agent = pod_details(POD, SECURE).containers
    assert (setup.name, setup.kind, setup.state, setup.ready) == (
        "setup", "init container", "Terminated: Completed, exit code 0", "no")
    assert setup.command == "sh -c 'echo ready > /work/flag'"
    assert (dind.kind, dind.restarts, dind.ready) == ("sidecar", 1, "yes")
    assert dind.state == "Running since 2030-01-01T00:00:05Z"
    assert dind.last_state == "Terminated: OOMKilled, exit code 137"
    assert dind.pull_policy == "the cluster's default" and (dind.command, dind.args) == ("", "")
    assert (agent.kind, agent.pull_policy, agent.restarts) == ("container", "Always", 3)
    assert agent.state == "Waiting: CrashLoopBackOff (back-off 40s restarting failed container=agent)"


def test_a_secure_value_in_a_command_is_hidden_and_the_rest_quoted_as_a_shell_would() -> None:
    agent = pod_details(POD, SECURE).containers[2]
    assert SECRET_TOKEN not in agent.command + agent.args
    assert (agent.command, agent.args) == ("/bin/sh", "-c 'run --token=[hidden] && echo '\"'\"'a b'\"'\"''")


def test_args_without_a_command_are_the_images_entrypoints_arguments_not_a_command() -> None:
    """Kubernetes: `command` replaces the image's ENTRYPOINT, `args` its CMD; args alone go to the
    ENTRYPOINT."""
    dind = {"name": "dind", "image": "docker:27-dind", "args": ["--host=tcp://0.0.0.0:2375", "--tls=false"]}
    pod = {**POD, "spec": {"containers": [dind]}}
    [row] = pod_details(pod, SECURE).containers
    assert (row.command, row.args) == ("", "--host=tcp://0.0.0.0:2375 --tls=false")


def test_every_variable_says_where_its_value_comes_from_and_no_value_is_shown() -> None:
    agent = pod_details(POD, SECURE).containers[2]
    assert [(e.name, e.source) for e in agent.env] == [
        ("GO_EA_AUTO_REGISTER_KEY", "set by the plugin"),
        ("PLAIN", "written in the profile"),
        ("FROM_SECRET", "Secret s, key k"),
        ("FROM_MAP", "ConfigMap m, key k"),
        ("NODE", "the pod's spec.nodeName"),
        ("LIMIT", "limits.memory of this container"),
        ("UNSET", "empty"),
        ("APP_*", "every key of ConfigMap settings"),
        ("*", "every key of Secret creds"),
    ]
    assert "visible-or-not" not in repr(pod_details(POD, SECURE))


def test_the_yaml_hides_every_env_value_the_secure_values_and_what_looks_like_a_secret() -> None:
    text = pod_yaml(POD, SECURE)
    shown = yaml.safe_load(text)
    for secret in (SECRET_TOKEN, "key-3f9a0c1d-aaaa", "visible-or-not", "hunter2hunter2"):
        assert secret not in text
    assert "managedFields" not in shown["metadata"]
    agent = shown["spec"]["containers"][0]
    assert [e.get("value") for e in agent["env"]] == [HIDDEN_VALUE, HIDDEN_VALUE, *[None] * 5]
    assert agent["env"][2] == {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": POD_SECRET_REF}}
    dind_env = shown["spec"]["initContainers"][1]["env"]
    assert dind_env == [{"name": "DOCKER_TLS_CERTDIR", "value": HIDDEN_VALUE}]
    assert shown["metadata"]["annotations"] == {"vault/token": "[hidden]", "note": "password: [hidden]"}
    assert shown["status"] == POD["status"], "the status is shown as served"
    assert POD["spec"]["containers"][0]["env"][1]["value"] == "visible-or-not", "the pod itself is untouched"


def test_a_pod_without_status_or_spec_reads_as_blank_not_as_an_error() -> None:
    details = pod_details({"metadata": {"name": "bare"}})
    assert (details.containers, details.conditions, details.pod_ips) == ((), (), "")
    bare = {"metadata": {"name": "bare"}}
    assert yaml.safe_load(pod_yaml(bare)) == {**bare, "spec": {}}


# ----- kept or goes -------------------------------------------------------------------------------

SETTINGS = ClusterProfile(go_server_url="https://gocd.example.test/go", idle_timeout=600.0,
                          auto_register_timeout=600.0, max_pod_lifetime=7200.0)  # fmt: skip
NOW = 100_000.0
RECORD = PodRecord(name="p", state=PodState.IDLE, state_since=NOW - 60, created_at=NOW - 600,
                   created_for_job_id=1, current_job_id=None, jobs_run=2, registered=True, environment=None,
                   reuse=True, fingerprint="v1:ab", idle_timeout=300.0, max_jobs=None, min_idle=0,
                   phase="Running", reason=None, deleting=False, retire_reason=None)  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "verdict", "why"),
    [
        ({}, "kept", "Kept for the next job of its profile: it goes at the first server ping after "
                     "03:50:40 UTC (IdleTimeout 5m) if no job comes first."),
        ({"min_idle": 2}, "kept", "unless MinIdlePods (2) keeps it."),
        ({"max_jobs": 2}, "goes", "It ran 2 jobs (MaxJobsPerPod 2): the next server ping removes it."),
        ({"max_jobs": 1, "jobs_run": 1}, "goes", "It ran 1 job (MaxJobsPerPod 1): the next server ping"),
        ({"state": PodState.BUSY, "max_jobs": 1, "jobs_run": 0}, "kept",
         "then it retires: it will have run 1 job (MaxJobsPerPod 1)."),
        ({"created_at": NOW - 7200}, "goes", "It is older than max_pod_lifetime (2h): the next server ping"),
        ({"state": PodState.BUSY, "current_job_id": 3}, "kept",
         "Kept while it runs its job; then it waits for the next job of its profile, at most 5m "
         "(IdleTimeout)."),
        ({"state": PodState.BUSY, "max_jobs": 3}, "kept",
         "Kept while it runs its job; then it retires: it will have run 3 jobs (MaxJobsPerPod 3)."),
        ({"state": PodState.BUSY, "reuse": False}, "kept", "then it goes: its profile runs one job per pod"),
        ({"reuse": False}, "goes", "Its job is done and its profile runs one job per pod"),
        ({"reuse": False, "jobs_run": 0}, "kept", "Waiting for the job it was started for; it goes at the "
                                                  "first server ping after 03:55:40 UTC if that job never"),
        ({"state": PodState.BOOTING, "registered": False, "created_at": NOW - 60}, "kept",
         "Its agent is starting: the pod goes at the first server ping after 03:55:40 UTC if the agent "
         "has not registered by then (auto_register_timeout 10m)."),
        ({"state": PodState.RETIRING, "retire_reason": "idle 6m (idle timeout 5m)"}, "goes",
         "Retiring: idle 6m (idle timeout 5m). It takes no more jobs"),
        ({"phase": "Failed", "reason": "Evicted"}, "goes", "The pod failed (Evicted): the next server ping"),
        ({"deleting": True}, "goes", "It is being deleted."),
    ],
)  # fmt: skip
def test_a_pod_is_said_to_be_kept_or_to_go_by_the_rules_that_decide_it(
    changes: dict[str, Any], verdict: str, why: str
) -> None:
    said = keeping(replace(RECORD, **changes), SETTINGS, NOW)
    assert said.verdict == verdict and why in said.why, said
