"""The simulated GoCD server as a remote agent sees it: what the agent API (gocd_agent_api.py) asks of the
model, each under the server's state lock. A mixin of SimulatedGoCD (gocd_model.py), which owns the state;
the attributes below are its.

A remote agent is a process of its own (such as tests/support/doubles/standin_agent.py), so the model
does for it only what the real server does for a real agent: it assigns work when the agent asks (get_work
runs the same should-assign-work poll as an in-process agent's timer), finishes a job when the agent reports
it completed, and loses an agent whose pings stop, `lost_contact_after_s` after the last one. Modelled on
gocd/gocd's `BuildRepositoryRemoteImpl` (ping, reportCurrentStatus, reportCompleting, reportCompleted,
isIgnored)."""

from __future__ import annotations

import threading
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.simulation.gocd_records import Agent, GoCDConfig, GoCDStats, Job, JobState
from elastic_agent.simulation.gocd_timing import TimedQueue


class AgentSide:
    config: GoCDConfig
    stats: GoCDStats
    _clock: Clock
    _state_lock: threading.RLock
    _jobs: dict[int, Job]
    _running: dict[int, Job]
    _agents: dict[str, Agent]
    _silences: TimedQueue[str]

    def _poll(self, agent_id: str) -> None:
        raise NotImplementedError  # SimulatedGoCD's

    def _finish_job(self, job: Job, now: float) -> dict[str, Any]:
        raise NotImplementedError  # SimulatedGoCD's

    def _call(self, name: str, body: dict[str, Any] | str) -> tuple[int, str] | None:
        raise NotImplementedError  # SimulatedGoCD's

    def agent_heard(self, agent_id: str) -> bool:
        """A remote agent called: it is lost `lost_contact_after_s` from now unless it calls again
        (gocd/gocd's `AgentInstance.refreshStatus` marks LostContact past the timeout). False for an agent
        the server does not know (deleted, or never registered) or already lost."""
        with self._state_lock:
            agent = self._agents.get(agent_id)
            if agent is None or not agent.remote or not agent.lost_contact_pending:
                return False
            agent.lost_contact_at = self._clock.now() + self.config.lost_contact_after_s
            self._silences.push(agent.lost_contact_at, agent_id)
            return True

    def work_for(self, agent_id: str) -> Job | None:
        """get_work: the job now assigned to the agent, asked for as `BuildAssignmentService
        .assignWorkToAgent` does (should-assign-work for each waiting job of its environments, in order,
        under the assignment lock), or None. An agent the server thinks busy gets no new work."""
        with self._state_lock:
            agent = self._agents.get(agent_id)
            if agent is None or agent.running_job_id is not None:
                return None
        self._poll(agent_id)
        with self._state_lock:
            job_id = agent.running_job_id
            return self._jobs[job_id] if job_id is not None else None

    def record_agent_report(self, agent_id: str, job_id: int, report: str) -> bool:
        """report_current_status and report_completing: kept on the job, in order. False when the job is
        not this agent's running job."""
        with self._state_lock:
            job = self._running.get(job_id)
            if job is None or job.agent_id != agent_id:
                return False
            job.agent_reports.append(report)
            return True

    def complete_reported_job(self, agent_id: str, job_id: int, result: str) -> bool:
        """report_completed: the job is Completed with the agent's result (a result the server set first,
        Cancelled, stays), the agent idle, and job-completion goes to the plugin from this thread, as GoCD
        sends it from the thread that took the agent's report. False when the job is not this agent's
        running job (cancelled, rescheduled or unknown: `isIgnored` told the agent so)."""
        with self._state_lock:
            job = self._running.get(job_id)
            if job is None or job.agent_id != agent_id:
                return False
            del self._running[job_id]
            job.agent_reports.append(f"Completed {result}")
            if job.result is None:
                job.result = result
            body = self._finish_job(job, self._clock.now())
        self.stats.job_completions_sent += 1
        self._call("job-completion", body)  # sent once, never retried, whatever the answer
        return True

    def is_ignored(self, job_id: int) -> bool:
        """is_ignored: the job was cancelled or rescheduled (`BuildRepositoryService
        .isCancelledOrRescheduled`), so the agent reports nothing more for it."""
        with self._state_lock:
            job = self._jobs.get(job_id)
            if job is None:
                return True
            return job.state in (JobState.CANCELLED, JobState.RESCHEDULED) or job.result == "Cancelled"
