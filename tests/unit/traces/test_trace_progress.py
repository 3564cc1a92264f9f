"""`trace`'s progress where nobody watches a terminal (cron, CI, a pipe): a line on stderr every few
seconds of the injected clock, so that a read of thousands of stage runs shows it is alive; and the
progress bar's library installed with the package, since every command that shows progress imports it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import responses

from elastic_agent.clock import ManualClock
from tests.support.gocd_history_answers import NOW, serve_everything, trace
from tests.support.paths import ROOT


class TickingClock(ManualClock):
    """A second passes each time the time is read: the progress lines' only source of time."""

    def now(self) -> float:
        self.advance(1.0)
        return super().now()


def test_without_a_terminal_a_progress_line_goes_to_stderr_every_few_seconds_of_the_clock(
    gocd: responses.RequestsMock, token_file: Path, tmp_path: Path
) -> None:
    serve_everything(gocd)

    status, out, err = trace(token_file, tmp_path / "trace.jsonl", clock=TickingClock(NOW))

    assert status == 0
    lines = [line for line in err.splitlines() if line.startswith("stage runs:")]
    # Eleven stage runs, a line once five seconds have passed, and the last when the reads are done.
    assert lines == [
        "stage runs: 5 of 11 calls (45 %), 5 s so far",
        "stage runs: 10 of 11 calls (91 %), 10 s so far",
        "stage runs: 11 of 11 calls (100 %), 12 s so far",
    ]
    assert not any(re.match(r"(pipeline configs|stage histories):", line) for line in err.splitlines())
    assert "\r" not in err  # lines for a log, not a bar's redraws
    assert not any(line.startswith("stage runs:") for line in out.splitlines())


def test_the_progress_bars_library_is_a_dependency_of_the_package_not_of_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0] for requirement in project["dependencies"]]
    assert "tqdm" in names
    extras = [r for requirements in project["optional-dependencies"].values() for r in requirements]
    assert not any(r.startswith("tqdm") for r in extras)
