"""Predict=true: the backend learns which stage follows which and starts the next stage's pods ahead, in the
virtual-time simulator (every pod boots in exactly 20 s, agents poll exactly every 5 s).

The pipeline `app` runs every 8 minutes: stage `build` (2 jobs of 60 s), then, 10 s after build passed,
stage `test` (6 jobs of 30 s). With IdleTimeout 2m no pod lives from one run to the next, so without
prediction `test` gets the 2 pods `build` leaves and waits for 4 new ones to boot.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import generate_latest

from elastic_agent.clock import ManualClock
from elastic_agent.forecast.shape import MAX_DOWNSTREAM, MIN_CAME_TRUE, SPREAD_K, Shape
from elastic_agent.forecast.store import KEY, config_map_name, from_data, to_data
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.job_spec import JobSpecs
from elastic_agent.service.metrics import Metrics
from elastic_agent.simulation.fake_kube_objects import StoreError
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.status.pages import render_plugin_status
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob
from profiles import ElasticProfile, validate_elastic_profile
from profiles.cluster import ClusterProfile
from profiles.metadata import elastic_profile_metadata
from profiles.views import elastic_profile_view
from tests.support.predict_traces import FIXED, PERIOD_S, PREDICT, RUNS, two_stages

NO_PREDICT = {"Reuse": "true", "IdleTimeout": "2m", "Predict": "false"}


@dataclass
class Replay:
    simulation: Simulation
    result: PolicyResult
    annotations: dict[str, dict[str, str]]  # every pod created -> its annotations when created


def simulate(trace: list[TraceJob], elastic: dict[str, str], settings: SimSettings = FIXED) -> Replay:
    simulation = Simulation(trace, Policy("p", elastic), settings)
    annotations: dict[str, dict[str, str]] = {}

    def created(kind: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata", {})
        if kind == "ADDED" and metadata.get("name") not in annotations:
            annotations[metadata["name"]] = dict(metadata.get("annotations") or {})

    simulation.store.add_listener(created)
    return Replay(simulation, simulation.run(), annotations)


def ahead(replay: Replay) -> dict[str, dict[str, str]]:
    """The pods started ahead of a stage, with their annotations."""
    return {name: a for name, a in replay.annotations.items() if labels.ANN_PREDICTED_FOR in a}


def test_a_learned_two_stage_pipeline_has_its_next_stage_pods_started_ahead_and_its_jobs_wait_less() -> None:
    replay = simulate(two_stages(), PREDICT)
    ahead, plain = replay.result, simulate(two_stages(), NO_PREDICT).result
    assert ahead.violations == [] and ahead.plugin_errors == [] and ahead.completed == len(two_stages())
    assert ahead.registrations_refused == 0
    # From the run after the edge came true MIN_CAME_TRUE times, every run gets the 4 pods test needs
    # beyond the 2 that build leaves, and test's jobs all take one of them.
    predicted_runs = RUNS - MIN_CAME_TRUE
    assert ahead.predicted_started == 4 * predicted_runs
    assert ahead.predicted_hits == ahead.predicted_started and ahead.predicted_idled_out == 0
    assert ahead.predicted_other_job == 0  # one pipeline: no other job takes them
    assert ahead.predicted_without_key == 0
    assert ahead.wait_mean < plain.wait_mean
    waited = sorted(ahead.waits)
    # build's 2 jobs wait for their boot in every run; test's 6 of the predicted runs wait for no boot,
    # only for their pod's next poll (a pod started ahead, idle since it registered, polls 0.78 s after
    # the tick that admits test; a pod build left, 3.187 s after).
    assert sum(wait < 5.0 for wait in waited) >= 6 * predicted_runs
    assert sum(wait < 5.0 for wait in sorted(plain.waits)) < 6 * predicted_runs


def test_never_more_pods_are_started_ahead_than_the_learned_fan_out_minus_the_pods_that_come_free() -> None:
    replay = simulate(two_stages(test_jobs=3), PREDICT)
    # test needs 3, build leaves 2: one pod ahead per predicted run, never more.
    assert replay.result.predicted_started == RUNS - MIN_CAME_TRUE == len(ahead(replay))
    assert replay.result.registrations_refused == 0


def test_pods_started_ahead_stay_within_max_pods() -> None:
    simulation = Simulation(two_stages(), Policy("p", PREDICT, cluster={"max_pods": "4"}), FIXED)
    result = simulation.run()
    # build's 2 pods and room for 2 more: test's other 2 jobs wait for pods its first jobs leave.
    assert result.predicted_started == 2 * (RUNS - MIN_CAME_TRUE) and result.peak_pods <= 4
    assert result.violations == [] and result.registrations_refused == 0 and result.completed == 8 * RUNS


def test_a_pod_without_a_banked_key_is_not_started_and_is_counted() -> None:
    # test runs on another profile: every key create-agent brings goes into the pod made for its job, so
    # the bank stays empty and prediction has no key to start a pod with.
    result = simulate(two_stages(test_jobs=2, test_profile="node"), PREDICT).result
    assert result.predicted_started == 0
    assert result.predicted_without_key == 2 * (RUNS - MIN_CAME_TRUE)
    assert result.registrations_refused == 0 and result.violations == []


def test_pods_started_for_a_stage_that_does_not_come_stay_idle_and_retire_by_the_idle_timeout() -> None:
    result = simulate(two_stages(failed_last=True), PREDICT).result
    assert result.violations == [] and result.registrations_refused == 0
    assert result.predicted_idled_out == 4  # the last run's test never came
    assert result.predicted_hits == result.predicted_started - 4
    assert result.pods_left == 0


def test_predict_false_changes_nothing() -> None:
    without_key = {"Reuse": "true", "IdleTimeout": "2m"}
    off, absent = simulate(two_stages(), NO_PREDICT), simulate(two_stages(), without_key)
    assert off.result.waits == absent.result.waits and off.result.timeline == absent.result.timeline
    assert off.simulation.tracker.created == absent.simulation.tracker.created
    assert off.simulation.tracker.deleted == absent.simulation.tracker.deleted
    assert ahead(off) == {}
    numbers = off.result.numbers()
    assert [numbers[k] for k in numbers if k.startswith("predicted_")] == [0, 0, 0, 0, 0]


def test_skipping_idle_events_predicts_as_simulating_every_event_does() -> None:
    every_event = SimSettings(**{**vars(FIXED), "skip_idle_events": False})
    full = simulate(two_stages(), PREDICT, every_event).simulation
    other = simulate(two_stages(), PREDICT).simulation
    assert (full.skipping, other.skipping) == (None, other.plugin)
    assert other.tracker.created == full.tracker.created and other.tracker.deleted == full.tracker.deleted
    waits = {j.job_id: j.wait_s for j in full.model.jobs()}
    assert {j.job_id: j.wait_s for j in other.model.jobs()} == waits


def test_a_job_on_a_pod_started_ahead_is_told_so_in_its_console() -> None:
    settings = SimSettings(**{**vars(FIXED), "console": True})
    simulation = simulate(two_stages(runs=MIN_CAME_TRUE + 1), PREDICT, settings).simulation
    last_tests = [
        j for j in simulation.model.jobs() if j.stage == "test" and j.pipeline_counter == MIN_CAME_TRUE + 1
    ]
    told = [j for j in last_tests if "started ahead" in j.console_text]
    assert len(told) == 4  # the 4 pods started ahead; the other 2 jobs ran on build's pods
    line = next(line for line in told[0].console if "started ahead" in line)
    assert f"pod {told[0].agent_id}" in line and "stage test of pipeline app" in line
    earlier = [j for j in simulation.model.jobs() if j.pipeline_counter <= MIN_CAME_TRUE]
    assert not any("started ahead" in j.console_text for j in earlier)


def test_pods_started_ahead_say_for_which_stage_and_carry_no_key_in_their_annotations() -> None:
    replay = simulate(two_stages(runs=MIN_CAME_TRUE + 1), PREDICT)
    started = ahead(replay)
    assert len(started) == 4 and {a[labels.ANN_PREDICTED_FOR] for a in started.values()} == {"app/test"}
    keys = {attempt.key for attempt in replay.simulation.model.registrations}
    assert keys and not any(key in json.dumps(started) for key in keys)


def test_predict_is_a_validated_profile_key_that_needs_reuse() -> None:
    image = {"Image": "gocd/gocd-agent-wolfi:v24.3.0"}
    assert validate_elastic_profile({**image, "Reuse": "true", "Predict": "true"}) == []
    problems = {p["key"]: p["message"] for p in validate_elastic_profile({**image, "Predict": "true"})}
    sentence = "pods started ahead only help if they can be reused: set Reuse to true, or Predict to false"
    assert problems == {"Predict": sentence}
    bad = {p["key"]: p["message"] for p in validate_elastic_profile({**image, "Predict": "soon"})}
    assert list(bad) == ["Predict"]
    assert ElasticProfile.from_properties({**image, "Reuse": "true", "Predict": "TRUE"}).predict
    assert not ElasticProfile.from_properties(image).predict  # default: false
    assert "Predict" in [field["key"] for field in elastic_profile_metadata()]
    assert 'ng-model="Predict"' in elastic_profile_view()


def test_predict_is_a_reuse_knob_not_part_of_the_fingerprint() -> None:
    cluster = ClusterProfile.from_properties(
        {"go_server_url": "https://ci.example.com/go", "kubernetes_cluster_url": "https://k8s.example.com"}
    )
    specs = JobSpecs(ManualClock(), lambda url, wait=True: "")
    base = {"Image": "gocd/agent:v1", "Reuse": "true"}
    plain = specs.spec(base, cluster, None, "app")
    predicting = specs.spec({**base, "Predict": "true"}, cluster, None, "app")
    assert predicting.fingerprint == plain.fingerprint
    assert predicting.predict and not plain.predict


def test_the_status_report_shows_per_pipeline_what_was_learned_and_how_often_it_was_right() -> None:
    replay = simulate(two_stages(failed_last=True), PREDICT)
    backend = replay.simulation.plugin.backend.backend  # type: ignore[attr-defined]
    rows = backend.forecast.rows()
    view = render_plugin_status(backend.pools(), [], backend.clock, None, rows)
    result = replay.result
    started, hits = result.predicted_started, result.predicted_hits
    row = (
        f'data-pipeline="app" data-edge="build->test" data-fires="true" data-started="{started}"'
        f' data-hit="{hits}" data-idled-out="4" data-without-key="0"'
    )
    assert row in view
    # build was followed by test in all runs but the last, whose build failed; its fan-out and delays.
    assert f"{RUNS - 1} of {RUNS}" in view
    assert "6 jobs of v1-" in view and "(no environment)" in view
    assert "1m30s after the stage starts, 10s after its last job" in view
    keys = {attempt.key for attempt in replay.simulation.model.registrations}
    assert not any(key in view for key in keys)


def test_the_metrics_count_pods_started_ahead_by_outcome() -> None:
    replay = simulate(two_stages(failed_last=True), PREDICT)
    metrics = Metrics()
    metrics.watch_predictions(replay.simulation.plugin.backend.backend.forecast.totals)  # type: ignore[attr-defined]
    text = generate_latest(metrics.registry).decode()
    started = replay.result.predicted_started
    assert f'gocd_elastic_agent_predicted_pods{{outcome="started"}} {started:.1f}' in text
    assert 'gocd_elastic_agent_predicted_pods{outcome="idled_out"} 4.0' in text
    assert f'gocd_elastic_agent_predicted_pods{{outcome="hit"}} {started - 4:.1f}' in text


def test_what_was_learned_survives_a_backend_restart_in_a_config_map_without_secrets() -> None:
    secret = "s3cr3t-token-value"
    profile = {**PREDICT, "Environment": f"DEPLOY_TOKEN={secret}"}
    first = simulate(two_stages(), profile)
    name = config_map_name(first.simulation.model.server_info()["server_id"])
    data = first.simulation.store.config_maps.get("ci", name)["data"]
    text = json.dumps(data)
    assert secret not in text and "DEPLOY_TOKEN" not in text and "registry.example.test" not in text
    assert not any(attempt.key in text for attempt in first.simulation.model.registrations)
    learned = from_data(data).stages[("app", "build")]
    assert learned.edges["test"].came_true == RUNS and learned.judged == RUNS
    # Batched: one read, then at most one write a server-ping.
    (pool,) = first.simulation.plugin.backend.backend.pools()  # type: ignore[attr-defined]
    assert 2 <= pool.port.api_calls["configmaps"] <= 1 + first.simulation.model.stats.pings_sent

    # A new backend (a new simulation) over a namespace holding that ConfigMap predicts from its first
    # run on; without it, two runs are not enough to predict anything.
    def restarted(with_config_map: bool) -> PolicyResult:
        simulation = Simulation(two_stages(runs=2), Policy("p", profile), FIXED)
        if with_config_map:
            simulation.store.config_maps.create("ci", {"metadata": {"name": name}, "data": data})
        return simulation.run()

    after, fresh = restarted(True), restarted(False)
    assert after.predicted_started + after.predicted_without_key == 4 * 2  # 4 wanted in each run
    assert after.predicted_started > 0 and after.registrations_refused == 0
    assert fresh.predicted_started + fresh.predicted_without_key == 0


def test_a_config_map_of_another_version_or_damaged_is_ignored() -> None:
    assert from_data({"shape.json": '{"version": 99, "stages": []}'}).stages == {}
    assert from_data({"shape.json": "not json"}).stages == {}
    assert from_data({"shape.json": '{"version": 1, "stages": [{"pipeline": "p"}]}'}).stages == {}
    assert from_data(None).stages == {}


def test_a_config_map_the_role_does_not_allow_is_a_health_warning_and_prediction_goes_on() -> None:
    simulation = Simulation(two_stages(), Policy("p", PREDICT), FIXED)
    maps = simulation.store.config_maps

    def refused(*args: object) -> dict[str, object]:
        raise StoreError(403, "Forbidden", 'configmaps is forbidden: User "plugin" cannot get resource')

    maps.get = maps.create = maps.replace = refused  # type: ignore[method-assign]
    result = simulation.run()
    assert result.predicted_started == 4 * (RUNS - MIN_CAME_TRUE) and result.registrations_refused == 0
    warnings = [m.message for m in simulation.model.health_messages if m.type == "warning"]
    assert any("Predict cannot read what it learned" in m and "configmaps get, create and update" in m
               for m in warnings), warnings  # fmt: skip


def upstream_and_downstream(coincidence_only: bool = False) -> list[TraceJob]:
    """Pipeline `up` (stage `build`, 2 jobs of 60 s) triggers `down` (stage `deploy`, 4 jobs of 30 s)
    about 10 s after build passed (a 20 s boot, 60 s jobs), as GoCD does for a dependency material.
    `coincidence_only`: `down` runs at other times; only its first run begins 10 s after a build ended."""
    jobs: list[TraceJob] = []
    for run in range(RUNS):
        at, counter = 10.0 + run * PERIOD_S, run + 1
        for n in range(2):
            jobs.append(TraceJob(at, "java", None, "up", 60.0, counter, "build", 1, f"compile-{n}"))
        later = at + 95.0 if not coincidence_only or run == 0 else at + 240.0
        for n in range(4):
            jobs.append(TraceJob(later, "java", None, "down", 30.0, counter, "deploy", 1, f"deploy-{n}"))
    return jobs


def test_an_upstream_pipeline_that_passes_has_its_downstream_first_stage_pods_started_ahead() -> None:
    replay = simulate(upstream_and_downstream(), PREDICT)
    result, plain = replay.result, simulate(upstream_and_downstream(), NO_PREDICT).result
    assert result.violations == [] and result.plugin_errors == [] and result.registrations_refused == 0
    assert result.completed == len(upstream_and_downstream())
    # From the run after the edge came true MIN_CAME_TRUE times: the 2 pods deploy needs beyond build's 2.
    assert result.predicted_started == 2 * (RUNS - MIN_CAME_TRUE)
    assert result.predicted_hits == result.predicted_started
    assert {a[labels.ANN_PREDICTED_FOR] for a in ahead(replay).values()} == {"down/deploy"}
    assert result.wait_mean < plain.wait_mean
    backend = replay.simulation.plugin.backend.backend  # type: ignore[attr-defined]
    view = render_plugin_status(backend.pools(), [], backend.clock, None, backend.forecast.rows())
    assert 'data-edge="up/build->down/deploy" data-fires="true"' in view


def test_a_pipeline_that_once_starts_near_another_ones_end_does_not_fire() -> None:
    replay = simulate(upstream_and_downstream(coincidence_only=True), PREDICT)
    assert replay.result.predicted_started == 0 and replay.result.predicted_without_key == 0
    edge = replay.simulation.plugin.backend.backend.forecast.shape.stages[("up", "build")].edges  # type: ignore[attr-defined]
    assert edge["down/deploy"].came_true == 1


def test_a_downstream_edge_survives_the_config_map_round_trip() -> None:
    replay = simulate(upstream_and_downstream(), PREDICT)
    name = config_map_name(replay.simulation.model.server_info()["server_id"])
    data = replay.simulation.store.config_maps.get("ci", name)["data"]
    edge = from_data(data).stages[("up", "build")].edges["down/deploy"]
    assert (edge.pipeline, edge.next_stage, edge.came_true) == ("down", "deploy", RUNS)
    assert edge.after_done_s == pytest.approx(10.0, abs=5.0)


class StageRuns:
    """One-job stage runs fed to a Shape in time order, as create-agent and job-completion give them."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int, JobIdentifier, bool]] = []  # (when, order, job, completed?)
        self.ids = itertools.count(1)

    def run(self, pipeline: str, counter: int, at: float, took: float) -> None:
        job = JobIdentifier(pipeline, str(counter), counter, "build", "1", "job", next(self.ids))
        self.events.extend([(at, job.job_id, job, False), (at + took, job.job_id, job, True)])

    def shape(self) -> Shape:
        shape = Shape()
        for at, _, job, completed in sorted(self.events, key=lambda e: (e[0], e[1])):
            if completed:
                shape.completed(job, at)
            else:
                shape.scheduled(job, "fp-" + job.pipeline_name, None, at)
            shape.predictions(at)
        return shape


