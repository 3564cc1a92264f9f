"""What a refused registration key teaches, as pure rules: a refusal reads as expiry only when nothing
shows the key was spent; what it teaches is bounded in time and undone by an older key that GoCD
accepts; GoCD's queue is allowed for in key ages; and the log is read for GoCD's first answer."""

from __future__ import annotations

from elastic_agent.pool.key_lifetime import REFUSAL_HELD_S, KeyLifetime, Refusal
from elastic_agent.pool.key_refusals import refusals_in
from profiles.cluster import ClusterProfile

MINUTE = 60.0
SETTINGS = ClusterProfile.from_properties({"go_server_url": "https://gocd.example.com/go"})
PREFIX = "2026-12-05 10:00:00,000 ERROR [scheduler-1] SslInfrastructureService:159 - "
REFUSED = PREFIX + "[Agent Registration] Error occurred during agent registration process: "
EXPIRED = (
    "Elastic agent registration requires an auto-register agent key to be setup on the server. The "
    "agentAutoRegisterKey: [3f2a] is either not provided or expired. Agent-id: [agent-1], Plugin-id: [p]"
)


def test_a_refusal_bounds_the_keys_for_an_hour_at_most() -> None:
    lifetime = KeyLifetime()
    lifetime.refused(Refusal("agent-1", 1000.0, 18 * MINUTE, SETTINGS))
    assert lifetime.window_s(SETTINGS, 1000.0 + REFUSAL_HELD_S - 1) == 8 * MINUTE
    assert lifetime.window_s(SETTINGS, 1000.0 + REFUSAL_HELD_S) == 20 * MINUTE, "the bound lapsed"


def test_a_key_older_than_the_bound_that_gocd_accepts_undoes_the_refusal() -> None:
    lifetime = KeyLifetime()
    lifetime.refused(Refusal("agent-1", 0.0, 2 * MINUTE, SETTINGS))
    assert lifetime.window_s(SETTINGS, 10.0) < 0, "no banked key may be used meanwhile"
    lifetime.registered(90.0, SETTINGS)
    assert lifetime.refusal(SETTINGS, 10.0) is not None, "a younger key proves nothing"
    lifetime.registered(3 * MINUTE, SETTINGS)
    assert lifetime.refusal(SETTINGS, 10.0) is None and lifetime.window_s(SETTINGS, 10.0) == 20 * MINUTE
    assert lifetime.confirmed_s(SETTINGS) == 3 * MINUTE


def test_what_gocd_loading_the_plugin_again_forgets() -> None:
    lifetime = KeyLifetime()
    lifetime.registered(5 * MINUTE, SETTINGS)
    lifetime.refused(Refusal("agent-1", 0.0, 10 * MINUTE, SETTINGS))
    lifetime.server_started()
    assert lifetime.refusal(SETTINGS, 1.0) is None and lifetime.confirmed_s(SETTINGS) == 0.0


def test_gocds_queue_is_allowed_for_its_default_threshold_or_the_longer_one_re_sends_show() -> None:
    lifetime = KeyLifetime()
    assert lifetime.queue_allowance_s() == 110.0, "GoCD's 2-minute starvation threshold less 10 s"
    lifetime.resent(600.0)
    lifetime.resent(310.0)
    assert lifetime.queue_allowance_s() == 300.0, "the shortest gap seen: a lost re-send doubles one"
    lifetime.resent(60.0)
    assert lifetime.queue_allowance_s() == 110.0, "a gap under the default: the default is generous"


def test_the_first_answer_in_the_log_says_whether_another_cause_spent_the_key() -> None:
    duplicate = REFUSED + "Duplicate Elastic agent Id used to register elastic agent."
    log = "\n".join([PREFIX + "Starting", duplicate, REFUSED + EXPIRED, REFUSED + EXPIRED])
    found = refusals_in(log)
    assert found is not None
    assert found.first_cause == "Duplicate Elastic agent Id used to register elastic agent."
    assert "[3f2a]" not in found.answer and "is either not provided or expired" in found.answer
    only_keys = refusals_in("\n".join([REFUSED + EXPIRED, REFUSED + EXPIRED]))
    assert only_keys is not None and only_keys.first_cause is None
    assert refusals_in(PREFIX + "Starting") is None
