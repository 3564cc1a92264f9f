"""A trace's pipeline shape: the job-identifier fields survive a file, bad ones are explained, and the
simulated GoCD schedules each job under its own pipeline run, stage and name."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import TraceError, TraceJob, load_trace, parse_trace, write_trace

SHAPED = [
    TraceJob(0.0, "java", "build", "api", 30.0, 7, "compile", 1, "jar"),
    TraceJob(40.0, "node", "build", "api", 20.0, 7, "test", 1, "unit-1"),
    TraceJob(40.0, "node", "build", "api", 25.0, 7, "test", 1, "unit-2", "Failed"),
]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_pipeline_shape_round_trips_through_files(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"trace{suffix}"
    write_trace(SHAPED, path)
    assert load_trace(path) == SHAPED


def test_a_trace_without_shape_fields_reads_as_one_stage_jobs() -> None:
    (job,) = parse_trace("at,profile,environment,pipeline,duration\n1,java,,p,5\n", csv_format=True)
    assert (job.pipeline_counter, job.stage, job.stage_counter, job.job_name, job.result) == (
        None,
        "build",
        1,
        "job",
        "Passed",
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("pipeline_counter", "0", "pipeline_counter must be 1 or more"),
        ("stage_counter", "two", "stage_counter must be a whole number"),
        ("result", "Cancelled", "result must be Passed or Failed"),
    ],
)
def test_bad_shape_fields_are_explained_with_their_line(field: str, value: str, message: str) -> None:
    line = f'{{"at": 1, "profile": "x", "pipeline": "p", "duration": 5, "{field}": "{value}"}}'
    with pytest.raises(TraceError, match=f"line 1: {message}"):
        parse_trace(line, csv_format=False)


def test_the_simulated_gocd_schedules_each_job_under_its_identifier() -> None:
    simulation = Simulation(SHAPED, Policy("reuse", {"Reuse": "true"}), SimSettings(seed=1))
    result = simulation.run()
    assert result.jobs == 3
    identifiers = sorted(
        (job.pipeline, job.pipeline_counter, job.stage, job.stage_counter, job.job_name, job.result)
        for job in simulation.model.jobs()
    )
    assert identifiers == [
        ("api", 7, "compile", "1", "jar", "Passed"),
        ("api", 7, "test", "1", "unit-1", "Passed"),
        ("api", 7, "test", "1", "unit-2", "Failed"),
    ]
