"""A broken pod's replacement and the hold's back-off, end to end in virtual time on the simulated GoCD
server (pings every 60 s, create-agent re-sent every 120 s) and the fake cluster: the first broken pod
of a profile is replaced at once, so a job whose pod broke once runs without waiting out a hold; from
the second broken pod in a row the profile is held 30 s, then 60 s...; a pod that registers ends the
row; an image that cannot be pulled never has more than one pod of it tried at a time
(pool/holds.py, pool/broken_pods.py). tests/unit/pool/test_hold_plans.py holds the same decisions at plan
level."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from elastic_agent.simulation.fake_kube_store import Obj
from elastic_agent.simulation.gocd_model import GoCDConfig, Job
from elastic_agent.simulation.kubelet import PodFault
from tests.support.broken_world import MISSING, Faults, broken_stack, console
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import reuse_profile, schedule

FLAKY = "registry.example.test/gocd-agent:flaky"
HELD = "waiting: pods of this profile are broken"


class BreaksOnce:
    """The kubelet's fault: the first pod of FLAKY has its agent exit with code 1 `after` seconds after
    its start, before it registers (the properties pod's restartPolicy Never: the pod fails); the pods
    after it start well."""

    def __init__(self, after: float) -> None:
        self.after = after
        self.first: str | None = None

    def __call__(self, pod: Obj) -> PodFault | None:
        if pod["spec"]["containers"][0].get("image") != FLAKY:
            return None
        self.first = self.first or pod["metadata"]["name"]
        return PodFault("crash_loop", after=self.after) if pod["metadata"]["name"] == self.first else None


@dataclass
class Timeline:
    """Step by step: when pods of an image were created, and each change of the profile's row of broken
    pods as (failures in a row, when the ping found the latest, when one pod may be tried next)."""

    stack: VirtualStack
    image: str
    created: list[float] = field(default_factory=list)
    rows: list[tuple[int, float, float]] = field(default_factory=list)
    most_alive_while_held: int = 0

    def __post_init__(self) -> None:
        self.stack.store.add_listener(self._heard)

    def _heard(self, kind: str, pod: Obj) -> None:
        if kind == "ADDED" and pod["spec"]["containers"][0].get("image") == self.image:
            self.created.append(self.stack.clock.now())

    def look(self) -> None:
        now = self.stack.clock.now()
        holds = [hold for pool in self.stack.backend.pools() for hold in pool.holds()]
        failures = holds[0].failures if holds else 0
        if failures != (self.rows[-1][0] if self.rows else 0):
            self.rows.append((failures, now, holds[0].next_try_at if holds else now))
        if holds:
            alive = [p for p in self.stack.pods() if p["spec"]["containers"][0].get("image") == self.image
                     and not p["metadata"].get("deletionTimestamp")]  # fmt: skip
            self.most_alive_while_held = max(self.most_alive_while_held, len(alive))

    def until(self, condition: Callable[[], object], within_s: float, what: str) -> None:
        def looked() -> bool:
            self.look()
            return bool(condition())

        self.stack.run_until(looked, within_s, what)


def told_at(timeline: Timeline, job: Job) -> float:
    timeline.until(lambda: "cannot start" in console(timeline.stack, job), 300, "the broken pod told")
    return timeline.stack.clock.now()


@pytest.mark.parametrize("reuse", [True, False], ids=["reuse", "one pod per job"])
def test_a_pod_that_breaks_once_is_replaced_at_the_next_create_agent_and_its_job_waits_for_no_hold(
    reuse: bool,
) -> None:
    # The agent exits 60 s after its start, so the ping at 120 s finds the pod broken, 5 s before GoCD
    # sends create-agent again (at 125 s, with a fresh key): a 30-s hold would refuse that re-send, and
    # the job would wait for the ping at 180 s (reuse: the job keeps the key) or the re-send at 245 s.
    stack = VirtualStack(boot_delay=5.0, gocd=GoCDConfig(seed=1), faults=BreaksOnce(after=60.0))
    timeline = Timeline(stack, FLAKY)
    profile = reuse_profile(stack, Image=FLAKY) if reuse else stack.elastic_profile(Image=FLAKY)
    job = schedule(stack, profile)
    found = told_at(timeline, job)
    timeline.until(lambda: stack.gocd.job(job.job_id).assigned_at is not None, 300, "the job assigned")
    assigned = stack.gocd.job(job.job_id)
    assert timeline.rows[0][:2] == (1, found) and timeline.rows[0][2] == found  # tried again at once
    assert len(timeline.created) == 2 and timeline.created[1] - found <= 5.0  # at the re-send
    assert assigned.agent_id == stack.pods_created[1] and assigned.assigned_at is not None
    assert assigned.assigned_at - found < 30.0
    assert HELD not in console(stack, job)
    assert timeline.rows[-1][0] == 0  # the replacement registered: the row is over
    assert stack.gocd.invariant_violations() == []


def test_a_reuse_job_that_holds_a_key_gets_the_replacement_in_the_ping_that_finds_the_pod_broken() -> None:
    # The agent exits 150 s after its start: GoCD's re-send at 125 s found the pod still booting and left
    # its key with the job; the ping at 180 s finds the pod broken and creates the replacement with it.
    stack = VirtualStack(boot_delay=5.0, gocd=GoCDConfig(seed=1), faults=BreaksOnce(after=150.0))
    timeline = Timeline(stack, FLAKY)
    job = schedule(stack, reuse_profile(stack, Image=FLAKY))
    found = told_at(timeline, job)
    assert timeline.created[1:] == [found]
    timeline.until(lambda: stack.gocd.job(job.job_id).assigned_at is not None, 60, "the job assigned")


def test_an_image_that_cannot_be_pulled_is_tried_one_pod_at_a_time_held_from_the_second_in_a_row() -> None:
    stack = broken_stack()
    timeline = Timeline(stack, MISSING)
    jobs = [schedule(stack, reuse_profile(stack, Image=MISSING), name=f"job-{i}") for i in range(4)]
    timeline.until(lambda: len(timeline.rows) >= 5, 1800, "five broken pods in a row")
    stack.settle()
    found = [at for _, at, _ in timeline.rows]
    waits = [next_try - at for _, at, next_try in timeline.rows]
    assert [failures for failures, _, _ in timeline.rows] == [1, 2, 3, 4, 5]
    assert waits == [0.0, 30.0, 60.0, 120.0, 240.0]
    # Four pods for the four jobs before the first ping found them all broken (one failure); after it,
    # one pod at a time, each created only once its try was due.
    assert timeline.created[:4] == [timeline.created[0]] * 4 and timeline.created[4] > found[0]
    for made in timeline.created[4:]:
        row = max((r for r in timeline.rows if r[1] <= made), key=lambda r: r[1])
        assert made >= row[2], (made, row)
    assert timeline.most_alive_while_held <= 1
    assert all("cannot start" in console(stack, job) for job in jobs)
    # The first replacement came at GoCD's first re-send after the failure, refused by no hold; later
    # re-sends during a hold were, and their jobs kept their keys for the try.
    first_resend = min(j.scheduled_at for j in jobs) + GoCDConfig().job_starvation_timeout_s
    assert found[0] < timeline.created[4] <= first_resend + GoCDConfig().scheduler_interval_s
    assert any(HELD in console(stack, job) for job in jobs)


def test_a_pod_that_registers_ends_the_row_and_the_next_broken_pod_is_the_first_again() -> None:
    faults = Faults()
    stack = broken_stack(faults)
    timeline = Timeline(stack, MISSING)
    schedule(stack, reuse_profile(stack, Image=MISSING))
    timeline.until(lambda: timeline.rows and timeline.rows[-1][0] == 2, 900, "two broken pods in a row")
    faults.fixed.add(MISSING)  # the image is pushed: the next pod registers
    timeline.until(lambda: timeline.rows[-1][0] == 0, 900, "the row ended")
    faults.fixed.discard(MISSING)  # and deleted from the registry again
    # Two more jobs: one runs on the idle pod that came up, the other needs a new pod, which breaks.
    later = [schedule(stack, reuse_profile(stack, Image=MISSING), name=f"later-{i}", duration=600.0)
             for i in range(2)]  # fmt: skip
    timeline.until(lambda: timeline.rows[-1][0] == 1, 900, "a broken pod again")
    _, at, next_try = timeline.rows[-1]
    assert next_try == at  # the first of a new row: tried again at once
    assert any("(0s, broken pod 1 in a row)" in console(stack, job) for job in later)
