"""What the pool keeps per fingerprint lives as long as a job, a pod or a recent request needs it: a
profile edited and reverted gets pods that take jobs again, and a backend that sees fingerprints come
and go for days keeps only the current ones. In virtual time."""

from __future__ import annotations

from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import assigned, completed


def edit_while_running(stack: VirtualStack, job_id: int, **changes: str) -> None:
    """The admin edits the profile while the job runs: its job-completion carries the new properties."""
    stack.gocd.job(job_id).elastic_profile_properties.update(changes)


def test_a_profile_edited_and_reverted_gets_pods_that_take_its_jobs_and_are_reused() -> None:
    stack = VirtualStack(boot_delay=5)
    original = reuse_profile(stack)
    edited = assigned(stack, schedule(stack, original, duration=60))
    long = assigned(stack, schedule(stack, original, name="long", duration=3600))  # keeps a pod of it
    edit_while_running(stack, edited.job_id, MaxMemory="2Gi")
    completed(stack, edited)
    stack.run_until(lambda: edited.agent_id not in pod_names(stack), 120, "the edited job's pod retiring")

    # The admin reverts the edit: the original profile's jobs run again at once, then reuse their pod.
    again = completed(stack, schedule(stack, original), within_s=300)
    assert again.agent_id not in (None, edited.agent_id, long.agent_id)
    assert again.create_agent_sends <= 1 and (again.wait_s or 0) < 60, "it did not wait for a re-send"
    reused = completed(stack, schedule(stack, original), within_s=300)
    assert reused.agent_id == again.agent_id


def test_what_is_kept_per_fingerprint_goes_away_once_no_job_pod_or_request_needs_it() -> None:
    stack = VirtualStack(boot_delay=5)
    for n in range(20):  # twenty profiles, each used once and never again
        completed(
            stack, schedule(stack, reuse_profile(stack, Image=f"registry.test/agent-{n}:1"), duration=5)
        )
    [pool] = stack.backend.pools()
    assert pool.state.sizes()["recipes"] == 20

    stack.run_for(3 * 3600)

    sizes = pool.state.sizes()
    assert pod_names(stack) == set(), "every pod idled out"
    assert sizes["recipes"] == sizes["waiting_fingerprints"] == sizes["superseded"] == 0, sizes


def test_a_long_churn_of_changing_profiles_keeps_bounded_state() -> None:
    stack = VirtualStack(boot_delay=5)
    largest: list[int] = []
    for day in range(6):
        # Each "day" ten profiles of its own (pipelines and images change), three jobs each, one edited.
        profiles = [reuse_profile(stack, Image=f"registry.test/d{day}-p{n}:1") for n in range(10)]
        jobs = [
            schedule(stack, profile, pipeline=f"p{n}", duration=30)
            for n in range(10)
            for profile in [profiles[n]]
        ]
        edit_while_running(stack, assigned(stack, jobs[0]).job_id, MaxCPU="2")
        for job in jobs:
            completed(stack, job)
        jobs = [schedule(stack, profiles[n % 10], duration=30) for n in range(20)]
        for job in jobs:
            completed(stack, job)
        [pool] = stack.backend.pools()
        largest.append(max(pool.state.sizes().values()))
        stack.run_for(12 * 3600)
    sizes = pool.state.sizes()
    assert max(largest) <= 30, largest  # about one day's profiles and pods, not six days'
    assert all(value == 0 for value in sizes.values()), sizes
