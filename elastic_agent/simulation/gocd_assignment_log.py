"""Which agent ran which job of the simulated GoCD server, and from when to when: the record tests and
benchmarks read (`SimulatedGoCD.assignments`) and the invariants check (a job assigned twice, an agent
running two jobs at once). An assignment stays open until its job completes or its agent is lost."""

from __future__ import annotations

from elastic_agent.simulation.gocd_records import Assignment, GoCDStats, RegistrationAttempt
from elastic_agent.simulation.gocd_timing import EPSILON_S


class AssignmentLog:
    def __init__(self) -> None:
        self.assignments: list[Assignment] = []
        self._open: dict[int, Assignment] = {}

    def record(self, job_id: int, agent_id: str, now: float) -> None:
        assignment = Assignment(job_id, agent_id, now)
        self.assignments.append(assignment)
        self._open[job_id] = assignment

    def finish(self, job_id: int, now: float) -> None:
        assignment = self._open.pop(job_id, None)
        if assignment is not None:
            assignment.finished_at = now

    def violations(self, stats: GoCDStats, refusals: list[RegistrationAttempt]) -> list[str]:
        """Everything the server recorded as going wrong (`stats`), the registrations refused, jobs assigned
        twice, and agents that ran two jobs at once."""
        problems = list(stats.invariant_violations)
        problems += [f"agent {a} deleted while building" for a in stats.deleted_while_building]
        problems += [f"registration of pod {r.pod_name} refused: {r.reason}" for r in refusals]
        seen: set[int] = set()
        busy_until: dict[str, float] = {}
        for assignment in sorted(self.assignments, key=lambda a: (a.assigned_at, a.job_id)):
            if assignment.job_id in seen:
                problems.append(f"job {assignment.job_id} assigned twice")
            seen.add(assignment.job_id)
            if busy_until.get(assignment.agent_id, float("-inf")) > assignment.assigned_at + EPSILON_S:
                problems.append(f"agent {assignment.agent_id} ran two jobs at once")
            end = assignment.finished_at if assignment.finished_at is not None else float("inf")
            busy_until[assignment.agent_id] = end
        return problems
