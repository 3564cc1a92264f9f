"""A pod creation that met a refused connection sent nothing, so its registration key is still unused: the
waiting job keeps it and gets its pod at the first ping once the API answers, not at GoCD's re-send two
minutes later. A creation that may have reached the server keeps its key spent (keys are single-use).

In virtual time, with the in-process port made unreachable (it refuses every call, as a stopped
kube-apiserver's port does); the failures' classes are checked against urllib3's own exceptions."""

from __future__ import annotations

from typing import Any

import pytest
import urllib3

from benchmarks import outage_waits
from elastic_agent.kube.outage import never_connected
from elastic_agent.kube.port import Unreachable
from elastic_agent.simulation.harness import VirtualStack
from elastic_agent.simulation.inprocess_cluster import InProcessCluster
from tests.stack_helpers import reuse_profile, schedule
from tests.virtual_helpers import assigned, completed, virtual_stack

RESEND_S = 120.0  # GoCDConfig.job_starvation_timeout_s: GoCD sends create-agent again after this


def _port(stack: VirtualStack) -> InProcessCluster:
    if not stack.backend.pools():  # the pool is made at the first request: a job of one pod makes it
        completed(stack, schedule(stack, stack.elastic_profile(), name="first", duration=1))
    (pool,) = stack.backend.pools()
    port = pool.port
    assert isinstance(port, InProcessCluster)
    return port


def _job_created_during_an_outage(stack: VirtualStack) -> tuple[int, float]:
    """A reuse job whose create-agent meets the outage; the outage ends 10 s later. Its id and the end."""
    profile = reuse_profile(stack)
    port = _port(stack)
    port.unreachable = True
    job = schedule(stack, profile, duration=20)
    stack.run_for(10)
    assert stack.gocd.job(job.job_id).create_agent_sends == 1, "create-agent was sent during the outage"
    assert not stack.pods(), "nothing could be created during the outage"
    port.unreachable = False
    return job.job_id, stack.clock.now()


def test_reuse_job_whose_creation_was_refused_gets_its_pod_before_gocds_resend() -> None:
    stack = virtual_stack()
    job_id, recovered_at = _job_created_during_an_outage(stack)
    job = assigned(stack, stack.gocd.job(job_id), within_s=RESEND_S)
    assert job.assigned_at is not None and job.assigned_at - job.scheduled_at < RESEND_S
    assert job.create_agent_sends == 1, "no re-send was needed"
    assert stack.gocd.stats.registrations_refused == 0, "the job's key registered its pod"
    assert job.assigned_at - recovered_at <= stack.gocd.config.ping_interval_s + 30


def test_every_job_refused_during_a_two_minute_outage_is_assigned_within_a_boot_of_its_end() -> None:
    # The benchmark's scenario (16 jobs, two every 15 s). The backend is woken when the cluster answers
    # again (Backend.next_wake), not at the next server-ping (60 s apart): each job kept its key, so its
    # pod is created then and the job is assigned after a boot (5 s) and GoCD's scheduler tick (5 s).
    result = outage_waits.measure(outage_waits.ROOT)
    assert result["jobs"] == 16 and result["pods"] == 16  # the warm-up's idle pod served one of them
    assert result["max_s"] <= 5 + 5 + 1
    assert result["resends"] <= 6, "re-sent during the outage only (14 when a refused creation spent keys)"


def test_job_key_stays_spent_when_the_creation_may_have_reached_the_server() -> None:
    stack = virtual_stack()
    port = _port(stack)
    create = port.create_pod
    tries: list[str] = []

    def reset_after_sending(manifest: dict[str, Any]) -> Any:
        if not tries:
            tries.append(manifest["metadata"]["name"])
            raise Unreachable("connection reset by peer after the request was written", sent=True)
        return create(manifest)

    port.create_pod = reset_after_sending  # type: ignore[method-assign]
    job = schedule(stack, reuse_profile(stack), duration=20)
    done = assigned(stack, job, within_s=3 * RESEND_S)
    assert tries, "the first creation failed"
    assert done.create_agent_sends >= 2, "the job waited for GoCD's re-send and its new key"
    assert stack.gocd.stats.registrations_refused == 0, "no pod was given a key that may be spent"


def test_banked_key_of_a_refused_warm_pool_creation_goes_back_to_the_bank() -> None:
    stack = virtual_stack()
    profile = reuse_profile(stack, MinIdlePods="2")
    completed(stack, schedule(stack, profile, duration=5))
    (pool,) = stack.backend.pools()
    port = _port(stack)
    assert len(pool.state.keys) == 0 and len(stack.pods()) == 1, "one idle pod; the warm pool wants one more"
    pool.state.keys.offer("banked-key-of-an-earlier-create-agent")
    port.unreachable = True
    assert pool.top_up_warm_pool() == []
    assert pool.state.keys.take() == "banked-key-of-an-earlier-create-agent", "a refused creation used no key"
    port.unreachable = False


@pytest.mark.parametrize(
    ("error", "connected"),
    [
        (urllib3.exceptions.NewConnectionError(None, "Connection refused"), False),  # type: ignore[arg-type]
        (urllib3.exceptions.ConnectTimeoutError("connect timed out"), False),
        (ConnectionRefusedError(111, "Connection refused"), False),
        (urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")), True),
        (urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"), True),  # type: ignore[arg-type]
        (ConnectionResetError(104, "Connection reset by peer"), True),
    ],
)
def test_only_a_failure_to_connect_counts_as_nothing_sent(error: Exception, connected: bool) -> None:
    assert never_connected(error) is not connected
    retried = urllib3.exceptions.MaxRetryError(None, "/api/v1/pods", error)  # type: ignore[arg-type]
    assert never_connected(retried) is not connected
