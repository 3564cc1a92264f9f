"""The progress bar of the advisor and of `trace`: tqdm's, when the `sim` extra is installed and a
person watches (stderr is a terminal); otherwise a counter that draws nothing.

tqdm belongs to the `sim` extra, not to what the image installs to serve and advise, so it is imported
only when a bar is asked for, and its absence means no bar rather than an advisor that cannot start.
"""

from __future__ import annotations

import sys
from typing import Protocol


class Progress(Protocol):
    total: float | None

    def update(self, n: float = 1) -> object: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


class _Silent:
    """Counts what a bar would show, draws nothing."""

    def __init__(self, total: int) -> None:
        self.total: float | None = total
        self.n = 0.0

    def update(self, n: float = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, shown: bool, desc: str = "simulations", unit: str = "run") -> Progress:
    """A bar counting `total` things (`desc`) on stderr if `shown` and tqdm is there; else a silent one."""
    if shown:
        try:
            from tqdm import tqdm
        except ImportError:
            return _Silent(total)
        bar: Progress = tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)
        return bar
    return _Silent(total)
