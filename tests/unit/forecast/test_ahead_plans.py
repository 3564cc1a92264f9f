"""Pods started ahead of a predicted stage, at plan level (forecast/plan.py): given a pool's pods, its
banked keys and the predictions, which pods the plan starts, for which stage, and what it lacked keys for."""

from __future__ import annotations

from elastic_agent.forecast.plan import AheadPlan, start_ahead
from elastic_agent.forecast.shape import Prediction
from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool import labels
from elastic_agent.pool.intents import Create, KeysShort
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.key_lifetime import PREDICT
from elastic_agent.pool.state import PoolState
from tests.support.pool_world import START, pod_notes, pool_on_a_cluster, put_pod

NOW = START + 60.0
LEAD_S = 90.0  # a pod's boot plus the time to the backend's next chance to act
FINGERPRINT = "v1:tests"
GO = "https://ci.example.test/go"
RUN = ("app", 4, "build", "1")


def predicted(jobs: int, ready_in_s: float = 30.0, freeing: int = 0) -> Prediction:
    """The test stage of pipeline app, `jobs` jobs of the fingerprint, expected after the build stage."""
    at = NOW + ready_in_s
    return Prediction("app", "build", "test", "app", at, at, {FINGERPRINT: jobs}, {FINGERPRINT: freeing}, RUN)


def predict_recipe(state: PoolState, banked_keys: int, predict: bool = True) -> None:
    """The fingerprint's recipe, brought by a create-agent whose job another pod served, and keys banked."""
    spec = JobSpec(FINGERPRINT, {}, True, None, 600.0, 0, None, GO, predict=predict)
    state.book.wait(JobIdentifier("app", "3", 3, "test", "1", "unit", 1), spec, "key-1", NOW)
    state.book.served(FINGERPRINT, 1)
    for n in range(banked_keys):
        state.keys.offer(f"banked-{n}", NOW)


def creations(ahead: AheadPlan) -> list[Create]:
    return [intent for intent in ahead.plan.intents if isinstance(intent, Create)]


def test_a_stage_due_within_the_lead_time_gets_a_pod_per_job_marked_for_that_stage() -> None:
    _, _, state = pool_on_a_cluster()
    predict_recipe(state, banked_keys=5)
    ahead = start_ahead(state, [predicted(jobs=3)], NOW, LEAD_S)
    created = creations(ahead)
    assert len(created) == 3
    assert all(c.key is None and c.job is None for c in created)  # banked keys only
    assert {c.annotations[labels.ANN_PREDICTED_FOR] for c in created} == {"app/test"}
    assert [s.token for s in ahead.started] == [c.token for c in created]
    assert ahead.without_key == {}
    assert ahead.plan.intents[-1] == KeysShort(PREDICT, {FINGERPRINT: 0})


def test_a_stage_due_beyond_the_lead_time_gets_nothing_yet() -> None:
    _, _, state = pool_on_a_cluster()
    predict_recipe(state, banked_keys=5)
    ahead = start_ahead(state, [predicted(jobs=3, ready_in_s=LEAD_S + 1)], NOW, LEAD_S)
    assert creations(ahead) == [] and ahead.started == ()


def test_without_keys_nothing_starts_and_the_run_is_told_how_many_pods_it_lacked() -> None:
    _, _, state = pool_on_a_cluster()
    predict_recipe(state, banked_keys=1)
    ahead = start_ahead(state, [predicted(jobs=3)], NOW, LEAD_S)
    assert len(creations(ahead)) == 1
    assert ahead.without_key == {RUN: 2}
    assert ahead.plan.intents[-1] == KeysShort(PREDICT, {FINGERPRINT: 2})


def test_idle_pods_and_pods_of_the_running_stage_count_before_any_is_started() -> None:
    store, _, state = pool_on_a_cluster()
    predict_recipe(state, banked_keys=5)
    put_pod(store, state, "agent-idle", pod_notes("idle", NOW - 5, FINGERPRINT))
    ahead = start_ahead(state, [predicted(jobs=4, freeing=2)], NOW, LEAD_S)
    assert len(creations(ahead)) == 1  # four jobs: one idle pod, two coming free, one started


def test_a_profile_without_predict_gets_no_pod_ahead() -> None:
    _, _, state = pool_on_a_cluster()
    predict_recipe(state, banked_keys=5, predict=False)
    assert creations(start_ahead(state, [predicted(jobs=3)], NOW, LEAD_S)) == []
