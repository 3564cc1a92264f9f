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
