"""How long GoCD's registration keys live, as the cluster profile says it: the setting read and validated,
documented where the other settings are, and the key bank kept and sized by it, within a memory bound
that /metrics shows."""

from __future__ import annotations

import re
import sys

import pytest

from elastic_agent.clock import ManualClock
from elastic_agent.pool.key_lifetime import KeyLifetime, Refusal
from elastic_agent.pool.keys import MAX_KEY_CHARS, MIN_CAPACITY, RegistrationKeys, capacity_for
from elastic_agent.service.app import create_app
from profiles.cluster import ClusterProfile
from profiles.errors import ProfileError
from profiles.fields import CLUSTER_FIELDS
from profiles.validation import validate_cluster_profile
from tests.support.paths import ROOT
from tests.support.virtual_helpers import virtual_stack

README = ROOT / "README.md"
BASE = {"go_server_url": "https://gocd.example.com/go"}
PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def profile(**settings: str) -> ClusterProfile:
    return ClusterProfile.from_properties({**BASE, **settings})


def problems(value: str) -> list[str]:
    return [p["message"] for p in validate_cluster_profile({**BASE, "auto_register_key_expiry": value})]


def test_the_key_lifetime_is_gocds_30_minutes_unless_the_profile_says_otherwise() -> None:
    assert profile().auto_register_key_expiry == 30 * MINUTE
    assert profile(auto_register_key_expiry="24h").auto_register_key_expiry == DAY
    assert profile(auto_register_key_expiry="90").auto_register_key_expiry == 90 * MINUTE, "bare: minutes"
    assert problems("1h30m") == []


def test_the_servers_milliseconds_copied_in_are_refused_with_the_duration_to_write_instead() -> None:
    [message] = problems("1800000")
    assert PROPERTY in message and "milliseconds" in message
    assert "e.g. 30m" in message
    with pytest.raises(ProfileError):
        profile(auto_register_key_expiry="86400000")  # a day in milliseconds: never read as 164 years


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("30", None),
        ("0.5", "too short: the minimum is 1m"),
        ("soon", "is not a duration"),
        ("-5m", "not a duration"),
    ],
)
def test_the_key_lifetime_is_a_duration_of_at_least_a_minute(value: str, said: str | None) -> None:
    found = problems(value)
    assert (found == []) if said is None else (len(found) == 1 and said in found[0]), found


