"""One tuned GoCD server everywhere: the key lifetime and tick that docs/install.md ("A GoCD server tuned
for reuse") tells an administrator to set are the advisor's `--tuned-*` defaults and the benchmarks'
tuned server, and the guide says why that lifetime."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from benchmarks.prediction_compare import SERVERS
from elastic_agent.advisor.command import add_arguments
from elastic_agent.advisor.together import TUNED
from elastic_agent.advisor.tuned_server import TUNED_KEY_LIFETIME_S, TUNED_TICK_S
from elastic_agent.pool.keys import MAX_KEPT_S
from profiles.quantities import parse_duration
from tests.support.install_guide import block_after, guide
from tests.support.paths import ROOT

KEY_PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"
TICK_PROPERTY = "cruise.build.assignment.service.interval"
# A tuned server's key lifetime as the benchmarks' texts write it: "keys 24 h", "keys 24 hours", "keys 1d".
BENCHMARK_LIFETIME = re.compile(r"keys (\d+) ?(h|hours?|d|days?)\b")


def tuning_section() -> str:
    text = guide()
    start = text.index("## 12. A GoCD server tuned for reuse")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def advisor_defaults() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["trace.jsonl"])


def test_the_guides_server_values_are_the_tuned_constants() -> None:
    options = block_after("server-tuning-values")
    millis = re.search(rf"-D{re.escape(KEY_PROPERTY)}=(\d+)", options)
    tick = re.search(rf"-D{re.escape(TICK_PROPERTY)}=(\d+)", options)
    assert millis is not None and tick is not None
    assert int(millis.group(1)) == TUNED_KEY_LIFETIME_S * 1000
    assert int(tick.group(1)) == TUNED_TICK_S * 1000
    setting = re.search(r"`auto_register_key_expiry` to the same duration, `(\w+)` here", tuning_section())
    assert setting is not None and parse_duration(setting.group(1)) == TUNED_KEY_LIFETIME_S


def test_the_advisor_defaults_and_the_guides_and_advisor_pages_words_for_them_are_the_tuned_server() -> None:
    defaults = advisor_defaults()
    assert parse_duration(defaults.tuned_key_lifetime) == TUNED_KEY_LIFETIME_S
    assert parse_duration(defaults.tuned_tick) == TUNED_TICK_S
    for text in (tuning_section(), (ROOT / "docs" / "advisor.md").read_text()):
        said = re.search(r"--tuned-tick (\S+) --tuned-key-lifetime (\w+)", " ".join(text.split()))
        assert said is not None
        assert (parse_duration(said.group(1).strip("`")), parse_duration(said.group(2))) == (
            TUNED_TICK_S,
            TUNED_KEY_LIFETIME_S,
        )


def test_every_benchmark_runs_and_names_the_same_tuned_server() -> None:
    assert (TUNED.assignment_tick_s, TUNED.key_lifetime_s) == (TUNED_TICK_S, TUNED_KEY_LIFETIME_S)
    assert SERVERS["tuned"] is TUNED
    named = 0
    for path in sorted(Path(ROOT / "benchmarks").glob("*.py")):
        for number, unit in BENCHMARK_LIFETIME.findall(" ".join(path.read_text().split())):
            named += 1
            lifetime = parse_duration(number + unit[0])
            assert lifetime == TUNED_KEY_LIFETIME_S, f"{path.name} says keys {number} {unit}"
    assert named > 0, "the benchmarks name the tuned server's key lifetime somewhere"


def test_the_guide_says_why_the_lifetime_is_what_the_key_bank_has_room_for() -> None:
    section = tuning_section()
    assert TUNED_KEY_LIFETIME_S == MAX_KEPT_S, "the reason the guide gives is the bank's room"
    reasons = ("`MAX_KEPT_S`", "`expireAfterWrite`", "in the morning", "advisor/tuned_server.py")
    for reason in reasons:
        assert reason in section
