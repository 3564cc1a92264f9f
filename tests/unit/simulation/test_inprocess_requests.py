"""In process, GoCD's requests reach the executors as values (simulation/inprocess_requests.py): the
request objects built from the simulated server's bodies are those the parsers read from the same bodies
as JSON text, and a body the value constructors do not take is answered as its text would be."""

from __future__ import annotations

from typing import Any

from elastic_agent.gocd.messages import (
    CreateAgentRequest,
    JobCompletionRequest,
    ServerPingRequest,
    ShouldAssignWorkRequest,
)
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from elastic_agent.simulation.inprocess_requests import READERS, AskedAbout
from elastic_agent.simulation.plugins import PluginWorld, ProjectPlugin
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, Simulation
from elastic_agent.traces.workload import WorkloadSpec, generate
from tests.support.doubles.harness import VirtualStack

PARSERS: dict[str, Any] = {
    REQUEST_PREFIX + "create-agent": CreateAgentRequest.parse,
    REQUEST_PREFIX + "should-assign-work": ShouldAssignWorkRequest.parse_uncached,
    REQUEST_PREFIX + "job-completion": JobCompletionRequest.parse,
    REQUEST_PREFIX + "server-ping": ServerPingRequest.parse,
}


def sent_bodies() -> list[tuple[str, dict[str, Any]]]:
    """Every request the simulated server sends this project's backend over a short trace, in order."""
    sent: list[tuple[str, dict[str, Any]]] = []

    class Recording(ProjectPlugin):
        def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
            sent.append((request_name, body))
            return super().send_value(request_name, body)

    def plugin(world: PluginWorld) -> Recording:
        return Recording(world)

    trace = generate(WorkloadSpec(jobs=20000, days=1), seed=1)[:80]
    policy = Policy("reuse", {"Reuse": "true", "IdleTimeout": "2m"}, plugin=plugin)
    Simulation(trace, policy, SimSettings(seed=1, tail_s=300.0)).run()
    return sent


def test_every_request_the_server_sends_is_read_as_its_json_text_is_parsed() -> None:
    sent = sent_bodies()
    assert set(PARSERS) == set(READERS)
    assert {name for name, _ in sent} == set(READERS), "every request name the server sends was seen"
    assert any("environment" in body for name, body in sent if name.endswith("create-agent"))
    for name, body in sent:
        read = READERS[name][0](body)
        assert read is not None, f"{name}: the server's body is well formed"
        assert read == PARSERS[name](encode(body)), name


def test_a_body_the_value_constructors_do_not_take_is_answered_as_its_text_is() -> None:
    stack = VirtualStack()
    job = {"pipeline_name": "app", "pipeline_counter": 1, "stage_name": "build", "stage_counter": "1",
           "job_name": "compile", "job_id": 7}  # fmt: skip
    numeric = {  # a property given as a number: the parser takes it as its text
        "auto_register_key": "key-1",
        "elastic_agent_profile_properties": {**stack.elastic_profile(), "MaxCPU": 2},
        "cluster_profile_properties": stack.cluster_profile(),
        "job_identifier": job,
    }
    name = REQUEST_PREFIX + "create-agent"
    assert READERS[name][0](numeric) is None
    assert stack.plugin.send_value(name, numeric) == (200, "")
    stack.settle()
    assert len(stack.pods()) == 1, "created, as from the same body's text"

    without_job = {key: value for key, value in numeric.items() if key != "job_identifier"}
    by_value = stack.plugin.send_value(name, without_job)
    assert by_value == stack.plugin.send(name, encode(without_job))
    assert by_value[0] != 200 and "job_identifier" in by_value[1]


def test_a_repeated_question_about_a_job_is_read_as_its_json_text_is_parsed() -> None:
    """The transport reads a job's part once (AskedAbout); every later body about the same job, from any
    agent in any state, still gives the request its text would."""
    asked = [body for name, body in sent_bodies() if name.endswith("should-assign-work")]
    by_job: dict[int, list[dict[str, Any]]] = {}
    for body in asked:
        by_job.setdefault(body["job_identifier"]["job_id"], []).append(body)
    assert any(len(bodies) > 1 for bodies in by_job.values()), "some job was asked about twice"
    reader = AskedAbout()
    first_read: dict[int, ShouldAssignWorkRequest] = {}
    repeats = 0
    for body in asked:
        read = reader(body)
        assert read is not None
        assert read == ShouldAssignWorkRequest.parse_uncached(encode(body))
        assert read.spec_key == ShouldAssignWorkRequest.parse_uncached(encode(body)).spec_key
        earlier = first_read.setdefault(body["job_identifier"]["job_id"], read)
        if earlier is not read:
            # Read once: the repeat carries the first read's derived key over instead of digesting anew.
            assert read.spec_key is earlier.spec_key
            repeats += 1
    assert repeats > 0


def test_a_body_whose_job_part_is_a_new_object_is_read_afresh() -> None:
    """Equal-looking members in new objects are not taken for the cached ones: the job's part is read
    again, so a changed profile is never answered from an older read."""
    body = next(body for name, body in sent_bodies() if name.endswith("should-assign-work"))
    reader = AskedAbout()
    first = reader(body)
    changed = {**body, "elastic_agent_profile_properties": {**body["elastic_agent_profile_properties"],
                                                            "IdleTimeout": "7m"}}  # fmt: skip
    second = reader(changed)
    assert first is not None and second is not None
    assert second.elastic_profile["IdleTimeout"] == "7m"
    assert second.spec_key != first.spec_key
    broken = {**body, "agent": {"agent_id": "pod-1"}}
    assert reader(broken) is None, "an agent part without its states goes to the text door"
