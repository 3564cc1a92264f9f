"""The cluster status report per profile, in virtual time: each profile's pods by state beside its
waiting jobs, one form of a profile's fingerprint in every table, counts said in the singular and the
plural as English says them, and "what reuse saved" from the backend's own records (pool/ledger.py)."""

from __future__ import annotations

import re
from typing import Any

from elastic_agent.pool import labels
from elastic_agent.status.pages import render_cluster_status
from profiles.cluster import ClusterProfile
from profiles.fingerprint import label_form
from tests.support.doubles.harness import VirtualStack
from tests.support.stack_helpers import annotation, pod_names, reuse_profile, schedule
from tests.support.status_scene import parse, row_of, text_of
from tests.support.virtual_helpers import assigned, completed, run_to_idle, virtual_stack

HOUR_S = 3600.0


def page(stack: VirtualStack) -> str:
    pool = stack.backend.known_pool(ClusterProfile.from_properties(stack.cluster_profile()))
    assert pool is not None
    return render_cluster_status(pool, stack.clock)


def _slow_for_large(pod: dict[str, Any]) -> float:
    """Pods of the 2G profile never finish booting: their jobs wait."""
    limits = [c.get("resources", {}).get("limits", {}).get("memory") for c in pod["spec"]["containers"]]
    return 10 * HOUR_S if "2Gi" in limits else 5.0


def saved_rows(view: str) -> dict[str, tuple[str, int, int, str]]:
    """"What reuse saved" by span: (profile, jobs served, pods started, the row's cells as text)."""
    found = re.findall(r'<tr data-saved="([^"]+)" data-span="(\w+)" data-served="(\d+)" data-started="(\d+)">'
                       r"(.*?)</tr>", view)  # fmt: skip
    return {span: (profile, int(served), int(started), text_of(cells))
            for profile, span, served, started, cells in found}  # fmt: skip


def test_each_profile_has_its_pods_counted_by_state_beside_its_waiting_jobs() -> None:
    stack = virtual_stack(boot_delay=_slow_for_large)
    small, large = reuse_profile(stack, MaxMemory="1G"), reuse_profile(stack, MaxMemory="2G")
    busy = schedule(stack, small, name="busy-one", duration=3 * HOUR_S)  # at once: two pods
    idle_pod = run_to_idle(stack, schedule(stack, small, name="idle-one"))
    busy = assigned(stack, busy)
    waiting = schedule(stack, large, name="waits")
    stack.run_until(lambda: len(pod_names(stack)) == 3, 600, "the large profile's pod created")
    stack.run_for(60.0)
    assert stack.gocd.job(waiting.job_id).agent_id is None and busy.agent_id is not None
    rows = parse(page(stack)).marked["data-profile"]
    small_fp = label_form(annotation(stack, idle_pod, labels.ANN_FINGERPRINT) or "")
    assert (rows[small_fp]["data-idle"], rows[small_fp]["data-busy"], rows[small_fp]["data-waiting"]) == (
        "1", "1", "0")
    [large_fp] = set(rows) - {small_fp}
    assert (rows[large_fp]["data-booting"], rows[large_fp]["data-idle"], rows[large_fp]["data-waiting"]) == (
        "1", "0", "1")


def test_every_table_names_a_profile_by_the_label_form_of_its_fingerprint() -> None:
    stack = virtual_stack()
    pod = run_to_idle(stack, schedule(stack, reuse_profile(stack)))
    form = label_form(annotation(stack, pod, labels.ANN_FINGERPRINT) or "")
    view = page(stack)
    assert row_of(view, pod)["Reuse"] == form, "the pods table"
    assert set(parse(view).marked["data-profile"]) == {form}, "pods per profile"
    assert {profile for profile, *_ in saved_rows(view).values()} == {form}, "what reuse saved"


def test_one_of_anything_is_said_in_the_singular_and_the_rest_in_the_plural() -> None:
    stack = virtual_stack(boot_delay=10 * HOUR_S)
    schedule(stack, reuse_profile(stack))
    stack.run_until(lambda: pod_names(stack), 600, "its pod created")
    text = text_of(page(stack))
    assert "1 job waiting" in text and "1 pod in all" in text
    assert not re.search(r"(?<![\d.])1 (jobs|pods|pod-hours|others)\b", text), text


def test_what_reuse_saved_counts_jobs_pods_waits_and_idle_time_per_profile_for_a_day_and_a_week() -> None:
    stack = virtual_stack(boot_delay=5)
    profile = reuse_profile(stack, IdleTimeout="3h")
    pod = run_to_idle(stack, schedule(stack, profile, name="first"))
    stack.run_for(2 * HOUR_S)  # idle for two hours, then reused
    second = completed(stack, schedule(stack, profile, name="second"))
    assert second.agent_id == pod
    form = label_form(annotation(stack, pod, labels.ANN_FINGERPRINT) or "")
    day = saved_rows(page(stack))["24h"]
    assert day[:3] == (form, 2, 1)
    stack.run_for(2 * 24 * HOUR_S)  # idles out after 3 h; the day's window moves past both jobs
    rows = saved_rows(page(stack))
    assert rows["7d"][:3] == (form, 2, 1) and "24h" not in rows
    _, _, _, cells = rows["7d"]
    assert cells.split()[4] == "2.0", "jobs per pod"
    assert cells.endswith("5.0 pod-hours"), "two hours between the jobs, three before it idled out"
    text = text_of(page(stack))
    assert "python -m elastic_agent trace --server" in text
    assert "python -m elastic_agent advise trace.jsonl" in text
