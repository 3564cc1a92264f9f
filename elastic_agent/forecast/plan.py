"""The decision to start pods ahead of a predicted stage: the pool's state and the predictions in, a plan
out (intents.py), as the warm pool decides (pool/warm.py).

A prediction counts once its pods are to be ready (shape.py: the expected time, less a margin for a
stage's varying length) within the lead time (a pod's boot plus the time to the backend's next chance
to act). For each fingerprint the next stage schedules, the pods that will be
there are those booting or idle beyond the jobs already waiting, and those running the current stage's
jobs (they come free when it ends); only the learned fan-out minus those is started, within the room
the caps leave and with banked keys only (a pod is never started without a key of its own). Predictions
are served soonest first, so that pods already there count for the stage that needs them first. What a
prediction wanted but could not get for want of a key is reported, since the key bank is the limit
GoCD's protocol sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from elastic_agent.forecast.shape import Prediction, RunKey
from elastic_agent.pool import labels
from elastic_agent.pool.intents import Create, Intent, KeysShort, Plan, Reserve
from elastic_agent.pool.key_lifetime import PREDICT, usable_keys
from elastic_agent.pool.state import PoolState


@dataclass(frozen=True)
class Started:
    """A pod the plan starts: its reservation token and what it was started for."""

    token: object
    fingerprint: str
    prediction: Prediction


@dataclass(frozen=True)
class AheadPlan:
    plan: Plan
    started: tuple[Started, ...] = ()
    without_key: dict[RunKey, int] = field(default_factory=dict)  # per predicting run, this decision


def predicted_for(prediction: Prediction) -> str:
    """The pod's annotation: the pipeline and stage it was started for (names only, no secret)."""
    return f"{prediction.next_pipeline}/{prediction.next_stage}"


def start_ahead(state: PoolState, predictions: Sequence[Prediction], now: float, lead_s: float) -> AheadPlan:
    """Pods for the predictions due within `lead_s` whose fingerprints this pool has a Predict recipe of
    (the recipe comes with create-agent, as the warm pool's do)."""
    view = state.indexed()
    room = state.room(view)
    keys = usable_keys(state)
    there: dict[str, int] = {}  # fingerprint -> pods not yet counted for a prediction
    intents: list[Intent] = []
    started: list[Started] = []
    without_key: dict[RunKey, int] = {}
    short: dict[str, int] = {}  # the same per fingerprint, for the pool's health and pages
    for prediction in predictions:
        if prediction.ready_by - now > lead_s:
            continue
        for fingerprint, jobs in prediction.fanout.items():
            spec = state.book.recipe(fingerprint)
            if spec is None or not spec.predict or state.book.is_superseded(fingerprint):
                continue
            if state.book.holds.get(fingerprint):
                continue  # a broken pod of the profile: it is tried for a waiting job, not ahead
            if fingerprint not in there:
                waiting, ready = state.demand(fingerprint, view)
                there[fingerprint] = ready - waiting
            short.setdefault(fingerprint, 0)
            free = prediction.freeing.get(fingerprint, 0)
            counted = max(0, there[fingerprint]) + free
            wanted = max(0, jobs - counted)
            there[fingerprint] -= max(0, jobs - free)
            possible = min(wanted, room, keys)
            if wanted > possible and keys < min(wanted, room):
                lacked = min(wanted, room) - keys
                without_key[prediction.run] = without_key.get(prediction.run, 0) + lacked
                short[fingerprint] = short.get(fingerprint, 0) + lacked
            for _ in range(possible):
                token = object()  # unique: concurrent plans never share a reservation
                said = (
                    f"started pod {{pod}} ahead of stage {prediction.next_stage} of pipeline "
                    f"{prediction.next_pipeline}: it usually follows stage {prediction.stage} of pipeline "
                    f"{prediction.pipeline}"
                )
                annotations = {labels.ANN_PREDICTED_FOR: predicted_for(prediction)}
                intents += [
                    Reserve(token, fingerprint),
                    Create(token, None, spec, None, said, annotations=annotations),
                ]
                started.append(Started(token, fingerprint, prediction))
            room, keys = room - possible, keys - possible
            there[fingerprint] += possible
    return AheadPlan(Plan((*intents, KeysShort(PREDICT, short))), tuple(started), without_key)
