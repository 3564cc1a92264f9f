"""How soon a broken pod is told, and how many pods a broken profile costs: the simulated GoCD server and
the fake cluster in virtual time (benchmarks/RESULTS.md, section 13).

For each kind of broken pod the simulated kubelet makes (kubelet_troubles.py), `JOBS` jobs of one
reuse-enabled profile are scheduled at once and the world runs for `RUN_S` simulated seconds. Measured:
the simulated seconds from the first pod's creation to the first console line naming the reason, the
pings sent meanwhile, the pods created in all, and the most pods of the profile alive at one time.
Three variants of the backend: as it is; without the hold (`Holds.allowed` says no limit: broken pods
are told and deleted, and others are created at once); and without the broken-pod rules at all (the
ping's step finds nothing: pods wait for `auto_register_timeout`, as they did before these rules).

    python -m benchmarks.broken_pods
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from elastic_agent.pool import broken_pods
from elastic_agent.pool.holds import Holds
from elastic_agent.pool.intents import Plan
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.harness import VirtualStack
from elastic_agent.simulation.kubelet import FaultKind, PodFault

JOBS = 4
RUN_S = 1800.0
KINDS: tuple[FaultKind, ...] = ("image_pull", "invalid_image", "config_error", "unschedulable", "crash_loop")


def _no_limit(_self: Holds, _fingerprint: str, _now: float, _trying: int) -> int | None:
    return None


def _nothing(_state: PoolState, _now: float) -> Plan:
    return Plan()


@contextmanager
def variant(name: str) -> Iterator[None]:
    if name == "without the hold":
        with mock.patch.object(Holds, "allowed", _no_limit):
            yield
    elif name == "without broken-pod rules":
        with mock.patch.object(broken_pods, "ping_plan", _nothing):
            yield
    else:
        yield


def run(kind: FaultKind) -> dict[str, Any]:
    image = f"registry.example.test/agent:{kind}"
    fault: Callable[[Obj], PodFault | None] = lambda pod: (  # noqa: E731
        PodFault(kind, after=1.0) if pod["spec"]["containers"][0].get("image") == image else None
    )
    stack = VirtualStack(boot_delay=5.0, gocd=GoCDConfig(seed=1), faults=fault)
    created_at: dict[str, float] = {}
    def heard(event: str, pod: Obj) -> None:
        if event == "ADDED":
            created_at.setdefault(pod["metadata"]["name"], stack.clock.now())

    stack.store.add_listener(heard)
    profile = stack.elastic_profile(Reuse="true", Image=image)
    cluster = stack.cluster_profile()
    schedule = stack.gocd.schedule_job
    jobs = [schedule("build", "stage", f"job-{i}", profile, cluster, None, 60.0) for i in range(JOBS)]
    told_at: float | None = None
    pings_then = 0  # pings sent since the start when the line came
    most = 0
    end = stack.clock.now() + RUN_S
    while stack.clock.now() < end:
        stack.run_for(5.0)
        alive = [p for p in stack.pods() if not p["metadata"].get("deletionTimestamp")]
        most = max(most, len(alive))
        if told_at is None and any("cannot start" in stack.gocd.job(j.job_id).console_text for j in jobs):
            told_at, pings_then = stack.clock.now(), stack.gocd.stats.pings_sent
    first = min(created_at.values()) if created_at else None
    return {
        "kind": kind,
        "told_after_s": None if told_at is None or first is None else round(told_at - first),
        "pings_sent_when_told": pings_then or None,
        "pods_created": len(created_at),
        "most_alive": most,
    }


def main() -> None:
    results = {}
    for name in ("as built", "without the hold", "without broken-pod rules"):
        with variant(name):
            results[name] = [run(kind) for kind in KINDS]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
