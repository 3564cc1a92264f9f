"""A cluster profile that says GoCD's registration keys live longer than the server's
`gocd.ephemeral.auto.register.key.expiry.millis` is found and told, not suffered: the simulated GoCD
expires keys after its own lifetime and refuses them as gocd/gocd's `AgentRegistrationController` does,
its agent writes the answer to the pod's log as `SslInfrastructureService` does, and the plugin reads
it, deletes the pod, drops the keys as old, tells GoCD's health messages and uses no key that old again
until the profile changes. A restart of GoCD, which forgets every key, blames no setting. Pods wanted
ahead that lack a key show on the status page, in /metrics and as a health warning."""

from __future__ import annotations

import re

import pytest

from elastic_agent.gocd.messages import cluster_profile
from elastic_agent.pool.key_lifetime import figures
from elastic_agent.pool.key_refusals import NOT_KNOWN, REFUSED, refusals_in
from elastic_agent.redaction import HIDDEN
from elastic_agent.service.app import create_app
from elastic_agent.simulation.gocd_records import HealthMessage
from elastic_agent.simulation.gocd_registration import UNKNOWN_KEY, refusal_log_line
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.status.agent import render_agent_status
from elastic_agent.status.pages import render_cluster_status
from tests.support.doubles.harness import VirtualStack
from tests.support.key_refusal_world import refused_scenario, two_idle_pods_and_a_banked_key
from tests.support.predict_traces import FIXED, PREDICT, two_stages
from tests.support.stack_helpers import pod_names, reuse_profile, schedule
from tests.support.virtual_helpers import completed

PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"
SETTING = "auto_register_key_expiry"
MINUTE = 60.0


def health(stack: VirtualStack, kind: str) -> list[str]:
    return [m.message for m in stack.gocd.health_messages if m.type == kind]


def everything_shown(stack: VirtualStack, cluster: dict[str, str]) -> str:
    """Health messages, consoles, the cluster's status page and /metrics."""
    pool = stack.backend.known_pool(cluster_profile(cluster))
    assert pool is not None
    page = render_cluster_status(pool, stack.clock)
    metrics = create_app(stack.backend, "token").test_client().get("/metrics").get_data(as_text=True)
    consoles = [line for job in stack.gocd.jobs() for line in job.console]
    return "\n".join([*(m.message for m in stack.gocd.health_messages), *consoles, page, metrics])


def test_a_key_past_gocds_lifetime_is_read_refused_in_the_agents_log_and_its_pod_deleted_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    stack, _, key, pod = refused_scenario()
    log = stack.store.get_log(stack.namespace, pod)
    lines = [line for line in log.splitlines() if REFUSED in line]
    assert len(lines) == 1 and NOT_KNOWN in lines[0] and f"agentAutoRegisterKey: [{key}]" in lines[0], log
    logback = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ERROR \[scheduler-1\] SslInfrastructureService:159 - "
    assert re.match(logback, lines[0])
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    assert stack.gocd.stats.pings_sent == pings + 1, "at the first ping after the refusal"
    assert len(stack.backend.keys) == 0, "the one banked key was used"
    [error] = health(stack, "error")
    assert pod in error and SETTING in error and PROPERTY in error and "30m" in error
    assert "-Dgocd.ephemeral.auto.register.key.expiry.millis=1800000" in error
    assert key not in everything_shown(stack, stack.cluster_profile())
    assert not any(key in record.getMessage() for record in caplog.records)


