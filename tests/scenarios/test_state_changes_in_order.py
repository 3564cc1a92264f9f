"""A pod's state only moves forward: a late or duplicate job-completion, or GoCD's agent list taken
before a newer change, never undoes what the pod is doing now. In virtual time."""

from __future__ import annotations

from elastic_agent.pool import labels
from elastic_agent.simulation.gocd_records import Job
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode, job_completion_body
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import annotation, reuse_profile, schedule, state
from tests.support.virtual_helpers import assigned, run_to_idle

COMPLETE = REQUEST_PREFIX + "job-completion"


def complete_again(stack: VirtualStack, pod: str, job: Job) -> int:
    """A job-completion GoCD already sent once (or that arrives late), sent by hand."""
    body = job_completion_body(
        pod, job.elastic_profile_properties, job.cluster_profile_properties, job.identifier()
    )
    status, _ = stack.send(COMPLETE, encode(body))
    return status


def test_a_duplicate_job_completion_of_a_pods_previous_job_leaves_it_busy_with_the_current_one() -> None:
    stack = VirtualStack(boot_delay=5)
    profile = reuse_profile(stack)
    first = schedule(stack, profile)
    pod = run_to_idle(stack, first)
    second = assigned(stack, schedule(stack, profile, duration=600))
    assert second.agent_id == pod and state(stack, pod) == "busy"

    assert complete_again(stack, pod, stack.gocd.job(first.job_id)) == 200

    assert state(stack, pod) == "busy", "the pod still runs its second job"
    assert f'"job_id":{second.job_id}' in (annotation(stack, pod, labels.ANN_CURRENT_JOB) or "")
    assert annotation(stack, pod, labels.ANN_JOBS_RUN) == "1", "the first job is counted once"


def test_a_late_job_completion_for_an_idle_pod_changes_nothing() -> None:
    stack = VirtualStack(boot_delay=5)
    profile = reuse_profile(stack)
    job = schedule(stack, profile)
    pod = run_to_idle(stack, job)
    since = annotation(stack, pod, labels.ANN_STATE_SINCE)
    stack.run_for(30)

    assert complete_again(stack, pod, stack.gocd.job(job.job_id)) == 200

    assert state(stack, pod) == "idle"
    assert annotation(stack, pod, labels.ANN_JOBS_RUN) == "1"
    assert annotation(stack, pod, labels.ANN_STATE_SINCE) == since, "its idle time is not reset"


def test_a_ping_whose_agent_list_predates_a_job_completion_does_not_mark_the_pod_busy_again() -> None:
    stack = VirtualStack(boot_delay=5)
    profile = reuse_profile(stack, IdleTimeout="3s")
    job = assigned(stack, schedule(stack, profile, duration=30))
    pod = job.agent_id
    assert pod is not None and state(stack, pod) == "busy"
    [pool] = stack.backend.pools()
    gocd = stack.backend.gocd_servers.for_callback(None)
    # A ping asks GoCD for its agents (taking the change mark first, as server-ping does) ...
    mark = pool.change_mark()
    listed = {agent.agent_id: agent for agent in gocd.list_agents()}
    assert listed[pod].building
    # ... the job completes while the answer is on its way ...
    stack.run_until(lambda: state(stack, pod) == "idle", 120, "the job-completion idling the pod")
    # ... and the ping repairs from its list, which is older than that completion.
    pool.reconcile(listed, gocd, mark)
    stack.settle()

    assert state(stack, pod) == "idle", "the completion's state stands"
    stack.run_for(2 * 60)
    assert state(stack, pod) is None, "and the pod idles out at the next pings, not 30 s later"
