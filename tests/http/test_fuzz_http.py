"""schemathesis against the running service over real HTTP: the backend served by waitress (the
production server) on the project's fake API server, with the simulated GoCD's callback endpoint,
driven by docs/bridge-openapi.yaml. Requests that fit the document and requests that break it, for
every operation: no 5xx, and every answer as the document says (status, content type, body schema);
a refusal (4xx) creates and deletes no pod.

The suite runs a few examples per operation; `HYPOTHESIS_PROFILE=long` twenty times as many, and
`python -m benchmarks.fuzz_http --examples N` runs the schemathesis command line for a long search
with its own counts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.generation.case import Case

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.stack import TOKEN, Stack, StackOptions
from tests.support.fuzz_strategies import LONG
from tests.support.paths import ROOT

DOCUMENT = ROOT / "docs" / "bridge-openapi.yaml"
EXAMPLES_PER_OPERATION = 500 if LONG else 25

schema = schemathesis.openapi.from_path(DOCUMENT)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=EXAMPLES_PER_OPERATION,
    deterministic=not LONG,
)

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    # Data that breaks the document must be refused. Not its converse (positive_data_acceptance): text
    # that fits "a string" is still refused when it is no URL or duration, with a 422 that says so.
    schemathesis.checks.negative_data_rejection,
]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    running = Stack(ScaledClock(60.0), StackOptions(start_gocd=False))
    yield running
    running.stop()


@schema.parametrize()
def test_every_operation_answers_as_documented_and_never_with_a_5xx(case: Case, stack: Stack) -> None:
    assert stack.service is not None
    before = {pod["metadata"]["name"] for pod in stack.pods()}
    # The real token and callback URL: a generated callback URL would send the backend's server calls
    # to hosts on the internet, and the token only decides between 401 and the rest.
    headers = {"Authorization": f"Bearer {TOKEN}", "X-GoCD-Callback-URL": stack.callback_url}
    response = case.call_and_validate(base_url=stack.service.url, headers=headers, checks=CHECKS, timeout=30)
    if 400 <= response.status_code < 500:
        assert {pod["metadata"]["name"] for pod in stack.pods()} == before, response.text