def test_no_key_as_old_as_the_refused_one_is_used_again_so_refused_pods_do_not_pile_up() -> None:
    stack, profile, _, pod = refused_scenario()
    stack.run_until(lambda: pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None
    found = figures(pool.state)
    # Banked at the third job's assignment, 18 minutes and more before the eviction and the next ping.
    assert found.refusal is not None and 18 * MINUTE < found.refusal.key_age_s < 21 * MINUTE
    assert found.window_s == found.refusal.key_age_s - 10 * MINUTE, "less the time a pod has to register"
    # Keys younger than the refused one, but older than it less the time a pod may take to register.
    for age in (17, 12, 9):
        stack.backend.keys.offer(stack.gocd.issue_key(9100 + age), stack.clock.now() - age * MINUTE)
    stack.run_for(10 * MINUTE)
    assert [r.pod_name for r in stack.gocd.refusals] == [pod], "no other pod was refused"
    assert stack.backend.keys.usable(found.window_s) == 0, "every one too old for this pool"
    # A job brings a fresh key: its pod registers, and the warm pool is full again.
    job = completed(stack, schedule(stack, profile, duration=5))
    stack.run_for(2 * MINUTE)
    assert job.agent_id is not None and stack.gocd.refusals[1:] == []
    assert health(stack, "warning") == [], "the warm pool has its pod"
    assert len(health(stack, "error")) == 1, "the refusal is told until the profile changes"


def test_a_changed_cluster_profile_ends_the_bound_and_its_message() -> None:
    stack, _, _, pod = refused_scenario()
    stack.run_until(lambda: pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    assert len(health(stack, "error")) == 1
    stack.gocd.config.cluster_profiles = [stack.cluster_profile(auto_register_key_expiry="15m")]
    pings = stack.gocd.stats.pings_sent
    stack.run_until(lambda: stack.gocd.stats.pings_sent > pings, 2 * MINUTE, "a ping with the new profile")
    assert health(stack, "error") == []
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None and figures(pool.state).window_s == 5 * MINUTE, "15m less the 10m to register"


def test_pods_wanted_ahead_without_a_key_show_on_the_status_page_in_metrics_and_as_a_warning() -> None:
    stack, _, key, pod = refused_scenario()
    stack.run_until(lambda: pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    [warning] = health(stack, "warning")
    assert "1 pod of the elastic profile" in warning and "MinIdlePods in force: 1" in warning
    assert PROPERTY in warning and SETTING in warning and "auto_register_timeout" in warning
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None
    [lacking] = figures(pool.state).lacking
    page = render_cluster_status(pool, stack.clock)
    assert f'data-lacking="{lacking.profile}" data-warm-pool="1" data-predict="0"' in page
    assert 'data-key-refusal="true"' in page and "auto_register_key_expiry" in page
    metrics = create_app(stack.backend, "token").test_client().get("/metrics").get_data(as_text=True)
    fingerprint = lacking.profile.split()[0]
    wanted = f'gocd_elastic_agent_pods_wanted_without_key{{profile="{fingerprint}",reason="warm_pool"}} 1.0'
    assert wanted in metrics
    assert "gocd_elastic_agent_registration_keys_refused_total 1.0" in metrics
    assert key not in page and key not in metrics


def test_keys_issued_before_gocd_restarted_are_dropped_and_their_refusal_blames_no_setting() -> None:
    """GoCD keeps its keys in memory (`EphemeralAutoRegisterKeyService`): a restart forgets them, and
    GoCD loads the plugin again (migrate-config). A pod booting meanwhile presents a forgotten key."""
    boots = iter([5.0, 5.0, 240.0])
    stack = VirtualStack(boot_delay=lambda _pod: next(boots, 5.0))
    profile = reuse_profile(stack, MinIdlePods="1", IdleTimeout="60m")
    key = two_idle_pods_and_a_banked_key(stack, profile)
    slow = schedule(stack, stack.elastic_profile(), duration=5)  # one pod per job, 240 s to boot
    stack.run_until(lambda: len(stack.pods_created) == 3, MINUTE, "the slow pod")
    stack.run_for(20)
    stack.gocd.forget_keys()
    loaded = '{"plugin_settings": {}, "cluster_profiles": [], "elastic_agent_profiles": []}'
    status, _ = stack.send("cd.go.elastic-agent.migrate-config", loaded)
    assert status == 200 and len(stack.backend.keys) == 0, "the banked key went with GoCD's restart"
    slow_pod = stack.pods_created[2]
    stack.run_until(lambda: stack.gocd.refusals, 5 * MINUTE, "the slow pod's key refused")
    [refused] = stack.gocd.refusals
    assert refused.reason == UNKNOWN_KEY and refused.pod_name == slow_pod
    pool = stack.backend.known_pool(cluster_profile(stack.cluster_profile()))
    assert pool is not None
    agent_page = render_agent_status(pool, slow_pod, None, stack.clock)  # its log, as GoCD's page shows it
    assert "is either not provided or expired" in agent_page and refused.key not in agent_page
    stack.run_until(lambda: slow_pod not in pod_names(stack), 2 * MINUTE, "the refused pod deleted")
    assert health(stack, "error") == []
    found = figures(pool.state)
    assert found.refusal is None and found.refused_pods == 1 and found.window_s == 20 * MINUTE
    told = " ".join(stack.gocd.job(slow.job_id).console)
    assert f"pod {slow_pod}: GoCD refused its registration key" in told and "before GoCD last started" in told
    assert f"agentAutoRegisterKey: {HIDDEN} is either not provided or expired" in told
    completed(stack, slow, 10 * MINUTE)  # GoCD's re-send brings a key it knows: a new pod runs the job
    shown = everything_shown(stack, stack.cluster_profile())
    assert key not in shown and refused.key not in shown


@pytest.mark.parametrize("key", ["0b6f2c9e-4d1a-4f7e-9c3b-5a8d2e1f6a70", "odd ] key, with; all [sorts]"])
def test_the_plugin_reads_gocds_answer_with_the_echoed_key_hidden_and_nothing_else(key: str) -> None:
    body = (
        "Elastic agent registration requires an auto-register agent key to be setup on the server. "
        f"The agentAutoRegisterKey: [{key}] is either not provided or expired. Agent-id: [agent-1], "
        "Plugin-id: [cd.go.contrib.elasticagent.kubernetes-reuse]"
    )
    log = "\n".join(["2026-08-22 23:13:04,123 INFO  [main] AgentBootstrapper:110 - starting",
                     refusal_log_line(0.0, body), ""])  # fmt: skip
    found = refusals_in(log)
    assert found is not None and found.answer == body.replace(f"[{key}]", HIDDEN)
    assert found.first_cause is None, "a refusal of the key: it may say something of the key's age"
    other_cause = "Duplicate Elastic agent Id used to register elastic agent."
    duplicate = refusals_in(refusal_log_line(0.0, other_cause))
    assert duplicate is not None and duplicate.first_cause is not None, (
        "refused for another reason: not about the key's age"
    )
    assert refusals_in("registered") is None


def test_a_predicted_stage_without_keys_is_told_per_profile_while_it_lacks_them() -> None:
    """tests/scenarios/test_predict.py's pipeline whose test stage runs on another profile: every key goes
    into the pod made for its own job, so prediction has none, and says so for that profile."""
    simulation = Simulation(two_stages(test_jobs=2, test_profile="node"), Policy("p", PREDICT), FIXED)
    seen: list[HealthMessage] = []
    replace = simulation.model.replace_health_messages

    def recorded(messages: list[HealthMessage]) -> None:
        seen.extend(messages)
        replace(messages)

    simulation.model.replace_health_messages = recorded  # type: ignore[method-assign]
    result = simulation.run()
    assert result.predicted_without_key > 0 and result.registrations_refused == 0
    told = {m.message for m in seen if m.type == "warning" and "for want of a registration key" in m.message}
    assert told and all("Predict: 2" in m and "MinIdlePods" not in m for m in told), told
    assert all(PROPERTY in m and SETTING in m for m in told)
