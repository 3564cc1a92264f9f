"""The fast advisor (one baseline per trace, the search of search.py) recommends what the exhaustive
one does, with the same figures; and a run of every profile at once, split by profile, adds up to the
whole run.

The equality is shown on the standard trace of tests/scenarios/test_fast_path.py (`WorkloadSpec(jobs=20000,
days=1)`, seed 1), for its `big-memory` profile (1,322 jobs) with six IdleTimeouts from 1m to 30m,
MinIdlePods 1 and a mean-wait target of 30 % of one pod per job's (at 20 %, or with MinIdlePods 0, no
candidate meets the targets, and both run every candidate): the whole four-profile advisor,
exhaustive, takes many minutes on this machine, too long for the suite.
"""

from __future__ import annotations

import dataclasses

from elastic_agent.advisor.advise import (
    BASELINE,
    ProfileAdvice,
    ProfileRequest,
    advise_profile,
    render,
    summary,
)
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Simulation
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import WorkloadSpec, generate


def _figures(result: PolicyResult) -> dict[str, object]:
    return {key: value for key, value in result.numbers().items() if key != "wall_s"}


def _printed(advice: ProfileAdvice) -> list[str]:
    """What the report prints of the recommendation and the best single setting."""
    text = render(advice, 0.2)
    shown = (advice.recommended.label, advice.best_flat.label)
    lines = [line for line in text.splitlines() if not line.startswith("- ")]  # not the skipped list
    return [line for line in lines if line.startswith("Recommended") or any(s in line for s in shown)]


def test_the_fast_advisor_recommends_what_the_exhaustive_one_does_with_the_same_figures() -> None:
    trace = generate(WorkloadSpec(jobs=20000, days=1), seed=1)
    assert len(trace) == 20000
    jobs = [job for job in trace if job.profile == "big-memory"]
    settings = SimSettings(seed=1)
    # The baseline of the profile's jobs alone: the whole trace's one would cost more than the search.
    baseline = Simulation(jobs, BASELINE, settings).run()
    advices = [
        advise_profile(
            ProfileRequest(
                "big-memory",
                jobs,
                settings,
                idle_timeouts=("1m", "2m", "5m", "10m", "20m", "30m"),
                min_idle=(1,),
                target=0.3,
                p95_target=10.0,
                baseline=lambda: baseline,
                exhaustive=exhaustive,
            )
        )
        for exhaustive in (False, True)
    ]
    fast, full = advices
    assert len(fast.candidates) < len(full.candidates) and fast.skipped and not full.skipped
    assert (fast.recommended.label, fast.best_flat.label, fast.verdict) == (
        full.recommended.label,
        full.best_flat.label,
        full.verdict,
    )
    assert _figures(fast.recommended.result) == _figures(full.recommended.result)
    assert _figures(fast.best_flat.result) == _figures(full.best_flat.result)
    assert _printed(fast) == _printed(full)
    assert summary([fast]) == summary([full])


def test_one_run_of_every_profile_split_by_profile_adds_up_to_the_whole_run() -> None:
    trace = generate(WorkloadSpec(jobs=300, days=0.05), seed=3)
    settings = SimSettings(seed=1)
    whole = Simulation(trace, BASELINE, settings).run()
    parts = Simulation(trace, BASELINE, settings).run_by_profile()
    assert sorted(parts) == sorted({job.profile for job in trace})
    for name in ("jobs", "assigned", "completed", "pods_created", "waited_past_resend", "create_agent_sent"):
        assert sum(getattr(p, name) for p in parts.values()) == getattr(whole, name), name
    for name in ("idle_pod_s", "boot_pod_s", "busy_pod_s"):
        assert abs(sum(getattr(p, name) for p in parts.values()) - getattr(whole, name)) < 1e-6, name
    assert sorted(w for p in parts.values() for w in p.waits) == whole.waits
    assert max(p.peak_pods for p in parts.values()) <= whole.peak_pods
    one = parts[trace[0].profile]
    assert one.jobs == sum(1 for job in trace if job.profile == trace[0].profile)
    assert dataclasses.replace(one, waits=[]).wait_max == max(one.waits)
