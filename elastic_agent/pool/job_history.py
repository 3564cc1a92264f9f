"""The jobs a pod has run, newest last, kept on the pod (annotation `reuse.gocd.org/recent-jobs`).

A reused pod runs many jobs; the count (`jobs-run`) and the last one (`last-job`) say how many and which
came last, not which. The agent status report lists them, and finds the pod of an earlier job from that
job's page. The list is bounded (`RECENT_JOBS`): annotations of one object share 256 KiB, and a pod may
run thousands of jobs. Each entry is the job's id and its name as GoCD writes a run
(pipeline/counter/stage/counter/job); nothing else, so nothing of a profile goes into it.
"""

from __future__ import annotations

import json

from elastic_agent.gocd.messages import JobIdentifier

RECENT_JOBS = 20


def recent_jobs(annotation: str | None) -> list[tuple[int, str]]:
    """The (job id, job name) pairs of the annotation, oldest first; malformed entries are skipped."""
    try:
        entries = json.loads(annotation) if annotation else []
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [
        (entry[0], entry[1])
        for entry in entries
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
        and not isinstance(entry[0], bool) and isinstance(entry[1], str)
    ]  # fmt: skip


def with_job(annotation: str | None, job: JobIdentifier) -> str:
    """The annotation with `job` appended (once), keeping the newest RECENT_JOBS."""
    entries = [entry for entry in recent_jobs(annotation) if entry[0] != job.job_id]
    entries.append((job.job_id, job.label))
    return json.dumps([list(entry) for entry in entries[-RECENT_JOBS:]], separators=(",", ":"))
