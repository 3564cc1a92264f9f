"""When a server-ping could next do something to a pool that nothing else changes meanwhile.

A ping's decisions (reaping.py, warm.py) each say when they are next due with their plan (`Plan.due`):
the nearest time still ahead that they compare `now` with. A ping that found nothing to do finds nothing
until the earliest of those times, or until the state forgets something it keeps (waiting jobs, recipes,
pods gone recently), so long as no request, watch event or call has changed the state in between: the
advisor's simulation skips the pings of such stretches (simulation/quiet_pings.py). The times are not
restated here; the decisions are asked, so a rule cannot change without the skipping knowing.

The decisions are asked with GoCD's agent list as the state has it (every registered pod listed, enabled,
building while busy): a ping that changed nothing saw a list that agreed with the state, or one that
differs only where the decisions' times do not depend on it (an assignment grace is due whatever the
list says).

Conservative by construction: while anything is under way (a pod booting, retiring or failed, a write
unwritten, a call failing, a broken profile held) the answer is `now`, the ping is not skipped: what
those wait for is not on the clock (a pod's log, the watch, the API server). The answer is a decision on
the state, as reaping.py's are: the caller holds the pool's lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from elastic_agent.gocd.messages import Agent
from elastic_agent.pool import reaping, warm
from elastic_agent.pool.records import PodRecord, PodState
from elastic_agent.pool.state import PoolState


def quiet_until(state: PoolState, now: float) -> float:
    """The earliest clock time at or after `now` at which a ping may act on this state, asked after a
    ping at `now` (times already past were that ping's to act on); infinity when none would (clock
    seconds)."""
    if not state.at_rest():
        return now
    records = state.records()
    if any(r.deleting or r.failed or not r.registered or r.state in _UNDER_WAY for r in records):
        return now
    agents = as_listed(records)
    plans = (
        reaping.what_gocd_says(state, agents, now, state.change_mark()),
        reaping.retirements(state, agents, now),
        warm.for_waiting_jobs(state, now),
        warm.warm_pool(state, now),
    )
    forgetting = state.next_forgetting()
    return min([forgetting if forgetting >= now else math.inf, *(plan.due for plan in plans)])


def as_listed(records: Iterable[PodRecord]) -> dict[str, Agent]:
    """GoCD's agent list as the state has it: each registered pod's agent, enabled, building while the
    pod is busy (the names as in GoCD's list-agents answer: gocd/messages.py)."""
    listed: dict[str, Agent] = {}
    for record in records:
        if record.registered:
            state = "Building" if record.state == PodState.BUSY else "Idle"
            listed[record.name] = Agent(record.name, state, state, "Enabled")
    return listed


_UNDER_WAY = (PodState.BOOTING, PodState.RETIRING)
