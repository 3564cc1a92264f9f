"""`advise --current` names the policy a trace was recorded under and `--pod-start` the pods' start-up;
both are read as a person writes them, and a wrong one is one sentence and exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_agent.advisor.current_policy import parse_current, parse_pod_starts


def test_the_current_policy_is_one_pod_per_job_unless_said() -> None:
    current = parse_current([])
    assert current.properties("java") == {"Reuse": "false"}
    assert current.describe() == "one pod per job, the official plugin's way"
    assert parse_current(["official"]).properties("java") == {"Reuse": "false"}


def test_the_current_policy_takes_this_plugins_settings_for_every_profile_or_one() -> None:
    current = parse_current(["Reuse=true,IdleTimeout=10m,MinIdlePods=1", "node: one-pod-per-job"])
    assert current.properties("java") == {"Reuse": "true", "IdleTimeout": "10m", "MinIdlePods": "1"}
    assert current.properties("node") == {"Reuse": "false"}
    assert current.describe() == "Reuse=true, IdleTimeout=10m, MinIdlePods=1"


def test_pod_start_is_given_for_every_profile_or_one_and_a_bare_number_is_seconds() -> None:
    given = parse_pod_starts(["90", "java:2m"])
    assert (given.for_profile("java"), given.for_profile("node")) == (120.0, 90.0)
    assert parse_pod_starts([]).for_profile("java") is None


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--current", "reuse please", "--current 'reuse please': write one-pod-per-job, or this plugin's"),
        ("--current", "Reuse=maybe", "--current 'Reuse=maybe': Reuse: 'maybe' is not true or false"),
        ("--current", "Image=x", "--current 'Image=x': Image is not one of Reuse, IdleTimeout"),
        ("--current", "IdleTimeout=10m", "IdleTimeout counts only with Reuse=true; add it"),
        ("--current", "Reuse=true,IdleTimeout=ten", "IdleTimeout: 'ten' is not a duration"),
        ("--pod-start", "0s", "--pod-start '0s': give a duration from 1s to 1h"),
        ("--pod-start", "java:fast", "--pod-start 'java:fast': give a duration from 1s to 1h"),
    ],
)
def test_a_bad_current_policy_or_pod_start_is_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, said: str
) -> None:
    from elastic_agent.cli import main

    path = tmp_path / "trace.jsonl"
    path.write_text('{"at": 0, "profile": "java", "pipeline": "api", "duration": 60, "waited": 30}\n')
    assert main(["advise", str(path), option, value, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and err.count("\n") == 1


def test_the_same_profile_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="profile java was given a policy already"):
        parse_current(["java:official", "java:Reuse=true"])
    with pytest.raises(ValueError, match="a start-up for every profile was given already"):
        parse_pod_starts(["90s", "30s"])
