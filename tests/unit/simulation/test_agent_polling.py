"""When an idle agent asks for work, in the simulated GoCD server and in the stand-in agent: gocd/gocd's
`AgentWorkRetrievalScheduler` with Spring's `ExponentialBackOff` from agent.properties (the first
get-work at once, then 1 s, growing 1.5x in whole milliseconds, up to 10 s; begun anew only after a
job, never after a poll without work), and the loop of agents before GoCD 25.4.0, which slept one step
before every get-work, the one after a job included."""

from __future__ import annotations

import threading
from itertools import pairwise
from typing import Any

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.simulation.gocd_inprocess import InProcessGoCD
from elastic_agent.simulation.gocd_model import GoCDConfig, JobState, SimulatedGoCD
from elastic_agent.simulation.gocd_timing import PollBackOff
from tests.support.doubles.standin_agent import Agent, Refused, Settings, WorkBackOff, main
from tests.support.scripted_gocd import START, ScriptedPlugin, agent_env, key_for, schedule

# Spring's execution in milliseconds: 1000, (long) 1500.0, (long) 2250.0, (long) 3375.0, (long) 5062.5,
# (long) 7593.0, then min(11389, 10000) for ever.
GOCD_WAITS_S = [1.0, 1.5, 2.25, 3.375, 5.062, 7.593, 10.0, 10.0, 10.0]


def poll_times(plugin: ScriptedPlugin, clock: ManualClock, agent_id: str) -> list[float]:
    """Record the instants `agent_id` asks should-assign-work (one entry per poll, not per job asked)."""
    times: list[float] = []

    def record(name: str, body: dict[str, Any]) -> None:
        asked = name == "should-assign-work" and body["agent"]["agent_id"] == agent_id
        if asked and (not times or times[-1] != clock.now()):
            times.append(clock.now())

    plugin.on_request = record
    return times


def gaps(times: list[float]) -> list[float]:
    return [round(later - earlier, 6) for earlier, later in pairwise(times)]


def test_the_default_back_off_is_gocds_agent_properties_in_whole_milliseconds() -> None:
    config = GoCDConfig()
    backoff = PollBackOff.of(config.get_work_delay_s, config.get_work_multiplier, config.get_work_interval_s)
    assert backoff.delays_s(len(GOCD_WAITS_S)) == GOCD_WAITS_S
    standin = WorkBackOff(1.0, 1.5, 10.0)  # the stand-in's defaults (Settings.from_env)
    assert [standin.next_s() for _ in GOCD_WAITS_S] == GOCD_WAITS_S


def test_a_new_agent_asks_for_work_at_once_then_after_1_s_growing_1_5x_up_to_10_s() -> None:
    clock, plugin = ManualClock(START), ScriptedPlugin()
    gocd = SimulatedGoCD(clock, plugin)
    job = schedule(gocd, "refused")  # the plugin says no to it: the agent keeps asking
    gocd.advance_to(START + 5)
    asked = poll_times(plugin, clock, "pod-1")
    gocd.agent_started("pod-1", agent_env(key_for(plugin, job.job_id), "pod-1"))
    gocd.advance_to(START + 5 + 120)

    assert asked[0] == START + 5, "the first get-work comes as the agent registers"
    assert gaps(asked)[: len(GOCD_WAITS_S)] == GOCD_WAITS_S
    assert set(gaps(asked)[len(GOCD_WAITS_S) :]) == {10.0}, "10 s for ever after"


def test_after_a_job_the_agent_asks_at_once_and_its_back_off_begins_anew() -> None:
    clock, plugin = ManualClock(START), ScriptedPlugin()
    gocd = SimulatedGoCD(clock, plugin)
    first = schedule(gocd, "first", duration_s=100.0)
    schedule(gocd, "refused")
    plugin.assign = lambda body: body["job_identifier"]["job_id"] == first.job_id
    gocd.advance_to(START + 5)
    gocd.agent_started("pod-1", agent_env(key_for(plugin, first.job_id), "pod-1"))
    gocd.step()
    assert gocd.job(first.job_id).assigned_at == START + 5
    asked = poll_times(plugin, clock, "pod-1")
    gocd.advance_to(START + 105 + 60)

    assert gocd.job(first.job_id).state is JobState.COMPLETED
    assert asked[0] == START + 105, "asked again the instant the job ended"
    assert gaps(asked)[:7] == GOCD_WAITS_S[:7], "from 1 s again, not from where it was before the job"
    names = [name for name, _ in plugin.requests]
    completion = names.index("job-completion")
    assert names[completion + 1] == "should-assign-work", "the job-completion reached the plugin first"


@pytest.mark.parametrize("model", [SimulatedGoCD, InProcessGoCD])
def test_polls_without_work_do_not_begin_the_back_off_anew(model: type[SimulatedGoCD]) -> None:
    """Registered at START + 2 with nothing to do, the agent got no work at every poll (GoCD's NoWork:
    `NOTHING_TO_DO`), so its back-off went on: 0, 1, 2.5, ... 20.78, then every 10 s. A job admitted at
    the tick of START + 65 is asked about at its poll of START + 72.78, not at once. The same when the
    in-process server skips the polls that ask nothing."""
    clock, plugin = ManualClock(START), ScriptedPlugin()
    gocd = model(clock, plugin)
    if isinstance(gocd, InProcessGoCD):
        gocd.allow_skipping(True)
    gocd.advance_to(START + 2)
    asked = poll_times(plugin, clock, "pod-1")
    gocd.agent_started("pod-1", agent_env(gocd.issue_key(0), "pod-1"))
    gocd.advance_to(START + 61)
    schedule(gocd, "late")
    gocd.advance_to(START + 100)

    assert asked == [pytest.approx(START + at) for at in (72.78, 82.78, 92.78)]


