"""Which flat candidates the advisor must run to recommend what running all of them would.

The flat candidates form rows, one per MinIdlePods, each ordered by IdleTimeout. Along a row a longer
IdleTimeout keeps pods at least as long, so it waits no more and idles no less: whether a candidate
meets the wait targets (`Meets`, the rule of `advise.choose`) is false then true along a row, and its
idle pod-seconds never fall. So, for one level of targets at a time (every target, then the p95 one
relaxed, as `choose` tries them):

- a bisection finds each row's shortest IdleTimeout that meets; the shorter ones do not meet;
- a longer one costs (idle plus boot pod-seconds per job) at least the idle of the one before it in the
  row, a bound that holds whatever the boot is; while that bound exceeds the cheapest meeting cost found,
  it and the rest of the row cannot be the cheapest and are not run. At an equal bound it is run, as the
  exhaustive choice breaks a tie of cost by the mean wait;
- when no row meets at a level, the next level is searched; when none meets at any level, every
  candidate is run (the fallback picks the one that waits least, which no bound here says).

Deciding code only: it asks `run` for the results it needs, a batch at a time (a batch's runs may go
side by side), and returns what it ran and why it skipped the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from elastic_agent.traces.measures import PolicyResult

Meets = Callable[[PolicyResult], bool]
RunBatch = Callable[[Sequence[str]], Mapping[str, PolicyResult]]


@dataclass(frozen=True)
class SearchOutcome:
    results: dict[str, PolicyResult]  # every candidate run, by label
    skipped: dict[str, str]  # every candidate not run: why


def cost(result: PolicyResult) -> float:
    return result.idle_pod_s_per_job + result.boot_pod_s_per_job


def search_flat(rows: Sequence[Sequence[str]], levels: Sequence[Meets], run: RunBatch) -> SearchOutcome:
    """`rows`: candidate labels, one row per MinIdlePods, each by ascending IdleTimeout; `levels`: the
    targets to try in order."""
    results: dict[str, PolicyResult] = {}

    def ensure(labels: Sequence[str]) -> None:
        missing = [label for label in labels if label not in results]
        if missing:
            results.update(run(missing))

    for meets in levels:
        firsts = _bisect(rows, meets, results, ensure)
        if not firsts:
            continue
        skipped = {
            label: f"shorter than {row[first]}, the row's shortest meeting the targets (bisection)"
            for row, first in zip(rows, firsts, strict=True)
            if first is not None
            for label in row[:first]
            if label not in results
        }
        skipped |= {
            label: "its row met no target at its longest IdleTimeout (bisection)"
            for row, first in zip(rows, firsts, strict=True)
            if first is None
            for label in row
            if label not in results
        }
        skipped |= _climb(rows, firsts, meets, results, ensure)
        # A candidate run while an earlier level was searched is kept, whatever this level says of it.
        return SearchOutcome(results, {label: why for label, why in skipped.items() if label not in results})
    ensure([label for row in rows for label in row])
    return SearchOutcome(results, {})


def bisection_order(row: Sequence[str]) -> list[str]:
    """A row's labels in the order `_bisect` may ask for them: its middle, then the middles of the halves
    on either side, and so on (which of each pair it asks for depends on the results)."""
    order: list[str] = []
    spans = [(0, len(row))]
    while spans:
        halves = []
        for lo, hi in spans:
            if lo < hi:
                mid = (lo + hi) // 2
                order.append(row[mid])
                halves += [(lo, mid), (mid + 1, hi)]
        spans = halves
    return order


def _bisect(
    rows: Sequence[Sequence[str]],
    meets: Meets,
    results: dict[str, PolicyResult],
    ensure: Callable[[Sequence[str]], None],
) -> list[int | None]:
    """Each row's first index that meets (None: none does), the rows' steps run side by side."""
    bounds = [[0, len(row)] for row in rows]
    while True:
        mids = [(lo + hi) // 2 if lo < hi else None for lo, hi in bounds]
        wanted = [row[mid] for row, mid in zip(rows, mids, strict=True) if mid is not None]
        if not wanted:
            break
        ensure(wanted)
        for row, mid, bound in zip(rows, mids, bounds, strict=True):
            if mid is not None:
                if meets(results[row[mid]]):
                    bound[1] = mid
                else:
                    bound[0] = mid + 1
    firsts = [lo if lo < len(row) else None for (lo, _), row in zip(bounds, rows, strict=True)]
    return firsts if any(first is not None for first in firsts) else []


def _climb(
    rows: Sequence[Sequence[str]],
    firsts: Sequence[int | None],
    meets: Meets,
    results: dict[str, PolicyResult],
    ensure: Callable[[Sequence[str]], None],
) -> dict[str, str]:
    """Run each row upwards from its first meeting candidate while the next could still be cheapest."""
    skipped: dict[str, str] = {}
    at = {index: first for index, first in enumerate(firsts) if first is not None}
    while at:
        best = min(cost(r) for r in results.values() if meets(r))
        step: dict[int, int] = {}
        for index, k in at.items():
            row = rows[index]
            if k + 1 >= len(row):
                continue
            bound = results[row[k]].idle_pod_s_per_job
            if bound > best:
                for label in row[k + 1 :]:
                    skipped[label] = (
                        f"costs at least {row[k]}'s {bound:.1f} idle pod-s/job, above the cheapest "
                        f"meeting candidate's {best:.1f} pod-s/job"
                    )
                continue
            step[index] = k + 1
        ensure([rows[index][k] for index, k in step.items()])
        at = step
    return skipped
