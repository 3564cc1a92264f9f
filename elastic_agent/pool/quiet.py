"""When a server-ping could next do something to a pool that nothing else changes meanwhile.

Every rule of the ping that reads the clock compares `now` with a time the state keeps: an idle pod's
expiry (its IdleTimeout, or a ReuseSchedule period's), the grace after an assignment, a pod's
max_pod_lifetime, the forgetting of waiting jobs, recipes and pods gone recently. A ping that found
nothing to do finds nothing until the earliest of those times, so long as no request, watch event or
call has changed the state in between: the advisor's simulation skips the pings of such stretches
(simulation/quiet_pings.py). Registration keys need no time here: they only expire, so a ping that
could not use one cannot later either.

Conservative by construction: while anything is under way (a pod booting, retiring or failed, a write
unwritten, a call failing, a broken profile held) the answer is `now`, the ping is not skipped. The
answer is a decision on the state, as reaping.py's are: the caller holds the pool's lock.
"""

from __future__ import annotations

import math

from elastic_agent.pool.reaping import ASSIGNMENT_GRACE_S
from elastic_agent.pool.records import PodState
from elastic_agent.pool.state import PoolState


def quiet_until(state: PoolState, now: float) -> float:
    """The earliest clock time at or after `now` at which a ping may act on this state, asked after a
    ping at `now` (times already past were that ping's to act on); infinity when none would (clock
    seconds)."""
    if not state.at_rest():
        return now
    settings = state.settings
    times = [state.next_forgetting()]
    for record in state.records():
        if record.deleting or record.failed or not record.registered or record.state in _UNDER_WAY:
            return now
        if record.state == PodState.BUSY:
            times.append(state.assigned_at(record.name, record.state_since) + ASSIGNMENT_GRACE_S)
        elif record.reuse:
            times.append(record.state_since + record.knobs(now, settings.idle_timeout).idle_timeout)
        else:
            times.append(record.state_since + settings.idle_timeout)
        if record.schedule is not None:  # its own copy: the profile's may have changed since
            change = record.schedule.next_change(now)
            times.append(math.inf if change is None else change)
        if settings.max_pod_lifetime:
            times.append(record.created_at + settings.max_pod_lifetime)
    return min((t for t in times if t >= now), default=math.inf)


_UNDER_WAY = (PodState.BOOTING, PodState.RETIRING)
