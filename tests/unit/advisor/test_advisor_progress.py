"""The advisor's progress bar: drawn by tqdm when asked for (tqdm is one of the package's dependencies),
and nothing at all when not asked for and no clock is given for progress lines."""

from __future__ import annotations

from elastic_agent.progress import progress_bar


def test_a_bar_not_asked_for_without_a_clock_is_a_silent_counter() -> None:
    bar = progress_bar(5, shown=False)
    bar.update(2)
    assert type(bar).__module__ == "elastic_agent.progress" and bar.total == 5


def test_a_bar_asked_for_is_tqdms_on_stderr() -> None:
    bar = progress_bar(3, shown=True)
    try:
        assert type(bar).__module__.startswith("tqdm") and bar.total == 3
    finally:
        bar.close()
