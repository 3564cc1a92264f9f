"""What a virtual-time replay leaves that two paths must agree on: the pods (names, creation and
deletion times), every job's wait and every assignment, and a way to run independent replays side by
side (two processes halve the wall time on this 2-core machine)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TypeVar

from elastic_agent.simulation.virtual_time import Simulation

Run = TypeVar("Run")
Result = TypeVar("Result")
Pods = list[tuple[str, float, float | None]]  # name, created, deleted
Waits = dict[int, float | None]  # job id -> seconds from scheduled to assigned
Assignments = list[tuple[int, str, float, float | None]]  # job id, agent (pod), assigned, finished


def observed(simulation: Simulation) -> tuple[Pods, Waits, Assignments]:
    tracker, model = simulation.tracker, simulation.model
    return (
        [(pod, created, tracker.deleted.get(pod)) for pod, created in tracker.created.items()],
        {job.job_id: job.wait_s for job in model.jobs()},
        [(a.job_id, a.agent_id, a.assigned_at, a.finished_at) for a in model.assignments],
    )


def side_by_side(runs: Sequence[Run], replay: Callable[[Run], Result]) -> dict[Run, Result]:
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        return dict(zip(runs, pool.map(replay, runs), strict=True))