def test_the_readme_cluster_profile_table_documents_every_setting_and_this_one_with_its_default() -> None:
    text = README.read_text()
    table = text[text.index("### Cluster profile") : text.index("### Elastic agent profile")]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)`[^|]*\| ([^|]*) \|", table, re.M)}
    assert set(rows) == {field.key for field in CLUSTER_FIELDS}
    assert "`30m`" in rows["auto_register_key_expiry"]
    row = next(line for line in table.splitlines() if line.startswith("| `auto_register_key_expiry`"))
    assert PROPERTY in row and "auto_register_timeout" in row


def test_a_bank_with_a_day_long_lifetime_keeps_a_days_keys_and_gives_each_while_a_pod_can_register() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    window = DAY - 10 * MINUTE  # the server's 24h, less the 10 minutes a pod is given to register
    keys.keep_for(window)
    assert keys.capacity == capacity_for(window) >= 24 * 60 * 3  # three keys a minute fit, a day long
    for minute in range(24 * 60):  # a day of jobs that reuse served, one key banked a minute
        keys.offer(f"key-{minute:05d}", clock.now())
        clock.advance(MINUTE)
    assert len(keys) == 24 * 60 - 10, "the first ten minutes' keys would expire before their pod registers"
    assert keys.usable(window) == 24 * 60 - 10
    assert keys.usable(20 * MINUTE) == 20, "a pool whose keys live 30m uses the last 20 minutes' keys only"
    taken = keys.take(window)
    assert taken is not None and taken.key == "key-00010", "the oldest usable first: it expires first"
    clock.advance(12 * HOUR)  # a quiet night: the evening's keys are there in the morning
    assert keys.usable(window) == 24 * 60 - 10 - 12 * 60
    assert keys.take(20 * MINUTE) is None


def test_the_bank_keeps_the_default_lifetimes_64_keys_and_at_most_a_days_worth() -> None:
    assert capacity_for(20 * MINUTE) == MIN_CAPACITY == 64
    assert capacity_for(5 * MINUTE) == 64
    assert capacity_for(7 * DAY) == capacity_for(DAY)
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    keys.keep_for(7 * DAY)
    for n in range(capacity_for(DAY) + 500):
        keys.offer(f"key-{n:06d}", clock.now() + n)
    assert len(keys) == keys.capacity == capacity_for(DAY)
    taken = keys.take()
    assert taken is not None and taken.key == f"key-{500:06d}", "the 500 oldest went when the bank was full"


def test_the_banks_memory_stays_within_the_bound_it_reports_whatever_keys_come() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    keys.keep_for(DAY)
    keys.offer("x" * (MAX_KEY_CHARS + 1), clock.now())  # not one of GoCD's UUIDs: not banked
    keys.offer("\U0001f511" * 10, clock.now())  # nor a key outside ASCII, which takes more memory
    assert len(keys) == 0
    for n in range(keys.capacity * 2):
        keys.offer(f"{n:0{MAX_KEY_CHARS}d}", clock.now() + n)
    assert len(keys) == keys.capacity
    assert sys.getsizeof([]) < keys.memory_bytes() <= keys.memory_limit_bytes()
    assert keys.memory_limit_bytes() < 2 * 1024 * 1024, "a day of the longest keys: under 2 MiB"


def test_a_refused_key_drops_every_banked_key_as_old_and_a_gocd_start_drops_them_all() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock)
    for n in range(5):
        keys.offer(f"key-{n}", clock.now() + n)
    assert keys.drop_issued_until(clock.now() + 2) == 3
    assert [keys.take(), keys.take(), keys.take()] != [None, None, None]
    keys.offer("after", clock.now() + 10)
    assert keys.server_started() == 1 and len(keys) == 0
    assert keys.started_at == clock.now()


def test_a_refusal_bounds_the_keys_until_the_profile_changes() -> None:
    settings, edited = profile(), profile(auto_register_key_expiry="15m")
    lifetime, now = KeyLifetime(), 2.0
    assert lifetime.window_s(settings, now) == 20 * MINUTE
    lifetime.refused(Refusal("agent-1", 0.0, 18 * MINUTE, settings))
    assert lifetime.lifetime_s(settings, now) == 18 * MINUTE
    assert lifetime.window_s(settings, now) == 8 * MINUTE
    lifetime.refused(Refusal("agent-2", 1.0, 19 * MINUTE, settings))
    assert lifetime.window_s(settings, now) == 8 * MINUTE, "the youngest refused key holds"
    assert lifetime.window_s(edited, now) == 5 * MINUTE, "another profile: its own setting"
    lifetime.forget_unless(edited)
    assert lifetime.refusal(settings, now) is None and lifetime.window_s(settings, now) == 20 * MINUTE
    lifetime.refused(None)  # a refusal that says nothing of the lifetime: counted only
    assert lifetime.refused_pods == 3 and lifetime.refusal(settings, now) is None


def test_the_bank_keeps_keys_as_long_as_the_longest_lived_profile_may_use_one_and_metrics_show_it() -> None:
    stack = virtual_stack()
    cluster = stack.cluster_profile()
    stack.gocd.schedule_job("build", "stage", "short", stack.elastic_profile(), cluster, None, 5)
    stack.gocd.schedule_job("build", "stage", "long", stack.elastic_profile(),
                            stack.cluster_profile(namespace="nightly", auto_register_key_expiry="24h"),
                            None, 5)  # fmt: skip
    stack.run_until(lambda: len(stack.backend.pools()) == 2, 60, "both clusters' pools")
    assert stack.backend.keys.max_age_s == DAY - 10 * MINUTE
    assert stack.backend.keys.capacity == capacity_for(DAY - 10 * MINUTE) > MIN_CAPACITY
    page = create_app(stack.backend, "token").test_client().get("/metrics").get_data(as_text=True)
    assert f"gocd_elastic_agent_key_bank_max_age_seconds {DAY - 10 * MINUTE}" in page
    limit = re.search(r"^gocd_elastic_agent_key_bank_limit_bytes (\S+)$", page, re.M)
    used = re.search(r"^gocd_elastic_agent_key_bank_bytes (\S+)$", page, re.M)
    assert limit and used and 0 < float(used.group(1)) < float(limit.group(1))
    assert float(limit.group(1)) == stack.backend.keys.memory_limit_bytes()
