"""A ReuseSchedule period that starts in the morning builds its warm pool from keys banked the evening
before, when the server's registration keys live that long, and only then.

The stack's GoCD issues keys as `EphemeralAutoRegisterKeyService` does, valid `key_ttl_s` after issue, and
refuses a pod whose key it no longer knows (gocd_model.py); the cluster profile's
`auto_register_key_expiry` is the plugin's statement of that lifetime.
"""

from __future__ import annotations

from datetime import UTC, datetime

from elastic_agent.gocd.messages import cluster_profile
from elastic_agent.pool import labels
from elastic_agent.pool.key_lifetime import WARM_POOL
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import annotation, pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed, run_to_idle, virtual_stack

EVENING = datetime(2023, 11, 14, 21, 0, tzinfo=UTC).timestamp()  # the stack's Tuesday, 21:00
MORNING = datetime(2023, 11, 15, 8, 0, tzinfo=UTC).timestamp()  # Wednesday, 08:00
WARM = '[{"periods": ["* 8-17 * * mon-fri"], "MinIdlePods": 3}]'


def _evening_then_morning(lifetime: str, lifetime_s: float) -> tuple[VirtualStack, dict[str, str], str]:
    """Jobs served by one reused pod at 21:00 (their create-agent keys banked), then the night, up to
    08:00:01 the next morning. Agents poll slowly so that create-agent reaches the backend before the idle
    pod takes the job, and its key is banked."""
    stack = virtual_stack(boot_delay=5, get_work_delay_s=30, get_work_interval_s=30, key_ttl_s=lifetime_s)
    cluster = stack.cluster_profile(idle_timeout="10m", auto_register_key_expiry=lifetime)
    profile = reuse_profile(stack, ReuseSchedule=WARM)
    stack.run_for(EVENING - stack.clock.now())
    pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster, name="first"))
    for n in range(4):
        completed(stack, schedule(stack, profile, cluster=cluster, name=f"served-{n}"))
    assert len(stack.backend.keys) >= 3, "the served jobs' keys are banked"
    stack.run_until(lambda: pod not in pod_names(stack), 30 * 60, "the evening's pod to retire")
    stack.run_for(MORNING + 1 - stack.clock.now())
    return stack, cluster, pod


def test_keys_that_live_twelve_hours_warm_the_morning_pool_from_the_evening_before() -> None:
    stack, _, _ = _evening_then_morning("12h", 12 * 3600.0)
    warm = pod_names(stack)
    assert len(warm) == 3, "the 08:00 period's three warm pods, from the evening's keys"
    stamps = {float(annotation(stack, name, labels.ANN_CREATED_AT) or 0) for name in warm}
    assert stamps == {MORNING}, "at the period's start, before any job of the day"
    stack.run_for(60)
    assert stack.gocd.refusals == [], "GoCD still knew every key"
    registered = {attempt.pod_name for attempt in stack.gocd.registrations if attempt.at >= MORNING}
    assert registered == warm, "all three registered"


def test_keys_that_live_thirty_minutes_leave_the_morning_pool_cold_and_say_so() -> None:
    stack, cluster, _ = _evening_then_morning("30m", 30 * 60.0)
    assert pod_names(stack) == set(), "no key outlives a night at GoCD's default lifetime"
    pool = stack.backend.known_pool(cluster_profile(cluster))
    assert pool is not None
    shortages = pool.state.shortages.current(stack.clock.now())
    lacking = [short for short in shortages if short.source == WARM_POOL]
    assert [short.pods for short in lacking] == [3], "the three wanted pods are counted as lacking keys"
