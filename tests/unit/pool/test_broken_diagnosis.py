"""The pure decisions about broken pods: what a pod's status says (kube/pod_status.py), whether a pod
that has not registered is broken (pool/broken.py), an OOM kill under a job, and the per-fingerprint
hold with its back-off (pool/holds.py)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_agent.kube.pod_cache import pod_view
from elastic_agent.kube.pod_status import Condition, ContainerView, Termination, condition, container_views
from elastic_agent.pool import labels
from elastic_agent.pool.broken import GRACE_S, Breakage, diagnose, oom_killed
from elastic_agent.pool.holds import Holds
from elastic_agent.pool.records import PodRecord

CREATED = 1_700_000_000.0
JOB = '{"job_id":7,"job_name":"compile","pipeline_counter":1,"pipeline_label":"1","pipeline_name":"build","stage_counter":"1","stage_name":"stage"}'  # noqa: E501


def pod(
    *,
    waiting: tuple[str, str] | None = None,
    terminated: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    restarts: int = 0,
    scheduled: dict[str, Any] | None = None,
    state: str = "booting",
    registered: bool = False,
    annotations: dict[str, str] | None = None,
    phase: str = "Pending",
    reason: str | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "agent", "image": "gocd/agent:v1", "imageID": "", "ready": False,
                                 "restartCount": restarts, "state": {}}  # fmt: skip
    if waiting is not None:
        container["state"] = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
    if terminated is not None:
        container["state"] = {"terminated": terminated}
    if last is not None:
        container["lastState"] = {"terminated": last}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [container]}
    if reason:
        status["reason"] = reason
    if scheduled is not None:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", **scheduled}]}
    notes = {
        labels.ANN_STATE: state,
        labels.ANN_CREATED_AT: f"{CREATED:.3f}",
        labels.ANN_FINGERPRINT: "v1:abc",
        **({labels.ANN_REGISTERED: "true"} if registered else {}),
        **(annotations or {}),
    }
    return {
        "metadata": {"name": "p", "namespace": "ci", "annotations": notes, "resourceVersion": "1",
                     "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"containers": [{"name": "agent"}]},
        "status": status,
    }


def judged(obj: dict[str, Any], age_s: float) -> Breakage | None:
    view = pod_view(obj)
    return diagnose(view, PodRecord.from_pod(view), CREATED + age_s)


# -- what the status says ---------------------------------------------------------------------------------


def test_container_statuses_are_read_with_their_waiting_and_terminated_states_init_containers_first() -> None:
    status = {
        "initContainerStatuses": [
            {"name": "init", "restartCount": 2,
             "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}},
        ],
        "containerStatuses": [{"name": "agent", "restartCount": 1,
                               "state": {"running": {"startedAt": "2023-11-14T22:13:20Z"}},
                               "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}],
    }  # fmt: skip
    assert container_views(status) == (
        ContainerView("init", 2, "CrashLoopBackOff", "back-off", init=True),
        ContainerView("agent", 1, last_terminated=Termination("OOMKilled", 137)),
    )


def test_malformed_statuses_read_as_absent_rather_than_failing() -> None:
    odd = {"name": "a", "restartCount": True, "state": {"terminated": {"exitCode": "1"}}}
    status = {"containerStatuses": [{"restartCount": 1}, "text", odd]}
    assert container_views(status) == (ContainerView("a", 0, terminated=Termination(None, None)),)
    assert container_views({"containerStatuses": "nope"}) == ()
    assert condition({"conditions": [{"type": "Ready", "status": "True"}]}, "PodScheduled") is None


def test_the_pod_view_carries_the_scheduled_condition_and_the_container_statuses() -> None:
    unschedulable = {"status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}
    view = pod_view(pod(scheduled=unschedulable))
    assert view.scheduled == Condition("False", "Unschedulable", "0/1 nodes are available")
    waiting = pod_view(pod(waiting=("ImagePullBackOff", 'Back-off pulling image "x"')))
    assert [(c.name, c.waiting_reason) for c in waiting.container_statuses] == [("agent", "ImagePullBackOff")]


# -- broken or not ----------------------------------------------------------------------------------------


AT_ONCE = ["ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError",
           "CrashLoopBackOff"]  # fmt: skip


@pytest.mark.parametrize("reason", AT_ONCE)
def test_reasons_that_do_not_clear_by_themselves_break_a_pod_at_once(reason: str) -> None:
    found = judged(pod(waiting=(reason, f"what {reason} says")), age_s=1.0)
    assert found == Breakage(reason, f"what {reason} says", "agent")
    assert found.text() == f"container agent: {reason}: what {reason} says"


@pytest.mark.parametrize("reason", ["ErrImagePull", "CreateContainerError"])
def test_reasons_that_can_be_transient_break_a_pod_only_once_it_is_thirty_seconds_old(reason: str) -> None:
    obj = pod(waiting=(reason, "rpc error: not found"))
    assert judged(obj, age_s=GRACE_S - 1) is None
    assert judged(obj, age_s=GRACE_S) == Breakage(reason, "rpc error: not found", "agent")


def test_an_unschedulable_pod_is_broken_once_thirty_seconds_old_with_the_schedulers_message() -> None:
    said = {"status": "False", "reason": "Unschedulable", "message": "0/1 nodes: Insufficient memory"}
    obj = pod(scheduled=said)
    assert judged(obj, age_s=29.0) is None
    assert judged(obj, age_s=31.0) == Breakage("Unschedulable", "0/1 nodes: Insufficient memory")


def test_a_pod_still_being_scheduled_or_pulling_or_starting_is_not_broken() -> None:
    assert judged(pod(scheduled={"status": "False", "reason": "SchedulingGated"}), age_s=600) is None
    assert judged(pod(waiting=("ContainerCreating", "")), age_s=600) is None
    assert judged(pod(), age_s=600) is None


def test_an_agent_that_exited_at_start_under_restart_policy_never_is_broken_at_once() -> None:
    obj = pod(terminated={"reason": "Error", "exitCode": 1}, phase="Failed")
    assert judged(obj, age_s=2.0) == Breakage("Error", "exited with code 1", "agent")
    assert judged(pod(terminated={"reason": "Completed", "exitCode": 0}), age_s=2.0) is None


def test_registered_or_working_pods_are_never_judged_whatever_their_status() -> None:
    crash = ("CrashLoopBackOff", "back-off 10s restarting failed container=agent")
    assert judged(pod(waiting=crash, registered=True), age_s=60) is None
    assert judged(pod(waiting=crash, state="busy"), age_s=60) is None
    assert judged(pod(waiting=crash, state="retiring"), age_s=60) is None


def test_what_follows_a_secrets_name_in_kubernetes_message_is_hidden() -> None:
    said = "failed to pull: unexpected status from registry (password=hunter2-long)"
    found = judged(pod(waiting=("ImagePullBackOff", said)), age_s=1.0)
    assert found is not None and "hunter2-long" not in found.text() and "[hidden]" in found.text()


def test_an_evicted_pod_is_the_nodes_trouble_not_a_broken_profile() -> None:
    obj = pod(terminated={"reason": "Error", "exitCode": 137}, phase="Failed", reason="Evicted")
    assert judged(obj, age_s=60) is None


# -- OOM kills under a job ---------------------------------------------------------------------------------


def busy_with_oom(**extra: Any) -> dict[str, Any]:
    notes = {labels.ANN_CURRENT_JOB: JOB, **extra.pop("annotations", {})}
    return pod(state="busy", registered=True, annotations=notes, **extra)


def test_an_oom_kill_under_a_job_is_found_in_the_current_or_the_last_state() -> None:
    current = pod_view(busy_with_oom(terminated={"reason": "OOMKilled", "exitCode": 137}, phase="Failed"))
    killed = oom_killed(current, PodRecord.from_pod(current))
    assert killed is not None
    assert (killed.container, killed.exit_code, killed.told) == ("agent", 137, "7:agent:0")
    restarted = pod_view(busy_with_oom(last={"reason": "OOMKilled", "exitCode": 137}, restarts=1))
    again = oom_killed(restarted, PodRecord.from_pod(restarted))
    assert again is not None and again.told == "7:agent:1"


def test_an_oom_kill_already_told_is_not_told_again_and_other_ends_are_no_oom() -> None:
    told = pod_view(busy_with_oom(last={"reason": "OOMKilled", "exitCode": 137}, restarts=1,
                                  annotations={labels.ANN_OOM_TOLD: "7:agent:1"}))  # fmt: skip
    assert oom_killed(told, PodRecord.from_pod(told)) is None
    error = pod_view(busy_with_oom(last={"reason": "Error", "exitCode": 1}, restarts=1))
    assert oom_killed(error, PodRecord.from_pod(error)) is None
    idle = pod_view(pod(state="idle", registered=True, last={"reason": "OOMKilled", "exitCode": 137}))
    assert oom_killed(idle, PodRecord.from_pod(idle)) is None  # no job to tell


# -- the hold ---------------------------------------------------------------------------------------------


def test_a_first_broken_pod_is_tried_again_at_once_the_second_in_a_row_after_30_s_doubling() -> None:
    holds = Holds()
    delays = []
    now = 0.0
    for _ in range(7):
        hold = holds.failed("fp", "p", "ImagePullBackOff", now)
        delays.append(hold.next_try_at - now)
        now = hold.next_try_at + 5.0  # the pod tried then breaks, and a ping sees it
    assert delays == [0.0, 30.0, 60.0, 120.0, 240.0, 300.0, 300.0]
    held = holds.get("fp")
    assert held is not None and held.since == 0.0 and held.failures == 7


def test_a_held_fingerprint_allows_nothing_before_its_try_then_one_pod_at_a_time() -> None:
    holds = Holds()
    first = holds.failed("fp", "p", "InvalidImageName", 100.0)
    assert holds.allowed("fp", 100.0, trying=0) == 1 and first.next_try_at == 100.0  # at once
    assert holds.allowed("fp", 100.0, trying=1) == 0  # but one at a time
    hold = holds.failed("fp", "p", "InvalidImageName", 160.0)
    assert holds.allowed("fp", hold.next_try_at - 1, trying=0) == 0
    assert holds.allowed("fp", hold.next_try_at, trying=0) == 1
    assert holds.allowed("fp", hold.next_try_at, trying=1) == 0
    assert holds.allowed("another-fingerprint", 100.0, trying=5) is None  # a changed profile: at once


def test_a_success_ends_the_hold_and_unknown_fingerprints_are_forgotten() -> None:
    holds = Holds()
    holds.failed("fp", "p", "CrashLoopBackOff", 0.0)
    holds.failed("gone", "q", "CrashLoopBackOff", 0.0)
    assert holds.succeeded("fp") is not None and holds.get("fp") is None
    holds.forget_except({"fp"}, now=3600.0)
    assert holds.get("gone") is not None  # no pod and nobody waiting, but it broke within the hour
    holds.forget_except({"fp"}, now=3601.0)
    assert len(holds) == 0
    holds.failed("fp", "r", "CrashLoopBackOff", 500.0)
    again = holds.failed("fp", "r", "CrashLoopBackOff", 560.0)
    assert again.failures == 2 and again.next_try_at == 590.0  # the row starts over after the success
