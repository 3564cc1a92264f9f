"""How soon a broken pod is told, how many pods a broken profile costs, and how long a job waits when
its pod breaks once: the simulated GoCD server and the fake cluster in virtual time (benchmarks/RESULTS.md,
section 13).

For each kind of broken pod the simulated kubelet makes (kubelet_troubles.py), `JOBS` jobs of one
reuse-enabled profile are scheduled at once and the world runs for `RUN_S` simulated seconds. Measured:
the simulated seconds from the first pod's creation to the first console line naming the reason, the
pings sent meanwhile, the pods created in all, and the most pods of the profile alive at one time.
Three variants of the backend: as it is; without the hold (`Holds.allowed` says no limit: broken pods
are told and deleted, and others are created at once); and without the broken-pod rules at all (the
ping's step finds nothing: pods wait for `auto_register_timeout`, as they did before these rules).

Then a pod that breaks once: one job, whose first pod's agent exits with code 1 `ONCE_AFTER` seconds
after its start (before it registers) while the pods after it start well. Measured: the job's wait from
its scheduling to its assignment, with reuse and with one pod per job, as built (the first broken pod is
replaced at once) and with the hold from the first broken pod on (30 s, as the code before had it).

    python -m benchmarks.broken_pods
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from unittest import mock

from elastic_agent.pool import broken_pods, holds
from elastic_agent.pool.holds import SCHEDULE, Holds
from elastic_agent.pool.intents import Plan
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig
from elastic_agent.simulation.kubelet import FaultKind, PodFault
from tests.support.doubles.harness import VirtualStack

JOBS = 4
RUN_S = 1800.0
KINDS: tuple[FaultKind, ...] = ("image_pull", "invalid_image", "config_error", "unschedulable", "crash_loop")
# When the agent of the pod that breaks once exits, after its start: found by the first ping (60 s), by
# the ping 5 s before GoCD's first re-send of create-agent (120 s), by the ping after that re-send.
ONCE_AFTER = (1.0, 60.0, 150.0)


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


def _held_from_the_first(failures: int) -> float:
    return SCHEDULE.delay_s(failures)


def breaks_once(after: float, reuse: bool) -> float | None:
    """The job's wait (simulated seconds) when its first pod's agent exits `after` s after its start."""
    image = "registry.example.test/agent:breaks-once"
    first: list[str] = []

    def fault(pod: Obj) -> PodFault | None:
        if pod["spec"]["containers"][0].get("image") != image:
            return None
        first[:] = first or [pod["metadata"]["name"]]
        return PodFault("crash_loop", after=after) if pod["metadata"]["name"] == first[0] else None

    stack = VirtualStack(boot_delay=5.0, gocd=GoCDConfig(seed=1), faults=fault)
    profile = stack.elastic_profile(Reuse="true" if reuse else "false", Image=image)
    job = stack.gocd.schedule_job("build", "stage", "job", profile, stack.cluster_profile(), None, 60.0)
    stack.run_until(lambda: stack.gocd.job(job.job_id).assigned_at is not None, RUN_S, "the assignment")
    return stack.gocd.job(job.job_id).wait_s


def main() -> None:
    results: dict[str, Any] = {}
    for name in ("as built", "without the hold", "without broken-pod rules"):
        with variant(name):
            results[name] = [run(kind) for kind in KINDS]
    for name in ("as built", "held from the first broken pod"):
        patch = mock.patch.object(holds, "wait_s", _held_from_the_first) if name != "as built" else None
        with patch or nullcontext():
            results[f"breaks once, {name}"] = [
                {"agent_exits_after_s": after, "reuse": reuse, "job_wait_s": breaks_once(after, reuse)}
                for after in ONCE_AFTER
                for reuse in (True, False)
            ]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
