"""The backend's part of the fault matrix, short versions, on the real kube-apiserver
with the backend as its own process (tests/support/fault_backend_churn.py): killed with SIGKILL halfway
through a retirement, and GoCD's callbacks failing for two minutes of scaled time. Each case runs during a
churn of a reusing and a one-pod-per-job profile, and ends with every job run, GoCD's invariants held, pods
and agents matching, reuse resumed, and nothing left after the idle timeout. Then the fault injection itself
(a fault that does not happen proves nothing), and the regression test of the defect the matrix found.

benchmarks/fault_matrix_backend.py runs the long versions against a baseline and reports the figures."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
import requests

from elastic_agent.clock import ManualClock
from elastic_agent.simulation.gocd_callbacks import DISABLE_AGENTS, LIST_AGENTS, CallbackServer
from elastic_agent.simulation.gocd_model import SimulatedGoCD
from elastic_agent.simulation.stack import Stack, SwitchableTransport
from tests.support.control_plane import ControlPlane
from tests.support.doubles.gocd_callback_faults import CallbackFaults, callback_faults_of
from tests.support.fault_backend_churn import (
    CallbackOutage,
    CaseResult,
    Churn,
    KillDuringRetirement,
    run_case,
)
from tests.support.live_stack import wait_until
from tests.support.real_kube_fixtures import real_kube, real_kube_binaries
from tests.support.reuse_helpers import completed, run_to_idle
from tests.support.stack_helpers import pod_names, reuse_profile, schedule

__all__ = ["real_kube", "real_kube_binaries"]  # fixtures, used by name

SHORT = Churn(bursts=3, jobs_per_burst=6, fault_after=1)
HEADERS = {"Authorization": "Bearer t", "X-GoCD-API-Version": "1.0"}


@pytest.fixture
def callbacks() -> Iterator[CallbackServer]:
    gocd = SimulatedGoCD(ManualClock(), SwitchableTransport())
    server = CallbackServer(gocd, token="t", faults=CallbackFaults())
    server.start()
    yield server
    server.stop()


def call(server: CallbackServer, api: str, body: object = None, timeout_s: float = 30.0) -> requests.Response:
    data = json.dumps(body) if body is not None else None
    return requests.post(f"{server.url}/gocd/server/{api}", headers=HEADERS, data=data, timeout=timeout_s)


# ---- the fault injection itself: a fault that does not happen proves nothing ------------------------


def test_a_503_outage_answers_every_callback_503_until_it_recovers(callbacks: CallbackServer) -> None:
    callback_faults_of(callbacks).outage("503")
    assert call(callbacks, LIST_AGENTS).status_code == 503
    callback_faults_of(callbacks).recover()
    assert call(callbacks, LIST_AGENTS).status_code == 200
    assert [c.outcome for c in callback_faults_of(callbacks).outcomes()] == ["503", "200"]


def test_a_hung_callback_gets_no_answer_and_its_connection_closes_when_the_outage_ends(
    callbacks: CallbackServer,
) -> None:
    callback_faults_of(callbacks).outage("hang")
    failures: list[BaseException] = []

    def hung_call() -> None:
        try:
            call(callbacks, LIST_AGENTS, timeout_s=60)
        except requests.RequestException as error:
            failures.append(error)

    caller = threading.Thread(target=hung_call)
    caller.start()
    caller.join(1.0)
    assert caller.is_alive(), "no answer while the outage lasts"
    callback_faults_of(callbacks).recover()
    caller.join(30)
    # Closed at the outage's end, not left open until the caller's own timeout (60 s here, 10 s in the
    # backend): a server keeping the connection for a next request would hold the caller that long.
    assert not caller.is_alive()
    assert isinstance(failures[0], requests.ConnectionError)
    assert call(callbacks, LIST_AGENTS).status_code == 200


def test_a_hook_acts_once_at_the_first_call_it_matches_and_can_drop_that_call(
    callbacks: CallbackServer,
) -> None:
    seen: list[str] = []
    callback_faults_of(callbacks).when(DISABLE_AGENTS, seen.append, after=False, drop=True,
                          condition=lambda body: "pod-2" in body)  # fmt: skip
    assert call(callbacks, DISABLE_AGENTS, [{"agent_id": "pod-1"}]).status_code == 200  # not its call
    with pytest.raises(requests.ConnectionError):
        call(callbacks, DISABLE_AGENTS, [{"agent_id": "pod-2"}])
    assert seen == ['[{"agent_id": "pod-2"}]']
    assert call(callbacks, DISABLE_AGENTS, [{"agent_id": "pod-2"}]).status_code == 200  # once only
    assert [c.outcome for c in callback_faults_of(callbacks).outcomes()] == ["200", "dropped", "200"]


def assert_recovered(result: CaseResult) -> None:
    assert result.evidence == [], result.evidence
    assert result.jobs == SHORT.bursts * SHORT.jobs_per_burst
    assert result.passed == result.jobs, "every job ran (a rerun counts for its job)"
    assert result.violations == [], result.violations
    assert result.mismatches == [], "no pod without an agent, no agent without a pod"
    assert result.reused_pod is not None, "a reuse job ran on an idle pod after the fault"
    assert result.leftovers == [], "no pod or agent left after the idle timeout"
    assert result.health_after == [], "GoCD shows no health message once it is over"


@pytest.mark.slow
@pytest.mark.parametrize("after_disable", [True, False], ids=["after-disable-agents", "before-delete-agents"])
def test_a_backend_killed_halfway_through_a_retirement_is_repaired_by_the_next_process(
    real_kube: ControlPlane, after_disable: bool
) -> None:
    fault = KillDuringRetirement(after_disable)
    result = run_case(real_kube, fault, SHORT)
    assert result.victims, "the kill came during a retirement"
    assert result.repair_s is not None, "the new process deleted the half-retired pods and agents"
    assert_recovered(result)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["503", "hang"])
def test_gocd_callbacks_failing_for_two_minutes_lose_no_job_and_leave_nothing(
    real_kube: ControlPlane, mode: str
) -> None:
    result = run_case(real_kube, CallbackOutage(mode), SHORT)
    assert result.callbacks_failed > 0
    assert result.first_ok_s is not None
    assert_recovered(result)



# ---- defects found by the matrix -----------------------------------------------------------------------


def test_an_idle_pod_whose_agent_is_disabled_in_gocd_is_retired_and_the_next_job_gets_a_new_pod(
    make_stack: Callable[..., Stack],
) -> None:
    """A disabled agent is never given work: its idle pod is no capacity. A backend killed right after
    disable-agents whose retiring mark was not written (its writes in backoff) finds such a pod; so does
    any backend when an operator disables an elastic agent on GoCD's agents page. The pod was counted as
    idle capacity ("no new pod needed") and the profile's next job waited for the idle timeout."""
    stack = make_stack()
    cluster = stack.cluster_profile(idle_timeout="1h")
    profile = reuse_profile(stack)
    pod = run_to_idle(stack, schedule(stack, profile, cluster=cluster))
    stack.gocd.disable_agents([pod])
    # 1 h of idle timeout is a minute of this test: the job must not wait for it.
    job = completed(stack, schedule(stack, profile, cluster=cluster, name="next"), timeout_s=20)
    assert job.agent_id != pod
    wait_until(lambda: pod not in pod_names(stack) and stack.gocd.agent(pod) is None, 10,
               "the disabled agent's pod and agent to be removed")  # fmt: skip
    assert not stack.gocd.invariant_violations()
