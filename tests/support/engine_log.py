"""One canonical event log of a virtual-time run, for comparing the two engines (run_settings.Engine)
event for event: what the simulated GoCD server asked of the plugin and what it answered, every pod's
change as the plugin's own state sees it, and what the run ends with.

Taken from outside the engines, at the two edges they share: the requests go through the plugin's
in-process transport (`ProjectPlugin.transport`, inprocess_requests.py) and the pods' changes through the
store's listeners, which both engines' stores have (`SimulationKubeStore`, `MemoryPods`). A pod's change
is logged with its annotations and labels, which hold the pool's whole state of the pod (pool/marks.py),
so a warm-pool pod, a predicted one, a reservation or a retirement that differs shows in the log.
Registration keys are random text of the server's: the log says whether a request carried one, not
which.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from elastic_agent.simulation.memory_pods import MemoryPods
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceJob

Event = tuple[Any, ...]


def _job_of(body: Mapping[str, Any]) -> Any:
    identifier = body.get("job_identifier") or {}
    return identifier.get("job_id") if isinstance(identifier, Mapping) else None


def _request(name: str, body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a request: the agent and job it is about."""
    agent = body.get("agent")  # should-assign-work names its agent so; job-completion by elastic_agent_id
    agent_id = agent.get("agent_id") if isinstance(agent, Mapping) else body.get("elastic_agent_id")
    short = name.rsplit(".", 1)[-1]
    if short == "server-ping":
        return (short, len(body.get("all_cluster_profile_properties") or ()))
    return (short, agent_id, _job_of(body), "auto_register_key" in body)


def _pod(kind: str, obj: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = obj["metadata"]
    status = obj.get("status") or {}
    return (
        kind,
        meta["name"],
        status.get("phase"),
        (obj.get("spec") or {}).get("nodeName"),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
    )


def result_figures(result: Any) -> dict[str, Any]:
    """The result's figures, without what the machine decides (wall time, time per request)."""
    figures = dataclasses.asdict(result)
    for measured in ("wall_s", "plugin_time_s"):
        figures.pop(measured, None)
    return figures


def event_log(trace: Sequence[TraceJob], policy: Policy, settings: SimSettings) -> list[Event]:
    """The run's events in the order they happened, then every job's wait and the run's figures."""
    simulation = Simulation(trace, policy, settings)
    # The engine asked for is the one that runs: two full runs would agree with each other, and prove nothing.
    assert isinstance(simulation.store, MemoryPods) == (settings.engine == "policy"), settings.engine
    clock, log = simulation.clock, []

    def heard(kind: str, obj: Mapping[str, Any]) -> None:
        log.append((round(clock.now() - settings.start, 6), "pod", *_pod(kind, obj)))

    simulation.store.add_listener(heard)
    transport = simulation.plugin.transport  # type: ignore[attr-defined]  # this project's backend
    send_value = transport.send_value

    def tapped(name: str, body: dict[str, Any]) -> tuple[int, str]:
        answer = send_value(name, body)
        log.append((round(clock.now() - settings.start, 6), "request", *_request(name, body), answer))
        return answer

    transport.send_value = tapped
    result = simulation.run()
    model = simulation.model
    log.extend(("wait", job.job_id, job.wait_s) for job in model.jobs())
    log.extend(("assignment", a.job_id, a.agent_id, a.assigned_at, a.finished_at) for a in model.assignments)
    log.extend(
        ("registration", a.at, a.pod_name, a.agent_id, a.status, a.reason, sorted(a.environments))
        for a in model.registrations
    )
    log.extend(("refused", a.at, a.pod_name, a.reason) for a in model.refusals)
    stats = dataclasses.asdict(model.stats)
    stats.pop("should_assign_latencies_s")  # the machine's time, not the run's
    log.append(("stats", *sorted(stats.items())))
    log.append(("result", *sorted(result_figures(result).items())))
    return log


def first_divergence(full: Sequence[Event], policy: Sequence[Event]) -> str | None:
    """Where two logs part, in words with the events around it; None when they are the same."""
    for index, (a, b) in enumerate(zip(full, policy, strict=False)):
        if a != b:
            before = "\n".join(f"    {event}" for event in full[max(0, index - 3) : index])
            return f"event {index} of {len(full)}:\n  before:\n{before}\n  full:   {a}\n  policy: {b}"
    if len(full) != len(policy):
        shorter = min(len(full), len(policy))
        return f"the logs agree for {shorter} events, then full has {len(full)}, policy {len(policy)}"
    return None
