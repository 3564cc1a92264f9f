"""Traces whose waits are known: a trace's jobs replayed in the simulator with a chosen pod start-up and
policy, each job given the wait it had there as its `waited`, as `trace` would have measured it on an
installation whose pods start that way (the advisor's calibration is tested on them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceJob


def recorded(jobs: Sequence[TraceJob], policy: Policy, settings: SimSettings) -> list[TraceJob]:
    """`jobs` with the waits they had under `policy` and `settings` (GoCD numbers the jobs in the order
    the trace schedules them, so the n-th job GoCD knows is the trace's n-th)."""
    simulation = Simulation(jobs, policy, settings)
    simulation.run()
    known = sorted(simulation.model.jobs(), key=lambda job: job.job_id)
    assert len(known) == len(jobs)
    waited = []
    for job, ran in zip(jobs, known, strict=True):
        assert (ran.pipeline, ran.job_name) == (job.pipeline, job.job_name)
        assert ran.wait_s is not None
        waited.append(dataclasses.replace(job, waited=round(ran.wait_s, 3)))
    return waited
