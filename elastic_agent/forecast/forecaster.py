"""The doing part of prediction: feeds the learned shape from the requests (create-agent, job-completion),
hands the plans of `plan.start_ahead` to the pools, and keeps score of what the pods started ahead did.

Only jobs of profiles with Predict=true are learned from and served. The backend acts at every
server-ping, at job-completion (the last jobs of a stage completing are the best signal) and at the due
time `next_due` gives (the period timer and the simulator's loop ask for it, as for ReuseSchedule
periods), so the lead time is a pod's boot and little more. A pod started ahead is an ordinary idle pod
once booted: it retires by its idle timeout if the prediction does not come true.

Locking: `_lock` guards the shape and the score; it is never held while a pool's lock is taken or a pool
creates pods.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
from dataclasses import dataclass, field

from elastic_agent.clock import Clock
from elastic_agent.forecast.plan import AheadPlan, start_ahead
from elastic_agent.forecast.rows import LearnedEdge, PredictionRow
from elastic_agent.forecast.shape import Edge, Prediction, RunKey, Shape, Stage
from elastic_agent.forecast.store import config_map_name, from_data, merge, to_data
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.kube.port import ClusterError
from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.state import PoolState
from profiles.fingerprint import label_form
from profiles.quantities import format_duration

log = logging.getLogger(__name__)

# A pod's boot (scheduling, image, JVM, registration) is 10 to 30 s; with the due-time timer the next
# chance to act is seconds away, so this much ahead of the expected stage is enough.
LEAD_S = 40.0
GONE_AFTER_S = 300.0  # a pod started ahead and not listed this long after is gone
# While jobs keep teaching it, what was learned is written at most this often (every job teaches
# something, and the whole shape is one ConfigMap: a write a ping would rewrite it every minute of a busy
# day); once a ping finds nothing learned since the one before, at once. A restart loses at most this.
SAVE_EVERY_S = 300.0
OUTCOMES = ("started", "hit", "other_job", "idled_out", "without_key")


@dataclass
class Score:
    """How the predictions of one pipeline fared (the status page's and the metrics' figures)."""

    started: int = 0  # pods started ahead
    hit: int = 0  # of those, assigned a job of the stage they were started for
    other_job: int = 0  # assigned a job of another stage first
    idled_out: int = 0  # gone without running a job
    without_key: int = 0  # pods a prediction wanted but no banked key could start

    def as_dict(self) -> dict[str, int]:
        return {
            "started": self.started,
            "hit": self.hit,
            "other_job": self.other_job,
            "idled_out": self.idled_out,
            "without_key": self.without_key,
        }


@dataclass
class AheadPod:
    cluster: str  # the pool's key (PodIdentity.cluster)
    pipeline: str
    stage: str  # the stage it was started for
    started_at: float
    used: bool = False


@dataclass
class Forecaster:
    clock: Clock
    lead_s: float = LEAD_S
    shape: Shape = field(default_factory=Shape)
    scores: dict[str, Score] = field(default_factory=dict)  # pipeline -> score
    pods: dict[str, AheadPod] = field(default_factory=dict)  # pods started ahead, until they go
    _cluster_of: dict[str, str] = field(default_factory=dict)  # fingerprint -> its pool's key
    _saved: dict[str, int] = field(default_factory=dict)  # pool's key -> the shape's revision it holds
    _saved_at: dict[str, float] = field(default_factory=dict)  # pool's key -> when it was last written
    _asked_at: dict[str, int] = field(default_factory=dict)  # pool's key -> the revision its last save saw
    _loading: set[str] = field(default_factory=set)  # pools whose saved shape was read or is being read
    _problems: dict[str, str] = field(default_factory=dict)  # pool's key -> why its ConfigMap fails
    _lacked: dict[RunKey, int] = field(default_factory=dict)  # per predicting run, most keys it lacked
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- what the requests tell ------------------------------------------------------------------------

    def scheduled(self, job: JobIdentifier, spec: JobSpec, cluster: str) -> bool:
        """create-agent of a job (re-sends count once); `cluster`: its pool's key (PodIdentity.cluster).
        True the first time a pool has a Predict job: what was saved there is to be read (`load`), so
        that a backend without Predict profiles never calls for the ConfigMap."""
        if not spec.predict:
            return False
        with self._lock:
            self.shape.scheduled(job, spec.fingerprint, spec.environment, self.clock.now())
            self._cluster_of[spec.fingerprint] = cluster
            first = cluster not in self._loading
            self._loading.add(cluster)
            return first

    def completed(self, job: JobIdentifier, spec: JobSpec | None) -> bool:
        """A job-completion; True when it ended a stage whose successor is predicted (act now)."""
        if spec is not None and not spec.predict:
            return False
        with self._lock:
            return self.shape.completed(job, self.clock.now())

    def assigned(self, agent_id: str, job: JobIdentifier) -> str | None:
        """should-assign-work said true: the console line when the pod was started ahead for this job's
        stage (None otherwise, and for every later job of the pod)."""
        with self._lock:
            pod = self.pods.get(agent_id)
            if pod is None or pod.used:
                return None
            pod.used = True
            score = self.scores.setdefault(pod.pipeline, Score())
            if (pod.pipeline, pod.stage) != (job.pipeline_name, job.stage_name):
                score.other_job += 1
                return None
            score.hit += 1
        return (
            f"this job runs on pod {agent_id}, started ahead at {_utc(pod.started_at)} for stage "
            f"{pod.stage} of pipeline {pod.pipeline} (Predict: it usually follows the stage before)"
        )

    # -- acting ----------------------------------------------------------------------------------------

    def predictions(self) -> list[Prediction]:
        with self._lock:
            return self.shape.predictions(self.clock.now())

    def act(self, pool: ClusterPool) -> list[str]:
        """Start what the predictions due now want in this pool; also notes predicted pods that went
        without a job. Returns the pods created."""
        self.note_gone(pool)
        predictions = self.predictions()
        now = self.clock.now()
        if not any(p.ready_by - now <= self.lead_s for p in predictions):
            return []  # nothing due: the pool is not even locked
        decided: list[AheadPlan] = []

        def decide(state: PoolState, now: float) -> AheadPlan:
            ahead = start_ahead(state, predictions, now, self.lead_s)
            decided.append(ahead)
            return ahead

        done = pool.carry_out_decision(lambda state, now: decide(state, now).plan)
        if not decided:
            return []
        ahead, now = decided[0], self.clock.now()  # the moment the pods were started
        by_token = {started.token: started for started in ahead.started}
        with self._lock:
            for name, intent in done.made.items():
                started = by_token.get(intent.token)
                if started is None:
                    continue
                prediction = started.prediction
                self.pods[name] = AheadPod(
                    pool.identity.cluster, prediction.next_pipeline, prediction.next_stage, now
                )
                self.scores.setdefault(prediction.next_pipeline, Score()).started += 1
            for run, lacked in ahead.without_key.items():
                more = lacked - self._lacked.get(run, 0)
                if more > 0:
                    self._lacked[run] = lacked
                    self.scores.setdefault(run[0], Score()).without_key += more
            live = {p.run for p in predictions}
            self._lacked = {run: n for run, n in self._lacked.items() if run in live}
        return done.created

    def note_gone(self, pool: ClusterPool) -> None:
        """Pods started ahead that are gone: deleted here, or no longer listed (the pool's view may lag a
        pod just created by a moment, hence the age)."""
        with self._lock:
            if not any(pod.cluster == pool.identity.cluster for pod in self.pods.values()):
                return  # nothing to look for: without Predict the pool is not even asked
        cluster, gone, known = pool.identity.cluster, pool.gone_recently(), pool.known_pod_names()
        now = self.clock.now()
        with self._lock:
            for name, pod in list(self.pods.items()):
                if pod.cluster != cluster:
                    continue
                if name not in gone and (name in known or now - pod.started_at < GONE_AFTER_S):
                    continue
                del self.pods[name]
                if not pod.used:
                    self.scores.setdefault(pod.pipeline, Score()).idled_out += 1

    # -- what survives a restart (store.py) ------------------------------------------------------------

    def load(self, pool: ClusterPool) -> None:
        """What an earlier backend saved in the pool's namespace joins what was learned since."""
        try:
            data = pool.port.read_config_map(config_map_name(pool.identity.server_id))
        except ClusterError as error:
            log.warning("could not read what prediction learned before the restart: %s", error)
            with self._lock:
                self._problems[pool.identity.cluster] = _problem(pool, "read", error)
            return
        learned = from_data(data)
        with self._lock:
            if pool.identity.cluster in self._saved:
                return  # read and merged already (the ping's retry and a request's read may cross)
            merge(self.shape, learned)
            for stage in learned.stages.values():
                for fingerprint in stage.fanout:
                    self._cluster_of.setdefault(fingerprint, pool.identity.cluster)
            self._saved.setdefault(pool.identity.cluster, -1)  # from now on it may be written
            self._problems.pop(pool.identity.cluster, None)

    def save(self, pool: ClusterPool) -> str | None:
        """Write the pool's part of the shape if it changed since the last write: at most every
        SAVE_EVERY_S while it keeps changing, at once when it did not since the last ping (called once a
        ping).
        Returns why the pool's ConfigMap cannot be read or written, while it cannot (a health message)."""
        self._save(pool)
        with self._lock:
            return self._problems.get(pool.identity.cluster)

    def _save(self, pool: ClusterPool) -> None:
        cluster = pool.identity.cluster
        with self._lock:
            unread = cluster in self._loading and cluster not in self._saved
        if unread:
            self.load(pool)  # the read at the first Predict job failed: once a ping, it is tried again
        with self._lock:
            revision = self.shape.revision
            mine = [fp for fp, owner in self._cluster_of.items() if owner == cluster]
            if not mine or cluster not in self._saved or self._saved[cluster] == revision:
                return
            learning = self._asked_at.get(cluster) != revision
            self._asked_at[cluster] = revision
            if learning and self.clock.now() < self._saved_at.get(cluster, -math.inf) + SAVE_EVERY_S:
                return
            data = to_data(self.shape, mine)
        try:
            pool.port.write_config_map(config_map_name(pool.identity.server_id), data)
        except ClusterError as error:
            log.warning("could not save what prediction learned (it is tried at the next ping): %s", error)
            with self._lock:
                self._problems[cluster] = _problem(pool, "write", error)
            return
        with self._lock:
            self._saved[cluster], self._saved_at[cluster] = revision, self.clock.now()
            self._problems.pop(cluster, None)

    def next_due(self) -> float | None:
        with self._lock:
            return self.shape.next_due(self.clock.now(), self.lead_s)

    def quiet_until(self) -> float:
        """When a ping may next do something here unprompted, after one at this time that did nothing:
        a prediction comes within its lead time, a pod started ahead and no longer listed is counted
        gone (`note_gone`), or what was learned is due to be written. A pod older than GONE_AFTER_S
        is counted gone only once it is no longer listed, which a deletion (an event) tells first."""
        now = self.clock.now()
        with self._lock:
            if self._loading - set(self._saved) or self._problems:
                return now  # a read or write that failed is tried again at every ping
            due = self.shape.next_due(now, self.lead_s)
            times = [t for t in (pod.started_at + GONE_AFTER_S for pod in self.pods.values()) if t >= now]
            revision = self.shape.revision
            owners = set(self._cluster_of.values())
            if any(held != revision and cluster in owners for cluster, held in self._saved.items()):
                return now  # the next ping writes it (`_save`)
        return min([*times, math.inf if due is None else due])

    def rows(self) -> list[PredictionRow]:
        """The status report's rows: each pipeline with a learned stage or a score."""
        with self._lock:
            pipelines = sorted({p for p, _ in self.shape.stages} | set(self.scores))
            rows = []
            for pipeline in pipelines:
                edges: list[LearnedEdge] = []
                for (name, stage_name), stage in sorted(self.shape.stages.items()):
                    if name != pipeline:
                        continue
                    best = stage.best(self.shape.stages, pipeline)
                    for edge in sorted(stage.edges.values(), key=lambda e: -e.came_true):
                        following = self.shape.stages.get(edge.target(pipeline))
                        here, there = stage_name, edge.next_stage
                        if edge.pipeline is not None:  # a downstream pipeline: both named
                            here, there = f"{pipeline}/{stage_name}", f"{edge.pipeline}/{edge.next_stage}"
                        edges.append(LearnedEdge(
                            here, there, edge.came_true, stage.judged,
                            _fanout(following) if following else "not known yet", _delay(edge), edge is best,
                        ))  # fmt: skip
                score = self.scores.get(pipeline, Score())
                rows.append(PredictionRow(pipeline, tuple(edges), **score.as_dict()))
            return rows

    def totals(self) -> dict[str, int]:
        with self._lock:
            total = dict.fromkeys(OUTCOMES, 0)
            for score in self.scores.values():
                for name, count in score.as_dict().items():
                    total[name] += count
            return total


def _problem(pool: ClusterPool, what: str, error: ClusterError) -> str:
    name = config_map_name(pool.identity.server_id)
    return (
        f"Predict cannot {what} what it learned of the pipelines (ConfigMap {name} in namespace "
        f"{pool.settings.namespace}): {error}. It goes on from memory and learns again after a restart; "
        "the Role needs configmaps get, create and update (docker/kubernetes/rbac/role.yaml)."
    )


def _fanout(stage: Stage) -> str:
    return ", ".join(
        f"{jobs} jobs of {label_form(fp)} ({stage.environments.get(fp) or 'no environment'})"
        for fp, jobs in sorted(stage.fanout.items())
    )


def _delay(edge: Edge) -> str:
    text = f"{format_duration(round(edge.after_start_s))} after the stage starts"
    if edge.after_done_s is not None:
        text += f", {format_duration(round(edge.after_done_s))} after its last job"
    return text


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
