"""Property-based tests of the request dispatch (elastic_agent/service/app.py) and every executor, through
the Flask application from the factory with its test client, on a backend in virtual time (in process:
the real executors, pool and cluster port over the simulation's store, a simulated GoCD).

Any request name, any body: the answer is never a 500 and never an uncaught exception; a refusal (4xx)
is a sentence, and leaves the pool as it was: the same pods at the same resource versions, the same pod
records, the same agents in GoCD. What an accepted request does is not asserted beyond not crashing."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import event, given
from hypothesis import strategies as st

from elastic_agent.service.app import create_app
from executors.dispatch import EXECUTORS, PREFIX
from tests.support.doubles.harness import VirtualStack
from tests.support.fuzz_strategies import ANY_VALUE, HEADER_TEXT, fuzz_settings, mutated
from tests.support.stack_helpers import reuse_profile, schedule
from tests.support.virtual_helpers import run_to_idle, virtual_stack

TOKEN = "fuzz-token-not-a-secret"
POD_TEMPLATE = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: fuzz-{{ POD_POSTFIX }}\nspec:\n  containers:\n"
    "  - name: agent-{{ CONTAINER_POSTFIX }}\n    image: gocd/agent:v1\n"
)


class World:
    """A backend with one idle reusable pod (so that requests about it reach the pool), its app, and
    valid bodies of every request to fuzz from."""

    def __init__(self) -> None:
        self.stack: VirtualStack = virtual_stack()
        self.elastic = reuse_profile(self.stack)
        self.cluster = self.stack.cluster_profile()
        self.pod = run_to_idle(self.stack, schedule(self.stack, self.elastic))
        self.client: FlaskClient = create_app(self.stack.backend, TOKEN).test_client()

    def job(self, job_id: int = 9001) -> dict[str, Any]:
        return {
            "pipeline_name": "build",
            "pipeline_label": "3",
            "pipeline_counter": 3,
            "stage_name": "stage",
            "stage_counter": "1",
            "job_name": "compile",
            "job_id": job_id,
        }

    def bodies(self) -> dict[str, Any]:
        agent = {
            "agent_id": self.pod,
            "agent_state": "Idle",
            "build_state": "Idle",
            "config_state": "Enabled",
        }
        profiles = {
            "elastic_agent_profile_properties": self.elastic,
            "cluster_profile_properties": self.cluster,
        }
        yaml_profile = {"PodSpecType": "yaml", "PodConfiguration": POD_TEMPLATE, "Reuse": "true"}
        return {
            "create-agent": {
                "auto_register_key": "k",
                **profiles,
                "environment": None,
                "job_identifier": self.job(),
            },
            "should-assign-work": {"agent": agent, **profiles, "job_identifier": self.job()},
            "job-completion": {"elastic_agent_id": self.pod, **profiles, "job_identifier": self.job(1)},
            "server-ping": {"all_cluster_profile_properties": [self.cluster]},
            "agent-status-report": {"cluster_profile_properties": self.cluster, "elastic_agent_id": self.pod},
            "cluster-status-report": {"cluster_profile_properties": self.cluster},
            "plugin-status-report": {"all_cluster_profiles_properties": [self.cluster]},
            "cluster-profile-changed": {"status": "updated", "cluster_profiles_properties": self.cluster},
            "validate-cluster-profile": self.cluster,
            "validate-elastic-agent-profile": yaml_profile,
            "migrate-config": {
                "plugin_settings": {},
                "cluster_profiles": [{"id": "c", "plugin_id": "p", "properties": self.cluster}],
                "elastic_agent_profiles": [
                    {"id": "e", "cluster_profile_id": "c", "properties": yaml_profile}
                ],
            },
            "create-agent-from-template": {
                "auto_register_key": "k",
                "elastic_agent_profile_properties": yaml_profile,
                "cluster_profile_properties": self.cluster,
                "job_identifier": self.job(9002),
            },
        }

    def snapshot(self) -> tuple[Any, ...]:
        pods = sorted((p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in self.stack.pods())
        records = sorted((r for pool in self.stack.backend.pools() for r in pool.records()), key=repr)
        agents = self.stack.gocd.list_agents()
        return pods, records, sorted(json.dumps(agent, sort_keys=True) for agent in agents)

    def post(self, name: str, body: str | bytes, **headers: str) -> tuple[int, str]:
        answer = self.client.post(
            f"/gocd/plugin/{name}",
            data=body,
            headers={"Authorization": f"Bearer {TOKEN}", "X-GoCD-Extension-Version": "5.0", **headers},
        )
        self.stack.settle()
        return answer.status_code, answer.get_data(as_text=True)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    yield World()


def request_name(key: str) -> str:
    return PREFIX + ("create-agent" if key == "create-agent-from-template" else key)


def assert_answer(world: World, name: str, before: tuple[Any, ...], status: int, text: str) -> None:
    assert status < 500, f"{name} answered {status}: {text}"
    if 400 <= status < 500:
        assert len(text) > 10 and text[0].isalpha() and "Traceback" not in text, text
        assert world.snapshot() == before, f"{name} was refused ({status}: {text}) yet changed the pool"


def no_incidents(caplog: pytest.LogCaptureFixture) -> None:
    bugs = [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    caplog.clear()
    assert not bugs, bugs


@fuzz_settings(150)
@given(data=st.data())
def test_any_change_to_a_valid_request_is_answered_without_a_500_and_refusals_change_nothing(
    world: World, data: st.DataObject, caplog: pytest.LogCaptureFixture
) -> None:
    bodies = world.bodies()
    key = data.draw(st.sampled_from(sorted(bodies)), label="request")
    body = data.draw(mutated(bodies[key]), label="body")
    before = world.snapshot()
    status, text = world.post(request_name(key), json.dumps(body))
    event(f"{key}: {status}")
    assert_answer(world, key, before, status, text)
    no_incidents(caplog)


@fuzz_settings(150)
@given(
    name=st.sampled_from(sorted(EXECUTORS)),
    body=st.one_of(ANY_VALUE.map(json.dumps), st.text(max_size=60), st.binary(max_size=60)),
)
def test_any_body_to_any_request_is_answered_without_a_500_and_refusals_change_nothing(
    world: World, name: str, body: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    before = world.snapshot()
    status, text = world.post(name, body)
    event(f"{name.removeprefix(PREFIX)}: {status}")
    assert_answer(world, name, before, status, text)
    no_incidents(caplog)


@fuzz_settings(150)
@given(
    name=st.one_of(st.sampled_from(sorted(EXECUTORS)), st.text(max_size=30)),
    method=st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "POST", "OPTIONS", "HEAD"]),
    authorization=st.one_of(st.just(f"Bearer {TOKEN}"), HEADER_TEXT),
    length=st.one_of(st.none(), st.sampled_from(["", "-1", "abc", "²", "٣", " 3", "99999999999999999999"])),
)
def test_any_path_method_token_and_length_is_answered_without_a_500(
    world: World, name: str, method: str, authorization: str, length: str | None
) -> None:
    before = world.snapshot()
    overrides = {} if length is None else {"CONTENT_LENGTH": length}
    answer = world.client.open(
        "/gocd/plugin/" + name.replace("?", "%3F").replace("#", "%23"),
        method=method,
        data=b"{}",
        headers={"Authorization": authorization},
        environ_overrides=overrides,
    )
    world.stack.settle()
    assert answer.status_code < 500, (answer.status_code, answer.get_data(as_text=True))
    if answer.status_code >= 400:
        assert world.snapshot() == before


# Regression tests, one per defect the properties above found.


def test_a_content_length_of_digits_int_cannot_read_is_not_a_500(world: World) -> None:
    answer = world.client.post(
        f"/gocd/plugin/{PREFIX}get-capabilities",
        data=b"",
        headers={"Authorization": f"Bearer {TOKEN}"},
        environ_overrides={"CONTENT_LENGTH": "²"},
    )
    assert answer.status_code == 200


@pytest.mark.parametrize("request_key", ["create-agent-from-template", "should-assign-work"])
@pytest.mark.parametrize("number", [".nan", ".inf"])
def test_a_pod_template_holding_nan_is_a_422_at_create_agent_and_should_assign_work(
    world: World, request_key: str, number: str
) -> None:
    body = world.bodies()[request_key]
    template = POD_TEMPLATE + f"    terminationMessagePath: x\n    stdin: {number}\n"
    body["elastic_agent_profile_properties"] = {"PodSpecType": "yaml", "PodConfiguration": template}
    before = world.snapshot()
    status, text = world.post(request_name(request_key), json.dumps(body))
    assert status == 422 and "not a finite number" in text, text
    assert world.snapshot() == before


def test_a_stage_counter_of_five_thousand_digits_is_a_400_not_a_500(world: World) -> None:
    body = world.bodies()["should-assign-work"]
    body["job_identifier"]["stage_counter"] = "9" * 5000
    status, text = world.post(request_name("should-assign-work"), json.dumps(body))
    assert status == 400 and "stage_counter" in text, text


def test_a_negative_job_id_is_a_400_not_a_pod_the_cluster_refuses(world: World) -> None:
    body = world.bodies()["create-agent"]
    body["job_identifier"]["job_id"] = -793
    before = world.snapshot()
    status, text = world.post(request_name("create-agent"), json.dumps(body))
    assert status == 400 and "'job_id' must not be negative" in text, text
    assert world.snapshot() == before


@pytest.mark.parametrize("length", [" 3", "3"])
def test_a_body_shorter_than_its_declared_length_is_a_400_not_a_500(world: World, length: str) -> None:
    answer = world.client.post(
        f"/gocd/plugin/{PREFIX}agent-status-report",
        data=b"{}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        environ_overrides={"CONTENT_LENGTH": length},
    )
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert "ended before its declared Content-Length" in answer.get_data(as_text=True)
