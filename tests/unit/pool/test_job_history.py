"""The jobs a pod ran, kept on the pod (pool/job_history.py): newest last, each once, at most
RECENT_JOBS, and an annotation edited into nonsense reads as no jobs rather than as an error."""

from __future__ import annotations

import json

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool.job_history import RECENT_JOBS, recent_jobs, with_job


def job(job_id: int) -> JobIdentifier:
    return JobIdentifier("app", "", job_id, "build", "1", f"job{job_id}", job_id)


def test_jobs_are_kept_newest_last_each_once_and_at_most_recent_jobs() -> None:
    annotation = None
    for job_id in range(1, RECENT_JOBS + 6):
        annotation = with_job(annotation, job(job_id))
    annotation = with_job(annotation, job(RECENT_JOBS + 5))  # a repeated completion changes nothing
    kept = recent_jobs(annotation)
    assert [job_id for job_id, _ in kept] == list(range(6, RECENT_JOBS + 6))
    assert kept[-1] == (RECENT_JOBS + 5, f"app/{RECENT_JOBS + 5}/build/1/job{RECENT_JOBS + 5}")
    assert annotation is not None and len(annotation) < 2000, "small beside the 256 KiB of annotations"


def test_an_annotation_that_does_not_read_is_no_jobs() -> None:
    for broken in ("", "not json", '{"a": 1}', json.dumps([[True, "x"], ["1", "y"], [2], [3, "ok"]])):
        assert recent_jobs(broken) == ([(3, "ok")] if "ok" in broken else [])
    assert recent_jobs(with_job("not json", job(7))) == [(7, "app/7/build/1/job7")]
