"""benchmarks.layer_share: each function's own time goes to its layer, and the standard library's to the
layer of its caller."""

from __future__ import annotations

import cProfile
import json
import pstats
from pathlib import Path

from benchmarks.layer_share import layer_of, shares
from elastic_agent.pool import records
from elastic_agent.simulation import gocd_transport


def test_files_are_given_their_layer() -> None:
    assert layer_of(records.__file__) == "product"
    assert layer_of(gocd_transport.__file__) == "simulation"
    assert layer_of(json.__file__) is None


def test_standard_library_time_counts_for_the_layer_that_called_it() -> None:
    profile = cProfile.Profile()
    profile.enable()
    for job_id in range(3000):  # each annotation new: the product's cache of them does not answer
        records.job_id_of(f'{{"job_id": {job_id}, "pipeline_name": "p"}}')
    profile.disable()
    stats = pstats.Stats(profile)
    own: dict[str | None, float] = {}
    for (filename, _, _), (_, _, spent, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        in_json = filename.startswith(str(Path(json.__file__).parent))
        where = "json" if in_json else layer_of(filename)
        own[where] = own.get(where, 0.0) + spent
    seconds = shares(stats)
    assert own["json"] > 0
    assert seconds["simulation"] == 0
    # json's decoder, called only by the product, counts for the product beside the product's own time
    assert seconds["product"] - own["product"] >= own["json"] * 0.999
