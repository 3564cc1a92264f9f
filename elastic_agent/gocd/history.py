"""Job runs from GoCD's REST API, for a simulator trace (`service/trace_command.py`): for each run of a job
on an elastic agent since a time, when it was scheduled, how long it waited for an agent and how long it
held one.

In four steps, each with its calls in parallel (at most `concurrency` at a time, so that the server
is not hurt): who the token is and the environments; every pipeline's config (which jobs run on which
elastic profile); the history of every stage that has such a job, newest first, down to the time asked
for; and one stage instance per stage run with an elastic job to read, which carries every job's times.
`history_calls.py` says what each call answers and why these are the calls; `history_runs.py` what a
job of a stage run becomes.

A run already in the trace (`known`) is not read again: a stage run whose elastic jobs are all known
costs no call, so running `trace` again on its own output reads only what is new. `resume_ms` is where
the next read should start: the earliest run still going, else the time this read began. The stage
instances are most of the calls and of the time: when one of them fails for good, the runs of those
already read are kept and the failure returned with them (`History.failure`), and the next read starts
where this one did, so that it reads only what this one could not.

What the token cannot see is said, never filled in: GoCD shows a user who is not a system
administrator only the pipeline groups it may view and the environments it may view, and a pipeline's
config only to its group's administrators. Pipelines whose config is refused are left out and named;
pipelines in no environment the token can see may be in one it cannot, so their runs are left out
unless the caller says they are in none (`assume_no_environment`): a blank environment never stands
for one the token was not shown. Their stage histories are still read (no stage instance), to count the
runs so left out: whether that is most of the runs decides what the command makes of the read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from elastic_agent.gocd.history_calls import Calls, Forbidden, Missing, StageRun
from elastic_agent.gocd.history_runs import (
    NO_ENVIRONMENT,
    NOT_FINISHED,
    UNKNOWN_JOB,
    JobConfig,
    JobRun,
    RunKey,
    find_config,
    stage_job_run,
)
from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient

DEFAULT_CONCURRENCY = 4
# Stage history is read this far past the time asked for: a stage created before it may hold a job
# rescheduled after it (ids follow creation, scheduled times do not).
LOOKBACK_MS = 6 * 3600 * 1000
_FINISHED_STATES = ("Completed", "Rescheduled")
T = TypeVar("T")
R = TypeVar("R")


class Bar(Protocol):
    def update(self, n: float = 1) -> object: ...

    def close(self) -> None: ...


BarFactory = Callable[[int, str], Bar]  # (total, what is counted) -> a progress bar


class _NoBar:
    def update(self, n: float = 1) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class History:
    jobs: list[JobConfig] = field(default_factory=list)  # every job of every pipeline read
    runs: list[JobRun] = field(default_factory=list)  # new runs, sorted by scheduled time
    left_out: Counter[str] = field(default_factory=Counter)  # runs left out, by reason
    known: int = 0  # runs read again that the trace already had
    stage_runs: int = 0  # stage instances read
    history_pages: int = 0
    warnings: list[str] = field(default_factory=list)  # what the token could not see, and what it means
    resume_ms: int = 0  # where the next read should start
    pipelines: int = 0  # pipelines the token was shown
    admin: bool | None = None  # the token's user is a system administrator (None: GoCD did not say)
    admin_unknown: str = ""  # why GoCD did not say
    unseen: list[str] = field(default_factory=list)  # pipelines with elastic jobs in no environment seen
    failure: GoCDApiError | None = None  # the read stopped at this; `runs` holds what was read before

    @property
    def static_jobs(self) -> list[JobConfig]:
        return [job for job in self.jobs if job.profile is None]


@dataclass(frozen=True)
class Window:
    since_ms: int  # runs scheduled from here on
    now_ms: int  # when the read began
    known: frozenset[RunKey] = frozenset()


def read_history(
    client: GoCDRestClient,
    window: Window,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    assume_no_environment: bool = False,
    say: Callable[[str], None] = lambda _: None,
    bar: BarFactory = lambda _total, _what: _NoBar(),
) -> History:
    """Every run in `window` of every job on an elastic profile that the token can see; GoCDApiError
    (a sentence naming the call) on the first refusal that every further call would share."""
    calls = Calls(client)
    history = History(resume_ms=window.now_ms)
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="trace") as pool:
        history.admin = admin = calls.is_admin()
        history.admin_unknown = calls.admin_unknown
        environments = calls.environments()
        pipelines = calls.pipeline_names()
        history.pipelines = len(pipelines)
        say(
            f"GoCD at {client.shown_url}: {len(pipelines)} pipelines the token can see; reading their configs"
        )
        configs = _configs(calls, pipelines, environments, admin, assume_no_environment, pool, bar, history)
        stages = _elastic_stages(configs)
        unseen = _elastic_stages(configs, environment_known=False)
        say(
            f"{sum(map(len, stages.values()))} jobs in {len(stages)} stages with elastic jobs; reading "
            "their history"
        )
        stage_runs = _stage_runs(calls, {**stages, **unseen}, window, pool, bar, history)
        _count_unseen(
            [run for run in stage_runs if (run.pipeline, run.stage) in unseen], unseen, window, history
        )
        stage_runs = [run for run in stage_runs if (run.pipeline, run.stage) in stages]
        to_read = [run for run in stage_runs if _worth_reading(run, stages[run.pipeline, run.stage], window)]
        _note_unfinished(stage_runs, stages, window, history)
        say(f"{len(to_read)} stage runs to read ({history.history_pages} pages of stage history read)")
        read, history.failure = _parallel_until_failure(
            pool, to_read, calls.stage_instance, bar(len(to_read), "stage runs")
        )
    history.stage_runs = len(read)
    if history.failure is not None:
        history.resume_ms = window.since_ms  # the stage runs not read are read next time
    for run, jobs in read:
        _take(run, jobs, stages[run.pipeline, run.stage], window, history)
    history.runs.sort(key=lambda run: (run.scheduled_ms, run.pipeline, run.stage, run.job))
    return history


def _configs(
    calls: Calls,
    pipelines: Sequence[str],
    environments: Mapping[str, str],
    admin: bool | None,
    assume_no_environment: bool,
    pool: ThreadPoolExecutor,
    bar: BarFactory,
    history: History,
) -> list[JobConfig]:
    """Every job of every pipeline whose config the token may read; what it may not, said."""

    def environment(pipeline: str) -> str | None:
        seen = environments.get(pipeline.lower())
        if seen is not None:
            return seen
        return "" if admin or assume_no_environment else None

    def read(pipeline: str) -> list[JobConfig] | str:
        try:
            return calls.jobs(pipeline, environment(pipeline))
        except Forbidden:
            return "forbidden"
        except Missing:
            return "missing"

    outcomes = _parallel(pool, pipelines, read, bar(len(pipelines), "pipeline configs"))
    jobs = [job for outcome in outcomes if not isinstance(outcome, str) for job in outcome]
    history.jobs = jobs
    forbidden = [name for name, outcome in zip(pipelines, outcomes, strict=True) if outcome == "forbidden"]
    gone = [name for name, outcome in zip(pipelines, outcomes, strict=True) if outcome == "missing"]
    if admin is False:
        history.warnings.append(
            f"The token's user is not a GoCD system administrator: GoCD showed it only the pipeline groups "
            f"it may view ({len(pipelines)} pipelines) and the environments it may view; runs of pipelines "
            "in other groups are not in this trace. An administrator's token traces everything."
        )
    elif admin is None:
        history.warnings.append(
            f"GoCD did not say whether the token's user is a system administrator ({history.admin_unknown}): "
            "if it is not, pipelines and environments it may not view are missing from this trace unnoticed."
        )
    if forbidden:
        history.warnings.append(
            f"Left out {_count(len(forbidden), 'pipeline')} whose config the token may not read (only "
            f"its group's administrators may, and the config says which job runs on which elastic "
            f"profile): {_names(forbidden)}."
        )
    if gone:
        history.warnings.append(
            f"Left out {_count(len(gone), 'pipeline')} deleted while read: {_names(gone)}."
        )
    unseen = sorted({job.pipeline for job in jobs if job.environment is None and job.profile is not None})
    history.unseen = unseen
    if unseen:
        left = (
            f"Left out the runs of {_count(len(unseen), 'pipeline')} in no environment the token may view "
            f"({_names(unseen)}): GoCD lists to a user who is not an administrator only the environments "
            "it may view, so they may be in one it cannot see, and the environment decides which pods a job "
            "may use."
        )
        if admin is None:
            history.warnings.append(
                f"{left} Whether the token is an administrator's could not be told: if it is, GoCD listed "
                "every environment and they are in none, so pass --assume-no-environment to keep their "
                "runs; if it is not, give an administrator's token."
            )
        else:
            history.warnings.append(
                f"{left} Give an administrator's token, or --assume-no-environment if they are in none."
            )
    return jobs


def _elastic_stages(
    jobs: Iterable[JobConfig], *, environment_known: bool = True
) -> dict[tuple[str, str], dict[str, JobConfig]]:
    """(pipeline, stage) -> its jobs by lower-cased name, for stages with a job to trace (or, with
    `environment_known` False, with an elastic job whose environment the token was not shown)."""
    stages: dict[tuple[str, str], dict[str, JobConfig]] = {}
    for job in jobs:
        if job.profile is not None and (job.environment is not None) == environment_known:
            stages.setdefault((job.pipeline, job.stage), {})
    for job in jobs:
        if (job.pipeline, job.stage) in stages:
            stages[job.pipeline, job.stage][job.job.lower()] = job
    return stages


def _stage_runs(
    calls: Calls,
    stages: Mapping[tuple[str, str], Mapping[str, JobConfig]],
    window: Window,
    pool: ThreadPoolExecutor,
    bar: BarFactory,
    history: History,
) -> list[StageRun]:
    oldest = window.since_ms - LOOKBACK_MS

    def too_old(run: StageRun) -> bool:
        newest = run.newest_ms
        return newest is not None and newest < oldest

    def read(stage: tuple[str, str]) -> tuple[list[StageRun], int]:
        return calls.stage_history(stage[0], stage[1], too_old)

    keys = list(stages)
    found = _parallel(pool, keys, read, bar(len(keys), "stage histories"))
    history.history_pages = sum(pages for _, pages in found)
    return [run for runs, _ in found for run in runs]


def _worth_reading(run: StageRun, jobs: Mapping[str, JobConfig], window: Window) -> bool:
    """A finished elastic job in the window that the trace does not have yet."""
    for job in run.jobs:
        config = find_config(job.name, jobs)
        if config is None or config.profile is None or job.state != "Completed":
            continue
        if job.scheduled_ms is None or job.scheduled_ms < window.since_ms:
            continue
        if _key(run, job.name) not in window.known:
            return True
    return False


def _count_unseen(
    runs: Iterable[StageRun],
    stages: Mapping[tuple[str, str], Mapping[str, JobConfig]],
    window: Window,
    history: History,
) -> None:
    """The finished elastic runs in the window of pipelines in no environment the token was shown: left
    out, and counted from the stage history alone (no stage instance is read for them)."""
    for run in runs:
        for job in run.jobs:
            config = find_config(job.name, stages[run.pipeline, run.stage])
            if config is None or config.profile is None or job.state != "Completed":
                continue
            in_window = job.scheduled_ms is not None and job.scheduled_ms >= window.since_ms
            if in_window and _key(run, job.name) not in window.known:
                history.left_out[NO_ENVIRONMENT] += 1


def _note_unfinished(
    runs: Iterable[StageRun],
    stages: Mapping[tuple[str, str], Mapping[str, JobConfig]],
    window: Window,
    history: History,
) -> None:
    """Runs still going are left out and counted, and the next read starts at the earliest of them."""
    for run in runs:
        for job in run.jobs:
            config = find_config(job.name, stages[run.pipeline, run.stage])
            if config is None or config.profile is None or job.state in _FINISHED_STATES:
                continue
            if job.scheduled_ms is None or job.scheduled_ms < window.since_ms:
                continue
            history.left_out[NOT_FINISHED] += 1
            history.resume_ms = min(history.resume_ms, job.scheduled_ms)


def _take(
    run: StageRun,
    items: Sequence[Mapping[str, Any]],
    jobs: Mapping[str, JobConfig],
    window: Window,
    history: History,
) -> None:
    """The runs of one stage instance, each new one in the window kept, each other one counted."""
    for item in items:
        name = item.get("name")
        config = find_config(name, jobs) if isinstance(name, str) else None
        if config is None:
            history.left_out[UNKNOWN_JOB] += 1
            continue
        if config.profile is None:
            continue  # a static agent's job: not traced
        outcome = stage_job_run(item, config, run.pipeline_counter, run.stage_counter)
        if isinstance(outcome, str):
            if outcome != NOT_FINISHED:  # those were counted from the stage history
                history.left_out[outcome] += 1
        elif outcome.scheduled_ms < window.since_ms:
            continue
        elif outcome.key in window.known:
            history.known += 1
        else:
            history.runs.append(outcome)


def _key(run: StageRun, job: str) -> RunKey:
    return RunKey(run.pipeline, run.pipeline_counter, run.stage, run.stage_counter, job)


def _parallel(pool: ThreadPoolExecutor, items: Sequence[T], work: Callable[[T], R], bar: Bar) -> list[R]:
    """`work` over `items` on the pool, results in the items' order; the first error stops the rest and
    is raised (every further call would most likely fail the same way)."""
    futures = [pool.submit(_counted, work, item, bar) for item in items]
    try:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((future for future in done if future.exception() is not None), None)
        if failed is not None:
            for future in futures:
                future.cancel()
            raise failed.exception()  # type: ignore[misc]
        return [future.result() for future in futures]
    finally:
        bar.close()


def _counted(work: Callable[[T], R], item: T, bar: Bar) -> R:
    """`work(item)`, counted on the bar before its future is done (a done callback may run after the
    waiter has moved on and closed the bar)."""
    try:
        return work(item)
    finally:
        bar.update()


def _parallel_until_failure(
    pool: ThreadPoolExecutor, items: Sequence[T], work: Callable[[T], R], bar: Bar
) -> tuple[list[tuple[T, R]], GoCDApiError | None]:
    """`work` over `items` on the pool, in the items' order, until a call fails: then the rest are not
    started, and what the others finished is kept. The results, and the first failure (None: none)."""
    futures = {pool.submit(_counted, work, item, bar): item for item in items}
    failure: GoCDApiError | None = None
    try:
        for future in as_completed(futures):
            error = future.exception()
            if isinstance(error, GoCDApiError):
                failure = error
                break
            if error is not None:
                raise error
    finally:
        if failure is not None:
            for future in futures:
                future.cancel()
            wait(futures)  # the calls under way finish: their answers are kept too
        bar.close()
    done = [(item, f.result()) for f, item in futures.items() if not f.cancelled() and f.exception() is None]
    return done, failure


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
