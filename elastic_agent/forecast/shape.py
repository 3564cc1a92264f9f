"""The learned shape of pipelines: per (pipeline, stage), which stage follows it in the same pipeline run,
how many jobs of which fingerprint that stage schedules, and how long after this stage it comes.

GoCD schedules a stage a few seconds after the previous one passed, so the best clock for the next stage
is the current stage's last job-completion; before every job of the stage has completed, only its start
is known, so both delays are learned and the completion's is used once it can be. A stage's length
varies from run to run, so a prediction from the start is to be ready SPREAD_K typical deviations of
that delay early: a stage that ends sooner than usual then still finds its successor's pods booted
(the completion's delay is GoCD's few seconds, too steady to need a margin). GoCD's requests say
nothing of a job's result: a failed stage shows as a successor that never came. Each successor keeps how
often it came true against how many runs of its stage were judged (followed, or left without a successor
past the expected time), so that an edge seen once, or rarely true, does not start pods.

Downstream pipelines: GoCD schedules a pipeline whose dependency material is another pipeline's stage
once that stage passed (gocd/gocd server/src/main/java/com/thoughtworks/go/server/materials/
DependencyMaterialUpdateNotifier.stageStatusChanged updates the dependency material when the stage's
result is Passed; PipelineScheduler then posts a ScheduleCheckMessage and the build cause producer
(scheduling/BuildCauseProducerService) schedules the downstream pipeline). So a pipeline run whose first
stage begins within DOWNSTREAM_S of another pipeline's stage run completing its last job is learned as
an edge (P, S) -> (Q, first stage), with the same came-true counting: a pipeline that merely starts
near another's end now and then does not fire.

Pure: times come in as arguments, nothing is read from a clock, nothing is called.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_agent.gocd.messages import JobIdentifier

MIN_CAME_TRUE = 2  # an edge fires only once it came true this often
MIN_RATE = 0.5  # and in at least this share of the judged runs of its stage
LATE_S = 120.0  # a successor not scheduled this long after its expected time did not come
FORGET_S = 6 * 3600.0  # a run with no learned successor is forgotten this long after it started
MAX_RUNS = 4096  # open stage runs tracked at most (the oldest go first)
MAX_DOWNSTREAM = 16  # downstream edges kept per stage (the least often true go first)
DOWNSTREAM_S = 30.0  # a pipeline's first stage this soon after another's stage completed may follow it
WEIGHT = 0.3  # each new delay's share of the running estimate (recent runs count most)
SPREAD_K = 2.0  # pods are to be ready this many typical deviations before the expected start

StageKey = tuple[str, str]  # (pipeline, stage)
RunKey = tuple[str, int, str, str]  # (pipeline, pipeline counter, stage, stage counter)


@dataclass
class Edge:
    """One learned successor of a stage."""

    next_stage: str
    came_true: int = 0
    after_start_s: float = 0.0  # from this stage's first job to the next stage's first job
    after_done_s: float | None = None  # from this stage's last job-completion to the next stage's start
    pipeline: str | None = None  # a downstream pipeline whose first stage is next_stage (None: this one)
    spread_s: float = 0.0  # the typical deviation of after_start_s (a running mean absolute deviation)

    def target(self, pipeline: str) -> StageKey:
        """The (pipeline, stage) that follows, for an edge of a stage of `pipeline`."""
        return (self.pipeline or pipeline, self.next_stage)

    def learn(self, after_start_s: float, after_done_s: float | None) -> None:
        first = self.came_true == 0
        self.came_true += 1
        if not first:
            self.spread_s = _blend(self.spread_s, abs(after_start_s - self.after_start_s))
        self.after_start_s = after_start_s if first else _blend(self.after_start_s, after_start_s)
        if after_done_s is not None:
            old = self.after_done_s
            self.after_done_s = after_done_s if old is None else _blend(old, after_done_s)


@dataclass
class Stage:
    """What is known of one (pipeline, stage): its fan-out in its last run and its successors."""

    fanout: dict[str, int] = field(default_factory=dict)  # fingerprint -> jobs
    environments: dict[str, str | None] = field(default_factory=dict)  # fingerprint -> its environment
    judged: int = 0
    edges: dict[str, Edge] = field(default_factory=dict)
    began: int = 0  # runs of this stage that began their pipeline run (it is a first stage)

    def best(self, stages: Mapping[StageKey, Stage], pipeline: str) -> Edge | None:
        """The successor that may fire: the most often true, if often enough. A downstream edge must
        also explain most of its target's runs: a busy pipeline starts within seconds of many others'
        ends by chance, but a pipeline that a material triggers follows its upstream almost every time."""
        # The most often true plausible edge either clears both thresholds or none does, so only the
        # edges that clear them are tested for plausibility: a busy stage has many coincidental ones.
        floor = max(MIN_CAME_TRUE, MIN_RATE * self.judged)
        plausible = [
            e
            for e in self.edges.values()
            if e.came_true >= floor and (e.pipeline is None or _explains(e, stages, pipeline))
        ]
        return max(plausible, key=lambda e: e.came_true, default=None)

    def bound_downstream(self, newest: str | None = None) -> None:
        """Keep at most MAX_DOWNSTREAM downstream edges, dropping the least often true (the oldest of
        those first, never `newest`). In a busy installation every pipeline starts near the end of
        every other now and then, so without a bound the coincidences grow with the square of the
        pipelines, in memory and in the ConfigMap (which Kubernetes limits to 1 MiB). A pipeline that
        a material really triggers comes true at nearly every run and climbs above them."""
        downstream = [name for name, edge in self.edges.items() if edge.pipeline is not None]
        excess = len(downstream) - MAX_DOWNSTREAM
        if excess <= 0:
            return
        candidates = [name for name in downstream if name != newest]
        for name in sorted(candidates, key=lambda n: self.edges[n].came_true)[:excess]:
            del self.edges[name]


def _explains(edge: Edge, stages: Mapping[StageKey, Stage], pipeline: str) -> bool:
    target = stages.get(edge.target(pipeline))
    return target is not None and edge.came_true >= MIN_RATE * target.began


@dataclass
class Run:
    """A stage run in progress (or recently done), from its jobs' requests."""

    started: float
    jobs: dict[int, str] = field(default_factory=dict)  # job id -> fingerprint
    done: set[int] = field(default_factory=set)
    last_done: float | None = None
    followed: bool = False  # a downstream pipeline followed it: nothing is predicted from it any more

    @property
    def complete(self) -> bool:
        return bool(self.jobs) and len(self.done) >= len(self.jobs)

    def running(self) -> dict[str, int]:
        """Jobs not completed yet, per fingerprint: their pods will be free for the next stage."""
        counts: dict[str, int] = {}
        for job_id, fingerprint in self.jobs.items():
            if job_id not in self.done:
                counts[fingerprint] = counts.get(fingerprint, 0) + 1
        return counts