class CountedStop(threading.Event):
    """The stand-in's stop event: records each wait and stops the agent after `waits` of them."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.waited: list[float] = []
        self._left = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.waited.append(timeout if timeout is not None else -1.0)
        self._left -= 1
        if self._left <= 0:
            self.set()
        return self.is_set()


def test_the_standin_agent_waits_as_gocds_agent_loop_does() -> None:
    """As gocd/gocd's AgentWorkRetrievalSchedulerTest: failed and empty attempts back off together,
    each job restarts the back-off and is followed by an attempt at once."""
    answers: list[Any] = [None, None, Refused(503, "busy"), None, "BuildWork", "BuildWork", None, None, None]
    stop = CountedStop(waits=7)
    settings = Settings.from_env({"GO_EA_SERVER_URL": "http://gocd.example.test/go"})
    agent = Agent(settings, stop)
    jobs: list[dict[str, Any]] = []

    def remoting(action: str, request_type: str, status: str = "Idle", **members: Any) -> Any:
        if action == "get_cookie":
            return "cookie"
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"type": "BuildWork", "assignment": {"n": len(jobs)}} if answer == "BuildWork" else answer

    agent.remoting = remoting  # type: ignore[method-assign]
    agent.run_job = jobs.append  # type: ignore[method-assign]
    agent.work_loop()

    assert stop.waited == [1.0, 1.5, 2.25, 3.375, 1.0, 1.5, 2.25]
    assert jobs == [{"n": 0}, {"n": 1}] and answers == []


def test_a_standin_back_off_that_cannot_grow_stops_the_agent_with_a_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GO_EA_SERVER_URL", "http://gocd.example.test/go")
    monkeypatch.setenv("STANDIN_WORK_MULTIPLIER", "0.5")
    assert main() == 2
    assert "work back-off needs" in capsys.readouterr().err


def _polls_around_a_job(model: type[SimulatedGoCD], waits_first: bool) -> tuple[list[float], list[float]]:
    """An agent registered at START + 5 runs one 100-s job, then finds nothing to do: its polls from its
    registration until the job, and from the job's end on."""
    clock, plugin = ManualClock(START), ScriptedPlugin()
    gocd = model(clock, plugin, GoCDConfig(get_work_waits_first=waits_first))
    if isinstance(gocd, InProcessGoCD):
        gocd.allow_skipping(True)
    first = schedule(gocd, "first", duration_s=100.0)
    schedule(gocd, "refused")
    plugin.assign = lambda body: body["job_identifier"]["job_id"] == first.job_id
    gocd.advance_to(START + 5)
    registered = poll_times(plugin, clock, "pod-1")
    gocd.agent_started("pod-1", agent_env(key_for(plugin, first.job_id), "pod-1"))
    gocd.advance_to(START + 10)
    assigned = gocd.job(first.job_id).assigned_at
    assert assigned is not None
    after = poll_times(plugin, clock, "pod-1")
    gocd.advance_to(assigned + 100 + 30)
    assert gocd.job(first.job_id).state is JobState.COMPLETED
    return registered, [at - (assigned + 100) for at in after]


@pytest.mark.parametrize("model", [SimulatedGoCD, InProcessGoCD])
def test_a_current_agent_asks_at_once_after_a_job_and_one_before_gocd_25_4_a_step_later(
    model: type[SimulatedGoCD],
) -> None:
    """GoCD 25.4.0 (gocd/gocd 5ff027acc5) moved the back-off's sleep after a get-work without a job;
    before, from 23.1.0, `AgentWorkRetrievalScheduler.run` slept `nextBackOff()` before every get-work,
    so a freshly started back-off cost one initial delay after registering and after each job."""
    registered_now, after_job_now = _polls_around_a_job(model, waits_first=False)
    registered_old, after_job_old = _polls_around_a_job(model, waits_first=True)

    assert registered_now[0] == START + 5 and registered_old[0] == START + 6, "registered at START + 5"
    assert after_job_now[:3] == [0.0, 1.0, 2.5], "at once, then the back-off from its start"
    assert after_job_old[:3] == [1.0, 2.5, 4.75], "the same sleeps, each before its get-work"


def test_a_standin_agent_told_it_is_older_sleeps_before_each_get_work() -> None:
    """The stand-in's STANDIN_WORK_WAITS_FIRST loop: the same back-off, each sleep before its attempt, so
    a job is followed by the initial delay rather than an attempt at once."""
    answers: list[Any] = [None, None, "BuildWork", None]
    stop = CountedStop(waits=5)
    env = {"GO_EA_SERVER_URL": "http://gocd.example.test/go", "STANDIN_WORK_WAITS_FIRST": "true"}
    agent = Agent(Settings.from_env(env), stop)
    attempts: list[float] = []

    def remoting(action: str, request_type: str, status: str = "Idle", **members: Any) -> Any:
        if action == "get_cookie":
            return "cookie"
        attempts.append(len(stop.waited))
        answer = answers.pop(0)
        return {"type": "BuildWork", "assignment": {}} if answer == "BuildWork" else answer

    agent.remoting = remoting  # type: ignore[method-assign]
    agent.run_job = lambda assignment: None  # type: ignore[method-assign]
    agent.work_loop()

    assert stop.waited == [1.0, 1.5, 2.25, 1.0, 1.5], "the job restarted the back-off at its first step"
    assert attempts == [1, 2, 3, 4], "every attempt, the one after the job included, came after a sleep"
