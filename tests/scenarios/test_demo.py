"""The demo's workloads and its virtual-time comparison (the live part runs in ./scripts/demo.sh)."""

from elastic_agent.simulation.demo import demo_day, demo_trace, virtual_comparison
from elastic_agent.traces.workload import TraceJob


def test_the_demo_trace_is_the_same_for_a_seed() -> None:
    assert demo_trace(20, seed=3) == demo_trace(20, seed=3)
    assert demo_trace(20, seed=3) != demo_trace(20, seed=3 + 1)


def test_the_demo_day_is_pipeline_shaped_and_the_same_for_a_seed() -> None:
    day = demo_day(seed=3)
    assert day == demo_day(seed=3) and day != demo_day(seed=4)
    assert 1000 <= len(day) <= 3000, "about two thousand jobs: a minute of virtual-time runs"
    assert len({job.stage for job in day}) > 5 and max(job.at for job in day) < 86_400


def small_morning() -> list[TraceJob]:
    """The demo day's shape at a size a test can afford: a few pipelines, up to 09:00."""
    return [job for job in demo_day(seed=1, pipelines=2, commits_per_hour=6) if job.at < 9 * 3600]


def test_the_virtual_comparison_shows_every_setting_next_to_one_pod_per_job() -> None:
    text = virtual_comparison(small_morning(), seed=1)
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "policy" not in line]
    assert [row[0] for row in rows] == [
        "| one pod per job",
        "| reuse, IdleTimeout 2m",
        "| reuse, IdleTimeout 10m",
        "| reuse, IdleTimeout 30m",
        "| reuse + Predict, IdleTimeout 2m",
        "| reuse + Predict, IdleTimeout 10m",
        "| reuse + Predict + ReuseSchedule",
    ]
    pods_per_job = [float(row[1]) for row in rows]
    assert pods_per_job[0] == 1.0
    assert pods_per_job[3] < pods_per_job[1] < 1.0, "reuse creates fewer pods than jobs, longer idle fewer"
    started_ahead = [int(row[7]) for row in rows]
    assert started_ahead[:4] == [0, 0, 0, 0] and max(started_ahead[4:]) > 0, "only Predict starts pods ahead"
    assert all(row[-2] == "0" and row[-1] == "0 |" for row in rows), "no refusals, no invariant violations"