def test_a_busy_pipeline_that_often_starts_after_another_ones_end_is_not_taken_for_its_downstream() -> None:
    """`busy` starts every 10 s, so one of its runs begins within 30 s of every `up` run's end, but most
    of its runs follow nothing: the edge up/build -> busy/build does not explain busy's runs and must not
    fire. A real downstream pipeline, run only after `up` passes, does fire (the simulated test above)."""
    runs = StageRuns()
    for counter in range(1, 2 * 60 * 6):  # two hours of busy
        runs.run("busy", counter, 10.0 * counter, 5.0)
    for counter in range(1, 12):  # an up run every 10 minutes, done 60 s after it starts
        runs.run("up", counter, 600.0 * counter + 3.0, 60.0)
    shape = runs.shape()
    edge = shape.stages[("up", "build")].edges["busy/build"]
    assert edge.came_true >= MIN_CAME_TRUE
    assert shape.stages[("up", "build")].best(shape.stages, "up") is None


def test_coincidental_downstream_edges_are_bounded_and_a_real_downstream_pipeline_still_fires() -> None:
    """In the first 20 runs of `up` a different pipeline starts 5 s after each run ends (coincidences,
    as a busy installation has them between all its pipelines); from run 21 on, `down`, which a
    material triggers, does the same after every run. The stage keeps at most MAX_DOWNSTREAM downstream
    edges, in memory and in the ConfigMap, and the edge to `down` is the one that fires."""
    runs = StageRuns()
    for counter in range(1, 61):
        start = 600.0 * counter
        runs.run("up", counter, start, 60.0)
        later, its_counter = (f"other-{counter}", 1) if counter <= 20 else ("down", counter)
        runs.run(later, its_counter, start + 65.0, 30.0)
    shape = runs.shape()
    up = shape.stages[("up", "build")]
    assert sum(1 for edge in up.edges.values() if edge.pipeline is not None) == MAX_DOWNSTREAM
    best = up.best(shape.stages, "up")
    assert best is not None and (best.pipeline, best.came_true) == ("down", 40)
    saved = json.loads(to_data(shape)[KEY])["stages"]
    assert [len(item["next"]) for item in saved if item["pipeline"] == "up"] == [MAX_DOWNSTREAM]


