"""What the simulated GoCD server does when it loses contact with an agent.

The agent goes LostContact (gocd/gocd's `AgentInstance.refreshStatus`, once its heartbeats stopped for
`lost_contact_after_s`: gocd_agents.py says when), and the job it was building, if any, is rescheduled:
GoCD reschedules a job whose agent vanished as a new run of the same job, with a new job id, waiting for
the next assignment tick like any scheduled job, and sends no job-completion for the old run. The agent's
build state is then unknown.
"""

from __future__ import annotations

from collections.abc import Callable

from elastic_agent.simulation.gocd_agents import AgentRegistry
from elastic_agent.simulation.gocd_assignment_log import AssignmentLog
from elastic_agent.simulation.gocd_jobs import JobBook
from elastic_agent.simulation.gocd_records import Agent, BuildState, GoCDStats, Job


class LostContact:
    def __init__(
        self, stats: GoCDStats, book: JobBook, log: AssignmentLog, add_job: Callable[[Job], None]
    ) -> None:
        """`add_job(job)`: schedules the new run (the server's, which gocd_inprocess.py extends)."""
        self._stats = stats
        self._book = book
        self._log = log
        self._add_job = add_job

    def lose(self, agent: Agent, now: float) -> None:
        """The agent is LostContact, and the job it was building, if any, rescheduled (state lock held)."""
        job_id = AgentRegistry.mark_lost(agent)
        job = self._book.jobs.get(job_id) if job_id is not None else None
        if job is None:
            return
        agent.build_state = BuildState.UNKNOWN
        rerun = self._book.rerun(job, now)
        self._log.finish(job.job_id, now)
        self._add_job(rerun)
        self._stats.jobs_rescheduled += 1
