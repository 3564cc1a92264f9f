"""The cluster report's pods per profile: how many of each profile's pods boot, idle, run a job, retire
or failed, beside the jobs of that profile still waiting for a pod.

Requests name no profile, so a profile is its reuse fingerprint, in the label form every table of the
pages uses (profiles/fingerprint.py `label_form`); profiles that render the same pod share one row, as
they share pods. Read from the same rows as the pods table, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from profiles.fingerprint import label_form

NO_FINGERPRINT = "none yet"  # a pod written before its fingerprint annotation, or by another version


@dataclass(frozen=True)
class ProfileCounts:
    profile: str  # the fingerprint's label form
    reuse: bool
    states: dict[str, int] = field(default_factory=dict)  # state -> pods, in the pages' order
    waiting: int = 0

    @property
    def pods(self) -> int:
        return sum(self.states.values())


def profile_counts(
    pods: Iterable[tuple[str, bool, str]], waiting: Mapping[str, int], states: tuple[str, ...]
) -> list[ProfileCounts]:
    """`pods`: (fingerprint's label form, or "", reuse, state as shown) of each pod; `waiting`: jobs
    waiting per full fingerprint. Most pods first, then by profile."""
    found: dict[str, tuple[bool, dict[str, int]]] = {}
    for profile, reuse, state in pods:
        _, counts = found.setdefault(profile or NO_FINGERPRINT, (reuse, dict.fromkeys(states, 0)))
        counts[state] = counts.get(state, 0) + 1
    jobs: dict[str, int] = {}
    for fingerprint, count in waiting.items():
        if count:
            jobs[label_form(fingerprint)] = jobs.get(label_form(fingerprint), 0) + count
            found.setdefault(label_form(fingerprint), (True, dict.fromkeys(states, 0)))
    rows = [ProfileCounts(key, reuse, counts, jobs.get(key, 0)) for key, (reuse, counts) in found.items()]
    return sorted(rows, key=lambda row: (-row.pods, row.profile))
