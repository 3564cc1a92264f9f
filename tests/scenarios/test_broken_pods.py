"""Broken pods are reported within one server-ping, end to end on the simulated GoCD server and the fake
cluster with its simulated kubelet, in virtual time: the waiting job's console and a health message
name Kubernetes' reason and message, the broken pod is deleted, no more pods of its profile pile up,
it is tried again (at once after the first broken pod, after a back-off from the second in a row:
tests/scenarios/test_broken_pods_retry.py) or at once when the profile changes, and an agent OOM-killed under
a job is named in that job's console."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from elastic_agent.pool.cluster_pool import ClusterPool
from elastic_agent.status.pages import render_cluster_status
from tests.support import browser
from tests.support.broken_world import (
    BAD_NAME,
    CRASHING,
    GREEDY,
    HUGE,
    MISSING,
    NO_CONFIG,
    Faults,
    broken_stack,
    console,
    restarting_pod,
)
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import assigned, completed

RESTARTING_POD = restarting_pod(GREEDY)
CRASH_LOOP_POD = restarting_pod(CRASHING)


def waiting_reason(stack: VirtualStack, name: str) -> str | None:
    for pod in stack.pods():
        if pod["metadata"]["name"] == name:
            statuses = pod["status"].get("containerStatuses") or [{}]
            return ((statuses[0].get("state") or {}).get("waiting") or {}).get("reason")
    return None


def pods_of(stack: VirtualStack, image: str) -> list[dict[str, Any]]:
    return [p for p in stack.pods() if p["spec"]["containers"][0].get("image") == image
            and not p["metadata"].get("deletionTimestamp")]  # fmt: skip


def broken_health(stack: VirtualStack) -> list[str]:
    return [m.message for m in stack.gocd.health_messages if "cannot start" in m.message]


def first_pod(stack: VirtualStack) -> str:
    stack.run_until(lambda: stack.pods_created, 60, "a pod being created")
    return stack.pods_created[0]


def test_an_image_that_cannot_be_pulled_is_told_to_the_job_and_in_health_at_the_next_ping() -> None:
    stack = broken_stack()
    job = schedule(stack, reuse_profile(stack, Image=MISSING))
    name = first_pod(stack)
    stack.run_until(lambda: waiting_reason(stack, name) == "ImagePullBackOff", 120, "the pull backing off")
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: "ImagePullBackOff" in console(stack, job), 120, "the console line")
    assert stack.gocd.stats.pings_sent == pings + 1  # the first ping after the pod broke told it
    line = next(line for line in stack.gocd.job(job.job_id).console if "ImagePullBackOff" in line)
    assert f"pod {name} cannot start" in line and f'Back-off pulling image "{MISSING}"' in line
    [health] = broken_health(stack)
    assert f"ImagePullBackOff: Back-off pulling image \"{MISSING}\"" in health and name in health
    assert stack.backend.health.keys("pods:broken:") != set()
    stack.settle()
    assert name not in pod_names(stack)  # deleted in the same ping


def test_the_retry_after_the_back_off_clears_the_hold_once_the_image_pulls() -> None:
    faults = Faults()
    stack = broken_stack(faults)
    job = schedule(stack, reuse_profile(stack, Image=MISSING))
    stack.run_until(lambda: broken_health(stack), 300, "the profile being held")
    faults.fixed.add(MISSING)  # the image is pushed to the registry
    done = completed(stack, job, within_s=900)
    assert done.agent_id is not None and done.agent_id != stack.pods_created[0]
    stack.run_until(lambda: not broken_health(stack), 120, "the health message going")
    assert stack.backend.health.keys("pods:broken:") == set()


def test_a_changed_profile_gets_a_pod_at_once_while_the_old_one_is_held() -> None:
    stack = broken_stack()
    schedule(stack, reuse_profile(stack, Image=MISSING))
    stack.run_until(lambda: broken_health(stack), 300, "the profile being held")
    fixed = reuse_profile(stack, Image="gocd/gocd-agent-alpine-3.19:v24.1.0")
    edited = schedule(stack, fixed, name="after-edit")
    before = len(stack.pods_created)
    stack.run_until(lambda: len(stack.pods_created) > before, 30, "a pod for the edited profile")
    assert completed(stack, edited).agent_id is not None


def test_an_agent_that_exits_at_start_is_broken_at_once_with_its_exit_code() -> None:
    stack = broken_stack()
    job = schedule(stack, reuse_profile(stack, Image=CRASHING))  # properties: restartPolicy Never
    name = first_pod(stack)
    stack.run_until(lambda: "cannot start" in console(stack, job), 180, "the console line")
    told = console(stack, job)
    assert f"pod {name} cannot start: Kubernetes says container gocd-agent-container-" in told
    assert ": Error: exited with code 1. The pod is deleted" in told


def test_a_crash_loop_is_named_with_the_kubelets_back_off_message() -> None:
    stack = broken_stack()
    job = schedule(stack, reuse_profile(stack, PodSpecType="yaml", PodConfiguration=CRASH_LOOP_POD))
    name = first_pod(stack)
    stack.run_until(lambda: "CrashLoopBackOff" in console(stack, job), 180, "the console line")
    said = (
        r"container agent: CrashLoopBackOff: back-off (10|20|40|80|160)s restarting failed "
        rf"container=agent pod={name}_ci\(uid-\d+\)\. "
    )
    assert re.search(said, console(stack, job)), console(stack, job)


def test_an_unschedulable_pod_is_named_with_the_schedulers_message_once_it_is_thirty_seconds_old() -> None:
    stack = broken_stack()
    job = schedule(stack, reuse_profile(stack, Image=HUGE))
    name = first_pod(stack)
    stack.run_until(lambda: "Unschedulable" in console(stack, job), 180, "the console line")
    assert "Unschedulable: 0/1 nodes are available: 1 Insufficient memory." in console(stack, job)
    stack.settle()
    assert name not in pod_names(stack)


def test_missing_configuration_and_invalid_image_names_are_named_with_the_kubelets_words() -> None:
    stack = broken_stack()
    secret = schedule(stack, reuse_profile(stack, Image=NO_CONFIG), name="needs-secret")
    bad = schedule(stack, reuse_profile(stack, Image=BAD_NAME), name="bad-name")
    told = lambda: all("cannot start" in console(stack, job) for job in (secret, bad))  # noqa: E731
    stack.run_until(told, 180, "both console lines")
    assert 'CreateContainerConfigError: secret "agent-settings" not found' in console(stack, secret)
    assert f'InvalidImageName: Failed to apply default image tag "{BAD_NAME}"' in console(stack, bad)
    assert len(broken_health(stack)) == 2  # one per held fingerprint


def test_an_agent_oom_killed_under_a_job_is_named_in_its_console_once() -> None:
    stack = broken_stack()
    job = schedule(stack, reuse_profile(stack, Image=GREEDY), duration=900.0)
    running = assigned(stack, job)
    assert running.agent_id is not None
    stack.run_for(30)
    stack.kubelet.oom_kill(running.agent_id)
    stack.run_until(lambda: "OOMKilled" in console(stack, job), 120, "the OOM line")
    stack.run_for(180)  # more pings: the kill is told once
    lines = [line for line in stack.gocd.job(job.job_id).console if "OOMKilled" in line]
    assert len(lines) == 1
    killed = f"container gocd-agent-container-[0-9a-f]+ of pod {running.agent_id} was killed for lack of"
    assert re.search(killed, lines[0])
    assert "exit code 137" in lines[0]
    assert broken_health(stack) == []  # a job's memory, not a broken profile


def test_an_oom_kill_of_a_restarted_container_is_told_once_even_across_a_backend_restart() -> None:
    stack = broken_stack()
    profile = reuse_profile(stack, PodSpecType="yaml", PodConfiguration=RESTARTING_POD)
    job = schedule(stack, profile, duration=900.0)
    running = assigned(stack, job)
    assert running.agent_id is not None
    stack.kubelet.oom_kill(running.agent_id)  # restartPolicy Always: the pod runs on, restarted
    stack.run_until(lambda: "OOMKilled" in console(stack, job), 120, "the OOM line")
    stack.run_for(90)
    stack.settle()
    stack.restart_backend()
    stack.run_for(120)  # pings of the new backend see the same restarted container
    lines = [line for line in stack.gocd.job(job.job_id).console if "OOMKilled" in line]
    assert len(lines) == 1 and f"container agent of pod {running.agent_id}" in lines[0]


def held_row(pool: ClusterPool, stack: VirtualStack, failures: int) -> str:
    page = render_cluster_status(pool, stack.clock)
    row = re.search(rf'<tr data-held="[^"]+" data-failures="{failures}">(.*?)</tr>', page, re.S)
    assert row is not None, page
    return row.group(1)


def test_the_cluster_status_page_shows_the_held_profile_with_its_reason_and_next_try() -> None:
    stack = broken_stack()
    schedule(stack, reuse_profile(stack, Image=BAD_NAME))
    stack.run_until(lambda: broken_health(stack), 300, "the profile being held")
    [pool] = stack.backend.pools()
    [hold] = pool.holds()
    row = held_row(pool, stack, 1)
    assert "InvalidImageName: Failed to apply default image tag" in row
    assert f"<code>{hold.pod}</code>" in row
    assert "now: one pod is tried at a time" in row  # the first broken pod: no wait
    stack.run_until(lambda: pool.holds()[0].failures == 2, 600, "the second broken pod in a row")
    [hold] = pool.holds()
    seconds = round(hold.next_try_at - stack.clock.now())
    assert f"(in {seconds}s)" in held_row(pool, stack, 2) and 0 < seconds <= 30


def test_one_pod_per_job_profiles_are_held_too_and_their_jobs_told_why_they_wait() -> None:
    stack = broken_stack()
    jobs = [schedule(stack, stack.elastic_profile(Image=MISSING), name=f"job-{i}") for i in range(3)]
    stack.run_until(lambda: broken_health(stack), 300, "the profile being held")
    stack.settle()
    created = len(stack.pods_created)
    assert created <= len(jobs)
    most = 0

    def resent_to_all() -> bool:  # GoCD sends create-agent again to a waiting job every 2 minutes
        nonlocal most
        most = max(most, len(pods_of(stack, MISSING)))
        return all("waiting: pods of this profile are broken" in console(stack, job) for job in jobs)

    stack.run_until(resent_to_all, 600, "every job told why it waits")
    assert most <= 1
    told = [job for job in jobs if "cannot start: Kubernetes says" in console(stack, job)]
    assert told  # the job a broken pod was created for heard its reason


@pytest.mark.browser
def test_the_held_profile_shows_in_the_cluster_page_as_chromium_renders_it(tmp_path: Path) -> None:
    stack = broken_stack()
    schedule(stack, reuse_profile(stack, Image=NO_CONFIG))
    stack.run_until(lambda: broken_health(stack), 300, "the profile being held")
    [pool] = stack.backend.pools()
    page = browser.html_page("Cluster status", render_cluster_status(pool, stack.clock))
    rendered = browser.render_all({"cluster": page}, tmp_path)["cluster"]
    row = re.search(r'<tr data-held="[^"]+" data-failures="1">(.*?)</tr>', rendered.dom, re.S)
    assert row is not None, rendered.dom
    assert "CreateContainerConfigError" in row.group(1) and "agent-settings" in row.group(1)
