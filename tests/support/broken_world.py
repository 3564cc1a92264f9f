"""The simulated kubelet's faults by image, and a virtual-time stack whose pods break with them.

A pod's image says how it breaks (cannot be pulled, crashes at start, is OOM-killed, fits no node, lacks
its config, has an invalid name): the tests of broken pods and of their retries schedule jobs on such
images and read what the job's console says."""

from __future__ import annotations

from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig, Job
from elastic_agent.simulation.kubelet import PodFault
from tests.support.doubles.harness import VirtualStack

MISSING = "registry.example.test/gocd-agent:does-not-exist"
CRASHING = "registry.example.test/gocd-agent:exits-at-start"
GREEDY = "registry.example.test/gocd-agent:needs-more"
HUGE = "registry.example.test/gocd-agent:huge"
NO_CONFIG = "registry.example.test/gocd-agent:needs-a-secret"
BAD_NAME = "Registry.Example.Test/UPPER:case"


class Faults:
    """The kubelet's fault per image; `fixed` images pull again (the registry got the image)."""

    def __init__(self) -> None:
        self.fixed: set[str] = set()

    def __call__(self, pod: Obj) -> PodFault | None:
        image = pod["spec"]["containers"][0].get("image", "")
        if image in self.fixed:
            return None
        return {
            MISSING: PodFault("image_pull"),
            CRASHING: PodFault("crash_loop", after=1.0),
            GREEDY: PodFault("oom", after=1000.0),
            HUGE: PodFault("unschedulable"),
            NO_CONFIG: PodFault("config_error"),
            BAD_NAME: PodFault("invalid_image"),
        }.get(image)


def broken_stack(faults: Faults | None = None) -> VirtualStack:
    return VirtualStack(boot_delay=5.0, gocd=GoCDConfig(seed=1), faults=faults or Faults())


def console(stack: VirtualStack, job: Job) -> str:
    return stack.gocd.job(job.job_id).console_text


def restarting_pod(image: str) -> str:
    """A pod template whose agent container the kubelet restarts (restartPolicy Always)."""
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: agent-{{{{ POD_POSTFIX }}}}
spec:
  restartPolicy: Always
  containers:
    - name: agent
      image: {image}
"""
