"""What the soak reads from the backend, an operator reads too: /metrics shows how many entries each
long-lived structure holds (`gocd_elastic_agent_retained_entries`) and the capacity of those that have a
fixed one (`..._limit`), with no property value (they may be secrets) in any label."""

from __future__ import annotations

from collections.abc import Callable

import requests
from prometheus_client.parser import text_string_to_metric_families

from elastic_agent.simulation.stack import TOKEN, Stack
from tests.support.live_stack import wait_until


def gauges(stack: Stack, name: str) -> dict[str, float]:
    assert stack.service is not None
    text = requests.get(f"{stack.service.url}/metrics", timeout=5).text
    assert TOKEN not in text
    return {
        sample.labels["structure"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def test_metrics_show_the_entries_each_structure_retains_and_the_fixed_capacities(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack()
    cluster = stack.cluster_profile()
    profile = stack.elastic_profile(Reuse="true")
    job = stack.gocd.schedule_job("build", "test", "unit", profile, cluster, None, 30)
    wait_until(lambda: stack.gocd.job(job.job_id).completed_at, 30, "the job to complete")
    wait_until(lambda: gauges(stack, "gocd_elastic_agent_retained_entries").get("records") == 1, 10,
               "the metrics to show the pod's record")  # fmt: skip

    entries = gauges(stack, "gocd_elastic_agent_retained_entries")
    assert entries["pools"] == 1 and entries["pods_watched"] == 1 and entries["recipes"] == 1
    assert entries["parsed_should_assign_work"] >= 1 and entries["job_specs"] >= 1
    assert {"waiting_jobs", "assigned", "unwritten", "banked_keys", "parsed_cluster_profiles"} <= set(entries)
    assert entries["tombstones"] == 0  # the port's: no pod deleted yet
    # Process-wide, like the parse caches: at least this job's elastic and cluster profiles.
    assert entries["shared_profile_properties"] >= 2
    limits = gauges(stack, "gocd_elastic_agent_retained_entries_limit")
    assert limits["parsed_should_assign_work"] == 4096 and limits["job_specs"] == 512
    assert limits["shared_profile_properties"] == 256 and limits["tombstones"] == 4096
    assert set(limits) < set(entries)
