"""What a read of GoCD's history means for `trace`'s exit status, and the sentence that says so.

A nightly job sees only the exit status, so a read that produced a trace nobody should use must not end
with 0: one whose trace holds no run at all (a token that sees no pipeline, no elastic job, or whose
runs were all left out), and one that left out most runs because their environment could not be told.
Each sentence says what the token could see and what to check or pass; the read itself
(`gocd/history.py`) only counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from elastic_agent.gocd.history import History
from elastic_agent.gocd.history_runs import NO_ENVIRONMENT

NO_RUN = 1  # the exit status of a trace that holds no run, or lacks most of them
ASSUME_NO_ENVIRONMENT = "--assume-no-environment"


@dataclass(frozen=True)
class Verdict:
    status: int
    sentence: str


def judge(history: History, rows: int, since: datetime) -> Verdict | None:
    """Why this read must not exit 0 (None: it may). `rows` is what the trace holds after it."""
    left = history.left_out[NO_ENVIRONMENT]
    kept = len(history.runs) + history.known
    if left and left > kept:
        return Verdict(NO_RUN, _environments(history, left, kept, since))
    if rows == 0:
        return Verdict(NO_RUN, _nothing(history, since))
    return None


def _environments(history: History, left: int, kept: int, since: datetime) -> str:
    names = _names(history.unseen)
    head = (
        f"{left} of the {left + kept} job runs since {_shown(since)} were left out: their pipelines "
        f"({names}) are in no environment the token was shown, and a job's environment decides which pods "
        "may run it."
    )
    again = f"{ASSUME_NO_ENVIRONMENT} --since {_iso(since)}"
    if history.admin is None:
        return (
            f"{head} GoCD did not say whether the token's user is a system administrator "
            f"({history.admin_unknown}). If it is, GoCD listed every environment, so these pipelines are in "
            f"none: run this again with {again} to keep their runs. If it is not, give an administrator's "
            "token."
        )
    return (
        f"{head} The token's user is not a system administrator, so they may be in an environment it may "
        f"not view: give an administrator's token, or, if they are in none, run this again with {again}."
    )


def _nothing(history: History, since: datetime) -> str:
    """What the token saw, when the trace holds no run."""
    who = {
        True: "a system administrator's, who sees every pipeline",
        False: "not a system administrator's: GoCD shows it only the pipeline groups it may view",
        None: f"perhaps not an administrator's ({history.admin_unknown})",
    }[history.admin]
    empty = "No trace was written: it would hold no job run."
    if history.pipelines == 0:
        return (
            f"{empty} GoCD showed the token no pipeline at all; the token is {who}. Check that its user "
            "may view the pipeline groups to trace (a group administrator sees only its own groups, and "
            "none whose group is restricted to others), or give a system administrator's token."
        )
    elastic = [job for job in history.jobs if job.profile is not None]
    if not elastic:
        return (
            f"{empty} GoCD showed the token {_count(history.pipelines, 'pipeline')}, with no job on an "
            f"elastic agent profile among those whose config it may read ({len(history.jobs)} jobs on "
            "static agents); the token is "
            f"{who}. Check that --server is the GoCD whose jobs use elastic profiles, and that the token "
            "may read those pipelines' configs (their group's administrators may)."
        )
    pipelines = len({job.pipeline for job in elastic})
    return (
        f"{empty} GoCD showed the token {_count(pipelines, 'pipeline')} with jobs on elastic profiles, "
        f"and none of their runs since {_shown(since)} could be kept (the lines above say what was left "
        "out and why). Check --since, which reaches back that far, and the warnings above."
    )


def kept(rows: int, new: int, output: str, state: str) -> str:
    """What a read that failed part-way left, and how to go on."""
    return (
        f"Kept what was read before it: {output} holds {_count(rows, 'job run')} ({new} new), and "
        f"{state} says where to go on. Run the same command again: it reads only what is missing."
    )


def _names(names: list[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _shown(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
