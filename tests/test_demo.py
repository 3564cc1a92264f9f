"""The demo's workload and its virtual-time comparison (the live part runs in ./scripts/demo.sh)."""

from elastic_agent.simulation.demo import demo_trace, virtual_comparison


def test_the_demo_trace_is_the_same_for_a_seed() -> None:
    assert demo_trace(20, seed=3) == demo_trace(20, seed=3)
    assert demo_trace(20, seed=3) != demo_trace(20, seed=4)


def test_the_virtual_comparison_shows_reuse_next_to_one_pod_per_job() -> None:
    text = virtual_comparison(demo_trace(40, seed=1), seed=1)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "policy" not in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| one pod per job",
        "| reuse, IdleTimeout 2m",
        "| reuse, IdleTimeout 10m",
        "| reuse, IdleTimeout 30m",
    ]
    one_pod_per_job = float(rows[0].split(" | ")[1])
    reuse = float(rows[2].split(" | ")[1])
    assert one_pod_per_job == 1.0
    assert reuse < one_pod_per_job, "reuse creates fewer pods than jobs"
    assert all(row.endswith("| 0 |") for row in rows), "no invariant violations"