@dataclass(frozen=True)
class Prediction:
    pipeline: str
    stage: str  # the stage running now
    next_stage: str
    next_pipeline: str  # the pipeline of next_stage: this one, or a downstream pipeline
    at: float  # when the next stage's jobs are expected
    ready_by: float  # when its pods are to be ready: `at`, less the margin of a stage's varying length
    fanout: dict[str, int]  # fingerprint -> jobs the next stage schedules
    freeing: dict[str, int]  # fingerprint -> this stage's jobs still running (their pods come free)
    run: RunKey


@dataclass
class Shape:
    stages: dict[StageKey, Stage] = field(default_factory=dict)
    runs: OrderedDict[RunKey, Run] = field(default_factory=OrderedDict)
    _latest: dict[tuple[str, int], RunKey] = field(default_factory=dict)  # pipeline run -> its last stage
    revision: int = 0  # counts the changes of what is kept (stages), so a writer knows when to save
    _touched: int = 0  # counts every change of runs or stages (what next_due's times depend on)
    _due: list[float] = field(default_factory=list)
    _due_for: tuple[int, float] | None = None

    def scheduled(self, job: JobIdentifier, fingerprint: str, environment: str | None, now: float) -> bool:
        """A job's create-agent (GoCD re-sends it: only the first counts). True when it began a stage
        run that followed another stage of its pipeline run (an edge was learned or confirmed)."""
        key = _run_key(job)
        run = self.runs.get(key)
        learned = False
        if run is None:
            run = self.runs[key] = Run(now)
            first = (key[0], key[1]) not in self._latest
            learned = self._follows(key, now)
            stage_seen = self.stages.setdefault((key[0], key[2]), Stage())
            if first:
                stage_seen.began += 1
                learned = self._downstream(key, now) or learned
            stage_seen.fanout = {}
            while len(self.runs) > MAX_RUNS:
                self.runs.popitem(last=False)
        if job.job_id in run.jobs:
            return learned
        run.jobs[job.job_id] = fingerprint
        self.revision += 1
        self._touched += 1
        stage = self.stages[(key[0], key[2])]
        stage.fanout[fingerprint] = stage.fanout.get(fingerprint, 0) + 1
        stage.environments[fingerprint] = environment
        return learned

    def _follows(self, key: RunKey, now: float) -> bool:
        pipeline_run = (key[0], key[1])
        previous_key = self._latest.get(pipeline_run)
        self._latest[pipeline_run] = key
        previous = self.runs.get(previous_key) if previous_key is not None else None
        if previous_key is None or previous is None or previous_key[2] == key[2]:
            return False  # the pipeline's first stage, or a stage re-run
        stage = self.stages.setdefault((key[0], previous_key[2]), Stage())
        edge = stage.edges.setdefault(key[2], Edge(key[2]))
        after_done = (
            now - previous.last_done if previous.complete and previous.last_done is not None else None
        )
        edge.learn(now - previous.started, after_done)
        stage.judged += 1
        del self.runs[previous_key]
        return True

    def _downstream(self, key: RunKey, now: float) -> bool:
        """A pipeline run's first stage began: every other pipeline's stage run that completed its last
        job within DOWNSTREAM_S may have triggered it (counting sorts out the coincidences)."""
        learned = False
        for other_key, other in self.runs.items():
            if other_key[0] == key[0] or other.followed or not other.complete or other.last_done is None:
                continue
            if not 0.0 <= now - other.last_done <= DOWNSTREAM_S:
                continue
            stage = self.stages.setdefault((other_key[0], other_key[2]), Stage())
            name = f"{key[0]}/{key[2]}"
            edge = stage.edges.get(name)
            if edge is None:
                edge = stage.edges[name] = Edge(key[2], pipeline=key[0])
                stage.bound_downstream(newest=name)
            edge.learn(now - other.started, now - other.last_done)
            other.followed = True  # judged once, when it is over (or followed in its own pipeline)
            learned = True
        return learned

    def completed(self, job: JobIdentifier, now: float) -> bool:
        """A job-completion. True when it was the last job of a run whose successor may fire: the moment
        the next stage's expected time is surest."""
        key = _run_key(job)
        run = self.runs.get(key)
        if run is None or job.job_id not in run.jobs or job.job_id in run.done:
            return False
        run.done.add(job.job_id)
        run.last_done = now
        self._touched += 1
        return run.complete and self.expected(key, run) is not None

    def expected(
        self, key: RunKey, run: Run, best: dict[StageKey, Edge | None] | None = None
    ) -> tuple[Edge, float, float] | None:
        """The successor a run's stage predicts, when it is expected and when its pods are to be ready,
        if it may fire. `best` keeps each stage's best edge while the stages do not change (one
        stage has many open runs)."""
        if run.followed:
            return None
        stage_key = (key[0], key[2])
        if best is not None and stage_key in best:
            edge = best[stage_key]
        else:
            stage = self.stages.get(stage_key)
            edge = stage.best(self.stages, key[0]) if stage is not None else None
            if best is not None:
                best[stage_key] = edge
        if edge is None:
            return None
        if run.complete and run.last_done is not None and edge.after_done_s is not None:
            at = run.last_done + edge.after_done_s
            return edge, at, at
        at = run.started + edge.after_start_s
        return edge, at, max(run.started, at - SPREAD_K * edge.spread_s)

    def predictions(self, now: float) -> list[Prediction]:
        """What the open runs predict, soonest first; runs whose successor did not come are judged (a
        miss) and forgotten on the way, and so are finished runs no learned successor can follow (kept
        only long enough for a new successor to be learned)."""
        found: list[Prediction] = []
        for key, run in list(self.runs.items()):
            expected = self.expected(key, run)
            if expected is None:
                if self._over(key, run, now):
                    self._judge_miss(key)
                continue
            edge, at, ready_by = expected
            if now > at + LATE_S:
                self._judge_miss(key)
                continue
            target = edge.target(key[0])
            following = self.stages.get(target)
            if following is None or not following.fanout:
                continue
            found.append(Prediction(key[0], key[2], edge.next_stage, target[0], at, ready_by,
                                    dict(following.fanout), run.running(), key))  # fmt: skip
        found.sort(key=lambda p: p.at)
        return found

    def touch(self) -> None:
        """Stages changed from outside (merged from a ConfigMap): the due times are computed again."""
        self._touched += 1

    def _over(self, key: RunKey, run: Run, now: float) -> bool:
        """A run without a successor that may fire is over once it finished and the latest successor it
        has been seen with (or GoCD's usual few seconds) plus LATE_S have passed."""
        if now - run.started > FORGET_S:
            return True
        if not run.complete or run.last_done is None:
            return False
        stage = self.stages.get((key[0], key[2]))
        waits = [e.after_done_s or 0.0 for e in stage.edges.values()] if stage is not None else []
        return now > run.last_done + max(waits, default=0.0) + LATE_S

    def _judge_miss(self, key: RunKey) -> None:
        self.runs.pop(key, None)
        self._touched += 1
        stage = self.stages.get((key[0], key[2]))
        if stage is not None and stage.edges:
            stage.judged += 1
            self.revision += 1

    def next_due(self, now: float, lead_s: float) -> float | None:
        """The earliest time after `now` a prediction enters its lead window or must be judged (clock
        seconds). The simulator's loop asks at every event: the times are computed again only after a
        change of the runs or stages."""
        if self._due_for != (self._touched, lead_s):
            times: list[float] = []
            best: dict[StageKey, Edge | None] = {}
            for key, run in self.runs.items():
                expected = self.expected(key, run, best)
                if expected is not None:
                    times += [expected[2] - lead_s, expected[1] + LATE_S]
            self._due, self._due_for = sorted(times), (self._touched, lead_s)
        index = bisect.bisect_right(self._due, now)
        return self._due[index] if index < len(self._due) else None


def _run_key(job: JobIdentifier) -> RunKey:
    return (job.pipeline_name, job.pipeline_counter, job.stage_name, job.stage_counter)


def _blend(old: float, new: float) -> float:
    return old + WEIGHT * (new - old)
