"""benchmarks.layer_share: each function's own time goes to its layer, and the standard library's to the
layer of its caller."""

from __future__ import annotations

import cProfile
import json
import pstats
from pathlib import Path

import pytest

from benchmarks.layer_share import layer_of, main, shares
from elastic_agent.pool import records
from elastic_agent.simulation import gocd_transport
from elastic_agent.traces.workload import WorkloadSpec, generate, write_trace


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


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["{missing}", "Reuse=true"], "cannot be read"),
        (["{trace}", "Reuse"], "each property is KEY=VALUE"),
        (["{trace}", "--first", "0", "Reuse=true"], "--first must be at least 1"),
        (["{not_a_trace}", "Reuse=true"], "is not a trace this project reads"),
        (["{trace}", "IdleTimeout=banana"], "'banana' is not a duration"),
        (["{trace}", "Bogus=1"], "'Bogus' is not a setting of this plugin"),
    ],
)
def test_bad_input_gets_a_sentence_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], said: str
) -> None:
    trace = tmp_path / "week.jsonl"
    write_trace(generate(WorkloadSpec(jobs=5, days=0.01), seed=1), trace)
    not_a_trace = tmp_path / "notes.txt"
    not_a_trace.write_text("hello\n", encoding="utf-8")
    paths = {"trace": trace, "not_a_trace": not_a_trace, "missing": tmp_path / "missing.jsonl"}
    with pytest.raises(SystemExit) as exit_:
        main([argument.format(**paths) for argument in arguments])
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err
