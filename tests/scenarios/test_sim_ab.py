"""The side-by-side speed comparison runs both trees and cleans up its worktree."""

from __future__ import annotations

import subprocess

from benchmarks import sim_ab


def worktrees() -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(sim_ab.ROOT), "worktree", "list", "--porcelain"], capture_output=True, text=True
    )
    return [line for line in listing.stdout.splitlines() if line.startswith("worktree ")]


def test_comparing_with_a_revision_times_both_trees_and_removes_the_worktree() -> None:
    before = worktrees()
    lines = sim_ab.compare("HEAD", 30, ["one"], rounds=2)
    assert lines[0].startswith("| 30 jobs | HEAD, round by round | this tree, round by round |")
    cells = [cell.strip() for cell in lines[2].strip("|").split("|")]
    assert cells[0] == "one pod per job"
    assert all(len(cell.split(", ")) == 2 for cell in cells[1:3])  # two rounds on each side
    assert cells[3].endswith("x")
    assert cells[4] in ("yes", "NO: the trees simulate differently")
    assert worktrees() == before


def test_the_figures_of_trees_that_simulate_differently_are_shown_side_by_side() -> None:
    policies = [("one pod per job", {}), ("reuse", {})]
    same = [30, 20.0, 40.0, 60.0, 900, 120, 8]
    other = [30, 22.5, 41.0, 60.0, 870, 100, 8]
    rounds = [([{"simulated": same}, {"simulated": same}], [{"simulated": same}, {"simulated": other}])]
    lines = sim_ab.differences("abc123", policies, rounds)
    assert [line.split(" | ")[:2] for line in lines[3:]] == [["| reuse", "abc123"], ["| reuse", "this tree"]]
    assert "| 22.5 s | 41.0 s | 60.0 s | 870 | 100 | 8 |" in lines[-1]
    assert sim_ab.differences("abc123", policies[:1], [([{"simulated": same}], [{"simulated": same}])]) == []
