"""A server-ping's judgement of each pod (reaping.py), kept from one ping to the next while what it rested
on is the same (settled.py), against the judgement made afresh: after any sequence of pings and changes
Hypothesis chooses (pods made, changed, failed, deleted; GoCD's list of agents; assignments; superseded
fingerprints; the cluster profile; time passing), `what_gocd_says` and `retirements` plan exactly what
they plan with nothing kept."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_agent.gocd.messages import Agent
from elastic_agent.pool import labels, reaping
from elastic_agent.pool.intents import Plan
from elastic_agent.pool.settled import SettledPods
from elastic_agent.pool.state import PoolState
from profiles.cluster import ClusterProfile
from tests.support.pool_changes import EVENINGS_TEXT, FINGERPRINTS, PODS, World, changes

AGENT_STATES = st.sampled_from([None, "Idle", "Building", "Disabled", "LostContact"])
ping_changes = st.one_of(
    changes,
    st.tuples(st.just("ping"), st.lists(AGENT_STATES, min_size=len(PODS), max_size=len(PODS))),
    st.tuples(st.just("assign"), st.sampled_from(PODS), st.integers(1, 8)),
    st.tuples(st.just("settings"), st.sampled_from(["5m", "10m"]), st.sampled_from(["", "1h"])),
    st.tuples(st.just("reuse knobs"), st.sampled_from(PODS), st.integers(0, 2), st.booleans()),
)


def listed(states: list[str | None]) -> dict[str, Agent]:
    """GoCD's list: a new answer at every ping (new objects), each pod's agent as `states` says."""
    agents = {}
    for name, state in zip(PODS, states, strict=True):
        if state == "Disabled":
            agents[name] = Agent(name, "Idle", "Idle", "Disabled")
        elif state is not None:
            agents[name] = Agent(name, state, state if state != "LostContact" else "Unknown", "Enabled")
    return agents


def afresh(state: PoolState, judge: Any) -> Plan:
    """`judge(state)` with nothing kept from earlier pings, and what was kept put back."""
    kept, state.settled = state.settled, SettledPods()
    try:
        return judge(state)
    finally:
        state.settled = kept


def ping(world: World, agents: dict[str, Agent]) -> None:
    state, now = world.state, world.clock.now()
    with state.lock:
        state.indexed()
        mark = state.change_mark() - 1  # a pod changed since the list was asked for keeps its state

        def says(s: PoolState) -> Plan:
            return reaping.what_gocd_says(s, agents, now, mark)

        def retires(s: PoolState) -> Plan:
            return reaping.retirements(s, agents, now)

        assert says(state) == afresh(state, says)
        assert retires(state) == afresh(state, retires)


@settings(max_examples=300, deadline=None)
@given(st.lists(ping_changes, min_size=10, max_size=60))
def test_a_ping_judges_pods_as_it_would_with_nothing_kept_from_earlier_pings(
    steps: list[tuple[Any, ...]],
) -> None:
    world = World()
    agents: dict[str, Agent] = {}
    for step in steps:
        state = world.state
        if step[0] == "ping":
            agents = listed(step[1])
        elif step[0] == "assign":
            with state.lock:
                state.commit_assignment(step[1], step[2], FINGERPRINTS[0], world.clock.now())
        elif step[0] == "settings":
            properties = {"go_server_url": "https://ci.example.test/go", "idle_timeout": step[1]}
            if step[2]:
                properties["max_pod_lifetime"] = step[2]
            state.commit_settings(ClusterProfile.from_properties(properties))
        elif step[0] == "reuse knobs" and state.port.get(step[1]) is not None:
            notes = {labels.ANN_MIN_IDLE: str(step[2]), labels.ANN_IDLE_TIMEOUT: "120"}
            if step[3]:
                notes[labels.ANN_SCHEDULE] = EVENINGS_TEXT
            with state.lock:
                state.commit_mark(step[1], notes, {})
        else:
            world.apply(step)
        ping(world, agents)
