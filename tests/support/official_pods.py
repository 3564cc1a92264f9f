"""Pods on both sides of a move from the official Kubernetes plugin: one of the official plugin's, copied
into a template of this plugin as a user moving over would copy it, and one this plugin builds for a job.

The tests of the two plugins in one namespace (with the official plugin's rules, official_plugin.py) and
of the busy label compare their labels."""

from __future__ import annotations

from typing import Any

from elastic_agent.clock import SystemClock
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.pool.pods import PodIdentity, build_pod, cluster_label
from profiles.cluster import ClusterProfile

IMAGE = "gocd/gocd-agent-alpine-3.19:v24.1.0"

# A pod of the official plugin, as `kubectl get pod -o yaml` shows it, made a template of this plugin.
COPIED_TEMPLATE = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: k8s-ea-{{{{ POD_POSTFIX }}}}
  labels:
    app: builds
    kind: kubernetes-elastic-agent
    Elastic-Agent-Created-By: cd.go.contrib.elasticagent.kubernetes
    Elastic-Agent-Job-Id: "41"
spec:
  containers:
    - name: k8s-ea-{{{{ CONTAINER_POSTFIX }}}}
      image: {IMAGE}
      imagePullPolicy: IfNotPresent
"""


CLUSTER = {"go_server_url": "https://gocd.example.test/go", "kubernetes_cluster_url": "https://kube.test",
           "namespace": "builds"}  # fmt: skip


def our_pod(elastic: dict[str, str]) -> dict[str, Any]:
    profile = ClusterProfile.from_properties(CLUSTER)
    spec = JobSpecs(SystemClock(), lambda url, wait=True: "").spec(elastic, profile, "staging", "build")
    job = JobIdentifier(pipeline_name="build", pipeline_label="1", pipeline_counter=1, stage_name="stage",
                        stage_counter="1", job_name="compile", job_id=41)  # fmt: skip
    identity = PodIdentity(server_id="server-1", cluster=cluster_label(profile.cluster_key))
    return build_pod(spec.template, identity=identity, namespace="builds", job=job, spec=spec,
                     auto_register_key="key", go_server_url=profile.go_server_url, now=0.0)  # fmt: skip