def test_a_stage_of_varying_length_has_its_successors_pods_ready_early_by_the_learned_spread() -> None:
    """`build` lasts 60 or 120 s in turn and `test` comes 5 s after it: from build's start alone, test's
    pods are to be ready SPREAD_K typical deviations early, so a short build finds them booted; once
    build has completed, GoCD's steady few seconds need no margin."""
    shape, ids = Shape(), itertools.count(1)

    def job(counter: int, stage: str) -> JobIdentifier:
        return JobIdentifier("app", str(counter), counter, stage, "1", "job", next(ids))

    start = 0.0
    for counter in range(1, 9):
        took = 60.0 if counter % 2 else 120.0
        build = job(counter, "build")
        shape.scheduled(build, "fp", None, start)
        shape.completed(build, start + took)
        test = job(counter, "test")
        shape.scheduled(test, "fp", None, start + took + 5.0)
        shape.completed(test, start + took + 35.0)
        start += 600.0
    edge = shape.stages[("app", "build")].edges["test"]
    assert 20.0 < edge.spread_s < 40.0  # the delays are 65 and 125 s: about 30 s either side
    running = job(9, "build")
    shape.scheduled(running, "fp", None, start)
    (prediction,) = shape.predictions(start + 1.0)
    assert prediction.at == pytest.approx(start + edge.after_start_s)
    assert prediction.ready_by == pytest.approx(prediction.at - SPREAD_K * edge.spread_s)
    assert prediction.ready_by < start + 65.0  # ready before a short build's test comes
    shape.completed(running, start + 60.0)
    (prediction,) = shape.predictions(start + 61.0)
    assert edge.after_done_s is not None
    assert prediction.ready_by == prediction.at == pytest.approx(start + 60.0 + edge.after_done_s)
    spread = from_data(to_data(shape, ["fp"])).stages[("app", "build")].edges["test"].spread_s
    assert spread == pytest.approx(edge.spread_s, abs=1e-3)
