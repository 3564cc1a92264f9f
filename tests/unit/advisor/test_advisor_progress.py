"""The advisor's progress bar: drawn by tqdm when asked for, and never a reason the advisor cannot run
where tqdm (the `sim` extra) is not installed, as in the image."""

from __future__ import annotations

import sys

import pytest

from elastic_agent.progress import progress_bar


def test_without_tqdm_the_bar_is_a_silent_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # what `import tqdm` finds when it is not installed
    bar = progress_bar(5, shown=True)
    bar.update(2)
    assert type(bar).__module__ == "elastic_agent.progress" and bar.total == 5


def test_a_bar_asked_for_is_tqdms_on_stderr() -> None:
    bar = progress_bar(3, shown=True)
    try:
        assert type(bar).__module__.startswith("tqdm") and bar.total == 3
    finally:
        bar.close()
