"""Pods created outside create-agent: for jobs still waiting after a ping (an idle pod they counted on
was retired, evicted or failed), and the warm pool ahead of demand (MinIdlePods).

Both need a registration key: a waiting job's create-agent brought one that no pod used yet, and the
warm pool uses keys that create-agent calls brought when an existing pod served their job (keys.py), as
old as the pool may use (key_lifetime.py). Each decision plans every creation it wants at once, within
the room the caps leave, and says what it wanted but could not start for want of a key.

Each plan says when its decision is next due (`Plan.due`): a hold's next try, and for the warm pool a
ReuseSchedule's next period change (MinIdlePods in force). A key's age does not count: keys only expire,
so a decision that could not use one cannot later either, and one that could may only start fewer pods.
"""

from __future__ import annotations

import math

from elastic_agent.pool.broken_pods import creatable
from elastic_agent.pool.intents import Create, Intent, KeysShort, Plan, Reserve
from elastic_agent.pool.key_lifetime import WARM_POOL, job_key_usable, usable_keys
from elastic_agent.pool.state import PoolState


def for_waiting_jobs(state: PoolState, now: float) -> Plan:
    """Pods while a fingerprint's waiting jobs outnumber its booting and idle pods, with those jobs'
    unused keys (newest first: it lives longest), so that no job waits for GoCD's two-minute re-send
    because a pod it counted on went away. Only the jobs' own keys: the bank's are the warm pool's, and
    a key is in one of the two, never both. A fingerprint held for broken pods gets its one try at most."""
    view = state.indexed()
    room = state.room(view)
    intents: list[Intent] = []
    due = math.inf
    for fingerprint in state.book.waiting_fingerprints():
        spec = state.book.recipe(fingerprint)
        if spec is None or room <= 0:
            continue
        waiting, supply = state.demand(fingerprint, view)
        wanted = min(waiting - supply, room)
        allowed = creatable(state, fingerprint, view, now)
        due = min(due, state.book.holds.next_try(fingerprint, now))
        wanted = wanted if allowed is None else min(wanted, allowed)
        with_keys = [
            (entry.job, entry.key)
            for entry in state.book.waiting(fingerprint)
            if entry.key and job_key_usable(state, entry.key.since, now)
        ]
        with_keys.sort(key=lambda held: held[1].since, reverse=True)  # stable: ties keep their order
        for job, held in with_keys[: max(0, wanted)]:
            token = ("waiting", job.job_id)
            said = "created pod {pod}: jobs of its profile were still waiting"
            create = Create(token, job, spec, held.key, said, key_since=held.since)
            intents += [Reserve(token, fingerprint), create]
            room -= 1
    return Plan(tuple(intents), due=due)


def warm_pool(state: PoolState, now: float) -> Plan:
    """Pods ahead of demand, with banked keys (those that outlive the pod's auto_register_timeout: keys.py),
    until each fingerprint with MinIdlePods (in force at `now`: a ReuseSchedule's period may want more)
    has that many idle or booting pods beyond its waiting jobs. A superseded fingerprint gets none: its
    pods retire; one whose pods broke gets what its hold allows, one at a time (holds.py: a broken warm
    pod is replaced at once, the second in a row after the hold's wait). What each fingerprint lacks is
    kept from one decision to the next while the state does not change (shortfall.py)."""
    view = state.indexed()
    keys = usable_keys(state)  # asked at every decision: the bank drops its expired keys when asked
    shortfall = state.shortfalls.at(state, view, now)
    short = dict.fromkeys(shortfall.fingerprints, 0)
    room = state.room(view) if shortfall.lacking else 0
    intents: list[Intent] = []
    for fingerprint, spec, more in shortfall.lacking:
        held = creatable(state, fingerprint, view, now)  # a broken fingerprint's one try at a time
        allowed = min(more if held is None else min(more, held), room)
        short[fingerprint] = max(0, allowed - keys)  # the caps' and the hold's limits are not the keys' fault
        for _ in range(max(0, min(allowed, keys))):
            token = object()  # unique: concurrent plans never share a reservation
            said = "created pod {pod} ahead of demand: MinIdlePods of its profile"
            intents += [Reserve(token, fingerprint), Create(token, None, spec, None, said)]
            room, keys = room - 1, keys - 1
    return Plan((*intents, KeysShort(WARM_POOL, short)), due=shortfall.due)
