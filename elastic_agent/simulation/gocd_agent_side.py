"""The simulated GoCD server as a remote agent sees it: what the agent API (gocd_agent_api.py) asks of the
server, each under the server's state lock.

A remote agent is a process of its own (such as tests/support/doubles/standin_agent.py), so the server does
for it only what the real server does for a real agent: it assigns work when the agent asks (get_work runs
the same should-assign-work poll as an in-process agent's timer, gocd_assignment.py), finishes a job when
the agent reports it completed, and loses an agent whose pings stop, `lost_contact_after_s` after the last
one. Modelled on gocd/gocd's `BuildRepositoryRemoteImpl` (ping, reportCurrentStatus, reportCompleting,
reportCompleted, isIgnored)."""

from __future__ import annotations

from collections.abc import Callable

from elastic_agent.simulation.gocd_agents import AgentRegistry
from elastic_agent.simulation.gocd_completions import JobCompletions
from elastic_agent.simulation.gocd_jobs import JobBook
from elastic_agent.simulation.gocd_records import Job, JobState, ServerCore


class RemoteAgents:
    def __init__(
        self,
        core: ServerCore,
        book: JobBook,
        registry: AgentRegistry,
        poll: Callable[[str], None],
        completions: JobCompletions,
    ) -> None:
        """`poll(agent id)`: the agent asks for work (gocd_assignment.WorkAssignment.poll)."""
        self._clock = core.clock
        self._lock = core.lock
        self._book = book
        self._registry = registry
        self._poll = poll
        self._completions = completions

    def heard(self, agent_id: str) -> bool:
        """A remote agent called: it is lost `lost_contact_after_s` from now unless it calls again
        (gocd/gocd's `AgentInstance.refreshStatus` marks LostContact past the timeout). False for an agent
        the server does not know (deleted, or never registered) or already lost."""
        with self._lock:
            return self._registry.heard(agent_id, self._clock.now())

    def work_for(self, agent_id: str) -> Job | None:
        """get_work: the job now assigned to the agent, asked for as `BuildAssignmentService
        .assignWorkToAgent` does (should-assign-work for each waiting job of its environments, in order,
        under the assignment lock), or None. An agent the server thinks busy gets no new work."""
        with self._lock:
            agent = self._registry.agents.get(agent_id)
            if agent is None or agent.running_job_id is not None:
                return None
        self._poll(agent_id)
        with self._lock:
            job_id = agent.running_job_id
            return self._book.jobs[job_id] if job_id is not None else None

    def record_report(self, agent_id: str, job_id: int, report: str) -> bool:
        """report_current_status and report_completing: kept on the job, in order. False when the job is
        not this agent's running job."""
        with self._lock:
            job = self._book.running.get(job_id)
            if job is None or job.agent_id != agent_id:
                return False
            job.agent_reports.append(report)
            return True

    def complete_reported(self, agent_id: str, job_id: int, result: str) -> bool:
        """report_completed: the job is Completed with the agent's result (a result the server set first,
        Cancelled, stays), the agent idle, and job-completion goes to the plugin from this thread, as GoCD
        sends it from the thread that took the agent's report. False when the job is not this agent's
        running job (cancelled, rescheduled or unknown: `isIgnored` told the agent so)."""
        with self._lock:
            job = self._book.running.get(job_id)
            if job is None or job.agent_id != agent_id:
                return False
            del self._book.running[job_id]
            job.agent_reports.append(f"Completed {result}")
            if job.result is None:
                job.result = result
            body = self._completions.finish(job, self._clock.now())
        self._completions.send(body)  # sent once, never retried, whatever the answer
        return True

    def is_ignored(self, job_id: int) -> bool:
        """is_ignored: the job was cancelled or rescheduled (`BuildRepositoryService
        .isCancelledOrRescheduled`), so the agent reports nothing more for it."""
        with self._lock:
            job = self._book.jobs.get(job_id)
            if job is None:
                return True
            return job.state in (JobState.CANCELLED, JobState.RESCHEDULED) or job.result == "Cancelled"
