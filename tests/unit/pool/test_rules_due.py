"""A server-ping's decisions say when they are next due (`Plan.due`), and the quiet-ping skipping reads
only that (pool/quiet.py): so over random profiles (IdleTimeout, MinIdlePods, MaxJobsPerPod,
max_pod_lifetime, ReuseSchedule periods), pods, waiting jobs and GoCD agent lists, the decisions made at
any time before the due time are those made at the last evaluation, and a ping skipped before
`quiet_until` would have changed nothing. A short run in virtual time gives the same results with the
quiet pings skipped and with every ping sent.

The worlds bank no registration keys: a key growing too old only takes pods away from a decision, and
is not a time the decisions say they are due at (pool/intents.py, `Plan.due`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from elastic_agent.clock import ManualClock
from elastic_agent.gocd.messages import Agent, JobIdentifier
from elastic_agent.pool import labels, quiet, reaping, warm
from elastic_agent.pool.intents import Create, KeysShort, Mark, Plan, Release, Reserve, Retire, Say
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.keys import RegistrationKeys
from elastic_agent.pool.pods import PodIdentity
from elastic_agent.pool.state import PoolState
from elastic_agent.simulation.inprocess_cluster import InProcessCluster, SimulationKubeStore
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import WorkloadSpec, generate
from profiles.cluster import ClusterProfile
from profiles.schedule import parse_schedule

NOW = 1_700_000_000.0  # Tuesday 2023-11-14, 22:13:20 UTC
NAMESPACE = "ci"
FINGERPRINTS = ("v1:aaa", "v1:bbb")
SCHEDULES = (
    None,
    [{"periods": ["* 23 * * *"], "MinIdlePods": 2, "IdleTimeout": "20m"}],
    [{"periods": ["0-29 * * * *"], "IdleTimeout": "2m", "MaxJobsPerPod": 2}],
    [{"periods": ["* 22 * * mon-fri"], "MinIdlePods": 1}, {"periods": ["45-59 22 * * *"], "MinIdlePods": 0}],
)
LISTED = ("as the pod says", "building", "idle", "disabled", "absent")


@dataclass(frozen=True)
class Pod:
    state: str  # idle | busy | booting
    reuse: bool
    registered: bool
    since: int  # seconds before NOW
    age: int  # seconds between creation and `since`
    idle_timeout: int | None
    min_idle: int
    max_jobs: int | None
    jobs_run: int
    schedule: int  # index into SCHEDULES
    fingerprint: int
    listed: str  # how GoCD's agent list shows its agent (LISTED)


@dataclass(frozen=True)
class World:
    idle_timeout: int
    max_pod_lifetime: int | None
    pods: tuple[Pod, ...]
    waiting: tuple[tuple[int, int, int], ...]  # (fingerprint, MinIdlePods, schedule) of a waiting job


pods = st.builds(
    Pod,
    state=st.sampled_from(("idle", "busy", "booting")),
    reuse=st.booleans(),
    registered=st.sampled_from((True, True, False)),
    since=st.integers(0, 3600),
    age=st.integers(0, 3 * 3600),
    idle_timeout=st.none() | st.sampled_from((60, 300, 600, 1800, 3600)),
    min_idle=st.integers(0, 2),
    max_jobs=st.none() | st.integers(1, 3),
    jobs_run=st.integers(0, 3),
    schedule=st.integers(0, len(SCHEDULES) - 1),
    fingerprint=st.integers(0, len(FINGERPRINTS) - 1),
    listed=st.sampled_from(("as the pod says", *LISTED)),
)
worlds = st.builds(
    World,
    idle_timeout=st.sampled_from((60, 600, 1800, 3600)),
    max_pod_lifetime=st.none() | st.sampled_from((600, 3600, 7200)),
    pods=st.lists(pods, max_size=5).map(tuple),
    waiting=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, len(SCHEDULES) - 1)), max_size=3
    ).map(tuple),
)
# Pods a ping finds nothing to do with more often: registered, idle or busy, listed as they say or (a
# busy one, for a moment after its `true`) idle.
calm_pods = st.builds(
    Pod,
    state=st.sampled_from(("idle", "busy")),
    reuse=st.booleans(),
    registered=st.just(True),
    since=st.integers(0, 1800),
    age=st.integers(0, 4 * 3600),
    idle_timeout=st.none() | st.sampled_from((600, 1800, 3600)),
    min_idle=st.integers(0, 2),
    max_jobs=st.none() | st.integers(2, 4),
    jobs_run=st.integers(0, 1),
    schedule=st.integers(0, len(SCHEDULES) - 1),
    fingerprint=st.integers(0, len(FINGERPRINTS) - 1),
    listed=st.sampled_from(("as the pod says", "as the pod says", "idle")),
)
calm_worlds = st.builds(
    World,
    idle_timeout=st.sampled_from((600, 1800, 3600)),
    max_pod_lifetime=st.none() | st.sampled_from((3600, 7200, 14400)),
    pods=st.lists(calm_pods, max_size=5).map(tuple),
    waiting=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, len(SCHEDULES) - 1)), max_size=2
    ).map(tuple),
)
# How far into the time before the due time a later ping comes, in thousandths of it; and where to look
# when nothing is due (two days: every schedule above changes within one).
shares = st.integers(0, 999)
NEVER_LOOK_S = 2 * 86_400


def schedule_text(index: int) -> str | None:
    entries = SCHEDULES[index]
    return None if entries is None else json.dumps(entries)


def build(world: World) -> tuple[PoolState, dict[str, Agent]]:
    """The pool's state over an in-process cluster, and GoCD's agent list as the world says."""
    clock = ManualClock(NOW)
    store = SimulationKubeStore(clock=clock)
    identity = PodIdentity(server_id="server", cluster="cluster")
    port = InProcessCluster(store, NAMESPACE, identity.selector())
    port.start()
    profile = ClusterProfile(
        go_server_url="https://ci.example.test/go",
        idle_timeout=float(world.idle_timeout),
        max_pod_lifetime=None if world.max_pod_lifetime is None else float(world.max_pod_lifetime),
    )
    state = PoolState(port, identity, profile, clock, RegistrationKeys(clock))
    agents: dict[str, Agent] = {}
    for index, pod in enumerate(world.pods):
        name = f"agent-{index}"
        store.create_pod(NAMESPACE, manifest(name, pod, identity))
        shown = {"building": "Building", "idle": "Idle"}.get(pod.listed)
        if pod.listed == "as the pod says":
            shown = "Building" if pod.state == "busy" else "Idle"
        if pod.listed != "absent" and (pod.registered or pod.listed != "as the pod says"):
            config = "Disabled" if pod.listed == "disabled" else "Enabled"
            agents[name] = Agent(name, shown or "Idle", shown or "Idle", config)
    for number, (fingerprint, min_idle, schedule) in enumerate(world.waiting):
        job = JobIdentifier("app", f"app-{number}", 1, "build", "1", "compile", number + 1)
        text = schedule_text(schedule)
        spec = JobSpec(
            FINGERPRINTS[fingerprint], {}, True, None, float(world.idle_timeout), min_idle, None,
            "https://ci.example.test/go", schedule=None if text is None else parse_schedule(text),
        )  # fmt: skip
        state.book.wait(job, spec, f"key-{number}", NOW)
    state.records()  # the watch's news taken in, as a ping's decisions do
    return state, agents


def manifest(name: str, pod: Pod, identity: PodIdentity) -> dict[str, object]:
    since = NOW - pod.since
    annotations = {
        labels.ANN_STATE: pod.state,
        labels.ANN_STATE_SINCE: f"{since:.3f}",
        labels.ANN_CREATED_AT: f"{since - pod.age:.3f}",
        labels.ANN_REUSE: "true" if pod.reuse else "false",
        labels.ANN_REGISTERED: "true" if pod.registered and pod.state != "booting" else "false",
        labels.ANN_FINGERPRINT: FINGERPRINTS[pod.fingerprint],
        labels.ANN_MIN_IDLE: str(pod.min_idle),
        labels.ANN_JOBS_RUN: str(pod.jobs_run),
    }
    if pod.idle_timeout is not None:
        annotations[labels.ANN_IDLE_TIMEOUT] = str(pod.idle_timeout)
    if pod.max_jobs is not None:
        annotations[labels.ANN_MAX_JOBS] = str(pod.max_jobs)
    text = schedule_text(pod.schedule)
    if text is not None:
        annotations[labels.ANN_SCHEDULE] = parse_schedule(text).text
    return {
        "metadata": {"name": name, "labels": identity.selector(), "annotations": annotations},
        "spec": {"containers": [{"name": "agent", "image": "gocd/agent"}]},
    }


def ping(state: PoolState, agents: Mapping[str, Agent], now: float) -> list[Plan]:
    """The time-dependent decisions of a server-ping (cluster_pool.ClusterPool.reconcile), each on the
    same state: none is committed, so each says what it would do."""
    return [
        reaping.what_gocd_says(state, agents, now, state.change_mark()),
        reaping.retirements(state, agents, now),
        warm.for_waiting_jobs(state, now),
        warm.warm_pool(state, now),
    ]


def what_it_does(plans: list[Plan]) -> list[object]:
    """The plans' effects, without the words (a retirement's reason says how long the pod was idle)
    and without the times of the marks or the reservation tokens, which are new each time."""
    done: list[object] = []
    for intent in (intent for plan in plans for intent in plan.intents):
        if isinstance(intent, Mark):
            state = intent.annotations.get(labels.ANN_STATE)
            done.append(("mark", intent.pod, state, sorted(intent.annotations), sorted(intent.labels)))
        elif isinstance(intent, Retire):
            done.append(("retire", [pod for pod, _ in intent.pods], intent.agents_idle))
        elif isinstance(intent, Create):
            done.append(("create", intent.spec.fingerprint, intent.job, intent.key))
        elif isinstance(intent, Reserve):
            done.append(("reserve", intent.fingerprint))
        elif isinstance(intent, (Release, KeysShort)):
            done.append(intent)
        else:
            assert isinstance(intent, Say), intent  # the ping's decisions plan nothing else here
    return done


def later(now: float, until: float, share: int) -> float:
    """A time at or after `now` and before `until` (`share` thousandths of the way; two days on when
    `until` is infinity), on a whole second."""
    return now + math.floor(min(until - now, NEVER_LOOK_S) * share / 1000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds, share=shares)
def test_the_decisions_of_a_ping_before_their_due_time_are_those_of_the_last_ping(
    world: World, share: int
) -> None:
    state, agents = build(world)
    first = ping(state, agents, NOW)
    due = min(plan.due for plan in first)
    assert due >= NOW
    assume(due > NOW)  # something comes due at this very time: no later time is before it
    at = later(NOW, due, share)
    assert NOW <= at < due
    assert what_it_does(ping(state, agents, at)) == what_it_does(first)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(world=calm_worlds, share=shares)
def test_a_ping_skipped_before_quiet_until_would_have_changed_nothing(world: World, share: int) -> None:
    state, agents = build(world)
    first = what_it_does(ping(state, agents, NOW))
    assume(all(isinstance(done, KeysShort) for done in first))  # the ping at NOW changed nothing
    until = quiet.quiet_until(state, NOW)
    assume(until > NOW)  # something under way: no ping is skipped
    at = later(NOW, until, share)
    assert what_it_does(ping(state, agents, at)) == first


def test_the_retirements_are_next_due_when_a_schedule_period_starts() -> None:
    # From 23:00 the schedule's period keeps two idle pods with an IdleTimeout of 20m; before, the pod,
    # idle past the cluster's 10m, goes. The decision is next due when the period starts.
    world = World(
        idle_timeout=600,
        max_pod_lifetime=None,
        pods=(Pod("idle", True, True, 3000, 0, None, 0, None, 1, 1, 0, "as the pod says"),),
        waiting=(),
    )
    state, agents = build(world)
    plans = ping(state, agents, NOW)
    assert [type(i) for i in plans[1].intents] == [Mark, Retire]  # expired: goes now
    in_period = NOW + 2800.0  # 23:00:00 UTC
    assert min(plan.due for plan in ping(state, agents, in_period - 60)) == in_period


def test_skipping_quiet_pings_gives_the_results_of_sending_every_ping() -> None:
    # Half a day, a ReuseSchedule and a max_pod_lifetime, with and without the skipping.
    schedule = json.dumps([{"periods": ["* 23 * * *"], "MinIdlePods": 2, "IdleTimeout": "20m"}])
    policy = Policy(
        "reuse on a schedule, with a lifetime",
        {"Reuse": "true", "IdleTimeout": "5m", "MinIdlePods": "1", "ReuseSchedule": schedule},
        cluster={"max_pod_lifetime": "2h"},
    )
    trace = generate(WorkloadSpec(jobs=300, days=0.5), seed=5)
    results = []
    for skipping in (False, True):
        simulation = Simulation(trace, policy, SimSettings(seed=1, quiet_pings=skipping))
        result = simulation.run()
        waits = {job.job_id: job.wait_s for job in simulation.model.jobs()}
        pods = sorted(simulation.tracker.created.items())
        # `events` counts the loop's steps, and a skipped ping is none; `wall_s` is the machine's.
        figures = {key: value for key, value in result.numbers().items() if key not in ("wall_s", "events")}
        results.append((figures, waits, pods, simulation.model.stats.pings_skipped))
    (every, every_waits, every_pods, none_skipped), (quiet_, quiet_waits, quiet_pods, skipped) = results
    assert none_skipped == 0 and skipped > 0
    assert len(every_pods) > 0 and all(wait is not None for wait in every_waits.values())
    assert (quiet_, quiet_waits, quiet_pods) == (every, every_waits, every_pods)
