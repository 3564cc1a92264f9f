"""The simulated GoCD server's job book: every job it scheduled, and which of them are planned, waiting
or running.

A job goes through three sets on its way to an agent, as in gocd/gocd: scheduled, it is only planned
(`BuildAssignmentService.reloadJobPlans` loads the job plans on its 5-s timer, and only then are agents
offered it and create-agent sent: gocd_tick.py); loaded, it waits for an agent of its environment
(`BuildAssignmentService.assignWorkToAgent` offers the waiting plans in scheduling order); assigned, it
runs until its completion or its agent's LostContact, which reschedules it as a new run with a new job id
(gocd_lost_contact.py). Job ids grow with scheduling, so insertion order is scheduling order in
every set. The book holds the sets; the rules that move jobs between them are the other parts'.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from elastic_agent.simulation.gocd_records import Job, JobState

ConsoleKey = tuple[str, str, str, str, str]  # pipeline, pipeline counter, stage, stage counter, job


class JobBook:
    def __init__(self, first_job_id: int, lock: threading.RLock) -> None:
        """`lock`: the server's state lock, taken by the queries from outside."""
        self._lock = lock
        self.jobs: dict[int, Job] = {}
        # Scheduled jobs the assignment tick has not picked up yet: no agent sees them, no create-agent
        # was sent (gocd/gocd BuildAssignmentService.reloadJobPlans: work is assigned only from the job
        # plans the 5-s timer loaded, and the same timer sends create-agent for the plans new to it).
        self.planned: dict[int, Job] = {}
        self.waiting: dict[int, Job] = {}
        self.waiting_by_env: dict[str | None, dict[int, Job]] = {}
        self.running: dict[int, Job] = {}
        self._by_identifier: dict[ConsoleKey, int] = {}
        self._pipeline_counters: dict[str, int] = {}
        self.next_job_id = first_job_id

    def new_job(
        self,
        pipeline: str,
        stage: str,
        job_name: str,
        elastic_profile_properties: Mapping[str, str],
        cluster_profile_properties: dict[str, str],
        environment: str | None,
        duration_s: float,
        now: float,
        *,
        pipeline_counter: int | None,
        stage_counter: str,
        planned_result: str,
    ) -> Job:
        """A new run of a pipeline's job, numbered as GoCD numbers them (not yet added: `add`)."""
        if pipeline_counter is None:
            pipeline_counter = self._pipeline_counters.get(pipeline, 0) + 1
        latest = self._pipeline_counters.get(pipeline, 0)
        self._pipeline_counters[pipeline] = max(latest, pipeline_counter)
        return Job(
            job_id=self.next_job_id,
            pipeline=pipeline,
            pipeline_counter=pipeline_counter,
            stage=stage,
            stage_counter=stage_counter,
            job_name=job_name,
            elastic_profile_properties=dict(elastic_profile_properties),
            cluster_profile_properties=cluster_profile_properties,
            environment=environment or None,
            duration_s=duration_s,
            scheduled_at=now,
            planned_result=planned_result,
        )

    def add(self, job: Job) -> None:
        """A job is scheduled: it is planned until the next assignment tick (`take_planned`)."""
        self.next_job_id = job.job_id + 1
        self.jobs[job.job_id] = job
        self.planned[job.job_id] = job
        self._by_identifier[job.console_key()] = job.job_id

    def rerun(self, job: Job, now: float) -> Job:
        """GoCD reschedules a job whose agent vanished: the old run is Rescheduled and a new run, with a
        new job id, is returned to be added (no job-completion for the old one)."""
        job.state = JobState.RESCHEDULED
        self.running.pop(job.job_id, None)
        rerun = job.rerun(self.next_job_id, now)
        job.rescheduled_as = rerun.job_id
        return rerun

    def take_planned(self) -> dict[int, Job]:
        planned, self.planned = self.planned, {}
        return planned

    def wait(self, job: Job) -> None:
        self.waiting[job.job_id] = job
        self.waiting_by_env.setdefault(job.environment, {})[job.job_id] = job

    def unwait(self, job: Job) -> None:
        del self.waiting[job.job_id]
        del self.waiting_by_env[job.environment][job.job_id]

    def waits_in(self, environments: Iterable[str | None]) -> bool:
        """Whether a job of one of these environments waits (None: the jobs of no environment)."""
        return any(self.waiting_by_env.get(environment) for environment in environments)

    def waiting_in(self, environment: str | None) -> list[Job]:
        return list(self.waiting_by_env.get(environment, {}).values())

    def scheduled_with_cluster(self, key: tuple[tuple[str, str], ...]) -> list[int]:
        """The ids of the jobs still waiting for an agent whose cluster profile is `key` (sorted items)."""
        return [
            job.job_id
            for job in self.jobs.values()
            if job.state is JobState.SCHEDULED
            and tuple(sorted(job.cluster_profile_properties.items())) == key
        ]

    def latest_run(self, key: ConsoleKey) -> Job | None:
        """The latest run of the job named by (pipeline, pipeline counter, stage, stage counter, job)."""
        return self.jobs.get(self._by_identifier.get(key, -1))

    # ---- queries for tests and benchmarks --------------------------------------------------------

    def job(self, job_id: int) -> Job:
        with self._lock:
            return self.jobs[job_id]

    def all(self) -> list[Job]:
        with self._lock:
            return list(self.jobs.values())

    def wait_times(self) -> dict[int, float]:
        """Seconds from scheduling to assignment, for every assigned job."""
        with self._lock:
            return {j.job_id: j.wait_s for j in self.jobs.values() if j.wait_s is not None}
