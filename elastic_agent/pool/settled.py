"""Pods a server-ping found nothing to do about, with what that rested on, so that the next ping does
not judge them again while none of it changed.

A ping judges every pod (reaping.py): what GoCD's agent list says of it, and whether it must go. At 5,000
pods that is most of a ping's work, and nearly every pod gets the same answer as at the ping before:
nothing. Each answer depends only on the pod's record, its agent in GoCD's list, a few values of the
pool and the clock, and the decisions say until when the clock cannot change it (`Plan.due`). So a
"nothing" is kept with those inputs, and holds at a later ping while they are the same (the record the
very object, the agent equal) and the clock is still within the time it held for; anything else is
judged again, as every pod was before:

- `told`: what GoCD's list says of the pod (`reaping.what_gocd_says`): nothing, and nothing later with
  time alone (no registration to note, no assignment grace still running, no repair);
- `staying`: no reason to retire it (`reaping._reason_to_retire`) until a time;
- `groups`: no idle pod of a fingerprint past its idle timeout beyond MinIdlePods
  (`reaping._idle_too_long`) until a time, for the same idle pods in the same order.

Each ping keeps only the pods it saw, so this is bounded by the pool's pods. The pool's lock guards it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_agent.gocd.messages import Agent
from elastic_agent.pool.records import PodRecord
from profiles.cluster import ClusterProfile


@dataclass(frozen=True)
class Told:
    """GoCD's list said nothing to do of `record` with `agent` at `since`; for a busy pod, its latest
    `true` was at `assigned` (its grace was over then, and stays over); None for the others."""

    record: PodRecord
    agent: Agent | None
    assigned: float | None
    since: float


@dataclass(frozen=True)
class Staying:
    """No reason to retire `record` with `agent` from `since` until `until`, under `settings`, its
    fingerprint superseded or not as `superseded` says; `due` is the decision's next time for it."""

    record: PodRecord
    agent: Agent | None
    settings: ClusterProfile
    superseded: bool
    since: float
    until: float
    due: float


@dataclass(frozen=True)
class QuietGroup:
    """The idle pods `records` of a fingerprint, in that order, had none past its idle timeout beyond
    MinIdlePods from `since` until `until`, under the cluster's `default_idle_timeout`; `due` is the
    decision's next time for them."""

    records: tuple[PodRecord, ...]
    default_idle_timeout: float
    due: float
    since: float
    until: float


@dataclass
class SettledPods:
    """One pool's verdicts of nothing to do, per pod (per fingerprint for the idle groups)."""

    told: dict[str, Told] = field(default_factory=dict)
    staying: dict[str, Staying] = field(default_factory=dict)
    groups: dict[str, QuietGroup] = field(default_factory=dict)
