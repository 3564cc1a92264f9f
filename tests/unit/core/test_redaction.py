"""An incident's traceback says where the backend failed, never a secret the failure quoted
(elastic_agent/redaction.py, executors/base.new_incident)."""

from __future__ import annotations

import json
import logging

import pytest

from elastic_agent.redaction import HIDDEN, hide, request_values, traceback_text
from elastic_agent.service.app import PluginResponse, answer_safely

SECRET = "s3cr3t-Vq8/Lx+2Zw=="
BODY = json.dumps(
    {
        "auto_register_key": "key-7f0c9e2d41aa",
        "elastic_agent_profile_properties": {
            "Environment": f"GREETING=hello\nAPI_TOKEN={SECRET}",
            "MaxJobsPerPod": "2",
        },
        "cluster_profile_properties": {"security_token": "tok-81b2c7d6e5f4"},
    }
)


def _failing_on(value: str) -> PluginResponse:
    return PluginResponse(200, str(int(value)))  # a bug: a value taken for a number


@pytest.mark.parametrize(
    "quoted",
    [
        SECRET,  # a line's value after its name, alone
        f"API_TOKEN={SECRET}",  # the whole line
        "key-7f0c9e2d41aa",  # a whole value
        f"GREETING=hello\nAPI_TOKEN={SECRET}",  # a multi-line value, whole
    ],
)
def test_an_exception_quoting_a_value_of_the_request_has_it_hidden(quoted: str) -> None:
    shown = hide(f"ValueError: invalid literal for int() with base 10: {quoted!r}", request_values(BODY))
    assert SECRET not in shown and "key-7f0c9e2d41aa" not in shown and HIDDEN in shown
    assert shown.startswith("ValueError: invalid literal for int() with base 10:")


def test_short_values_and_text_the_request_does_not_hold_stay_readable() -> None:
    text = "KeyError: 'MaxJobsPerPod' while reading 2 values"
    assert hide(text, request_values(BODY)) == text


def test_a_body_that_is_not_json_is_hidden_as_one_value() -> None:
    assert hide("could not read 'not json at all'", request_values("not json at all")) == (
        f"could not read '{HIDDEN}'"
    )


def test_an_unexpected_failure_logs_its_traceback_without_the_values_of_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR):
        answer = answer_safely("go.cd.elastic-agent.create-agent", lambda: _failing_on(SECRET), lambda: BODY)
    assert answer.status == 500 and SECRET not in answer.body
    (record,) = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    text = caplog.text
    assert SECRET not in text and "tok-81b2c7d6e5f4" not in text
    # Where it failed is still there: the frame, the line of code, the exception's type.
    assert "_failing_on" in text and "int(value)" in text and "ValueError: invalid literal" in text
    incident = answer.body.split("(incident ")[1].rstrip(").")
    assert incident in record.getMessage()


def test_a_background_threads_traceback_hides_what_follows_a_secrets_name() -> None:
    try:
        raise RuntimeError("the API server said: token=tok-81b2c7d6e5f4 is not valid")
    except RuntimeError:
        text = traceback_text()
    assert "tok-81b2c7d6e5f4" not in text and f"token={HIDDEN}" in text
    assert "Traceback (most recent call last)" in text and "RuntimeError: the API server said" in text


def test_a_body_nested_past_the_recursion_limit_still_gives_its_values() -> None:
    deep: object = SECRET
    for _ in range(5000):
        deep = [deep]
    assert request_values(deep) == [SECRET]
    text = "[" * 100_000 + "]" * 100_000  # past the JSON parser's depth: hidden as one value
    assert request_values(text) == [text]
