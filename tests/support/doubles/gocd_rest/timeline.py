"""How a job run's state transitions fall in time, as GoCD records them (domain JobInstance.changeState,
one `buildstatetransitions` row per state): Scheduled when the stage is scheduled; Assigned when an agent
takes it, after a wait that is mostly a few seconds (an idle agent, or GoCD's 5 s scheduling tick) and
sometimes tens of seconds (an elastic agent being started); Preparing and Building shortly after (the
agent's checkout); Completing shortly before Completed; Completed at Assigned plus the run's duration,
so the time the job held its agent is exactly the trace's duration.

`cut` makes a run what the server shows at `now`: the transitions not yet happened are dropped, and a
run not completed has no result yet (JobResult.Unknown).
"""

from __future__ import annotations

import random
import uuid

from tests.support.doubles.gocd_rest.world import (
    ASSIGNED,
    BUILDING,
    COMPLETED,
    COMPLETING,
    PREPARING,
    SCHEDULED,
    UNKNOWN,
    JobRun,
    Transition,
)

SHORT_WAIT_S = (1.0, 8.0)
LONG_WAIT_S = (10.0, 60.0)
LONG_WAIT_SHARE = 0.15


def agent_wait_ms(rng: random.Random) -> int:
    low, high = LONG_WAIT_S if rng.random() < LONG_WAIT_SHARE else SHORT_WAIT_S
    return round(rng.uniform(low, high) * 1000)


def agent_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def transitions(scheduled_ms: int, assigned_ms: int, duration_ms: int) -> list[Transition]:
    """The six transitions of a run that got its agent at `assigned_ms` and held it `duration_ms`."""
    preparing = assigned_ms + min(300, duration_ms // 20)
    building = preparing + min(2000, duration_ms // 10)
    completed = assigned_ms + duration_ms
    completing = max(building, completed - min(1000, duration_ms // 20))
    return [
        Transition(SCHEDULED, scheduled_ms),
        Transition(ASSIGNED, assigned_ms),
        Transition(PREPARING, preparing),
        Transition(BUILDING, building),
        Transition(COMPLETING, completing),
        Transition(COMPLETED, completed),
    ]


def cut(job: JobRun, now_ms: int) -> JobRun:
    """The run as the server shows it at `now_ms` (its Scheduled transition is not later)."""
    kept = [t for t in job.transitions if t.at_ms <= now_ms]
    if len(kept) < len(job.transitions):
        job.transitions = kept
        job.result = UNKNOWN
        if job.time_of(ASSIGNED) is None:
            job.agent_uuid = None
    return job
