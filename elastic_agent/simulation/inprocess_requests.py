"""GoCD's requests reaching this project's executors in process: as values, the way the in-process
simulations send them.

The simulated server of the in-process simulations (gocd_inprocess.py) hands each request's body over as
the JSON-shaped value it would otherwise encode. `InProcessTransport.send_value` builds the request
object from it with the typed constructors the parsers themselves use for well-formed bodies
(`ShouldAssignWorkRequest.well_formed`, `JobIdentifier.well_formed`, `plain_properties`; the parser
adds only the reading of the text and the explanations for bodies that are not well formed) and calls
the executor behind the parser (`executors.agent_lifecycle.*_request`,
`executors.server_ping.server_ping_request`) inside the same `answer_safely` as the HTTP app. So a
simulation writes and reads no JSON text, which would cost time and decide nothing: the JSON contract is
tested where it is real, over HTTP (tests/http/test_service_http.py, the fuzzers, the bridge's end-to-end
test), and tests/unit/simulation/test_inprocess_requests.py shows these constructors read the server's
bodies as the parsers do.

Text still has its door, `send`: the other requests (status reports, profile validation, which the
server sends only when a scenario asks) and a body the constructors do not take (it gets the parser's
explanation), and the scenario tests that write a request's text by hand. Both doors count requests and
real seconds per request name the same way.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from elastic_agent.backend import Backend
from elastic_agent.gocd.body import plain_properties
from elastic_agent.gocd.messages import (
    Agent,
    CreateAgentRequest,
    JobCompletionRequest,
    JobIdentifier,
    ServerPingRequest,
    ShouldAssignWorkRequest,
)
from elastic_agent.service.app import answer_safely
from elastic_agent.simulation.gocd_transport import REQUEST_PREFIX, encode
from executors.agent_lifecycle import create_agent_request, job_completion_request, should_assign_work_request
from executors.base import RequestContext
from executors.base import Response as PluginResponse
from executors.dispatch import executor_for
from executors.server_ping import server_ping_request

CALLBACK_URL = "inprocess://gocd"
SHOULD_ASSIGN = REQUEST_PREFIX + "should-assign-work"

Executor = Callable[[Any, RequestContext], PluginResponse]


def create_agent(body: dict[str, Any]) -> CreateAgentRequest | None:
    key, job = body.get("auto_register_key"), JobIdentifier.well_formed(body.get("job_identifier"))
    elastic = plain_properties(body.get("elastic_agent_profile_properties"))
    cluster = plain_properties(body.get("cluster_profile_properties"))
    environment = body.get("environment")
    if type(key) is not str or job is None or elastic is None or cluster is None:
        return None
    if environment is not None and type(environment) is not str:
        return None
    return CreateAgentRequest(key, elastic, cluster, environment or None, job)


def job_completion(body: dict[str, Any]) -> JobCompletionRequest | None:
    agent_id, job = body.get("elastic_agent_id"), JobIdentifier.well_formed(body.get("job_identifier"))
    elastic = plain_properties(body.get("elastic_agent_profile_properties"))
    cluster = plain_properties(body.get("cluster_profile_properties"))
    if type(agent_id) is not str or job is None or elastic is None or cluster is None:
        return None
    return JobCompletionRequest(agent_id, elastic, cluster, job)


def server_ping(body: dict[str, Any]) -> ServerPingRequest | None:
    profiles = body.get("all_cluster_profile_properties")
    if type(profiles) is not list:
        return None
    plain = [plain_properties(item) for item in profiles]
    if any(item is None for item in plain):
        return None
    return ServerPingRequest([item for item in plain if item is not None])


# Request name -> (the request from the body's value, or None for the text door; its executor).
READERS: dict[str, tuple[Callable[[dict[str, Any]], Any], Executor]] = {
    REQUEST_PREFIX + "create-agent": (create_agent, create_agent_request),
    SHOULD_ASSIGN: (ShouldAssignWorkRequest.well_formed, should_assign_work_request),
    REQUEST_PREFIX + "job-completion": (job_completion, job_completion_request),
    REQUEST_PREFIX + "server-ping": (server_ping, server_ping_request),
}


class AskedAbout:
    """should-assign-work read from the server's value, with the job's part read once per job.

    The simulated server builds each waiting job's members once (`InProcessGoCD._should_assign_body`)
    and sends the same objects in every body about that job, from every agent at every poll: most of
    these requests repeat one about the same job, as most bodies do over HTTP, where the parser answers
    a repeated body from its cache (`ShouldAssignWorkRequest.parse`). Here a repeat is known by the
    identity of the job's member objects, which the cache holds (so no other object can take their
    ids while an entry lives); only the agent's part is read again. Bounded like the parser's cache."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._jobs: OrderedDict[int, tuple[tuple[object, ...], ShouldAssignWorkRequest]] = OrderedDict()

    def __call__(self, body: dict[str, Any]) -> ShouldAssignWorkRequest | None:
        job = body.get("job_identifier")
        members = (job, body.get("environment"), body.get("elastic_agent_profile_properties"),
                   body.get("cluster_profile_properties"))  # fmt: skip
        cached = self._jobs.get(id(job))
        if cached is not None:
            seen = cached[0]
            if seen[0] is job and seen[1] is members[1] and seen[2] is members[2] and seen[3] is members[3]:
                agent = Agent.well_formed(body.get("agent"))
                return None if agent is None else cached[1].asked_by(agent)
        request = ShouldAssignWorkRequest.well_formed(body)
        if request is not None:
            self._jobs[id(job)] = (members, request)
            while len(self._jobs) > self._capacity:
                self._jobs.popitem(last=False)
        return request


class InProcessTransport:
    """The simulated server's transport to this project's backend, answered by the executors directly."""

    def __init__(self, backend: Backend, callback_url: str = CALLBACK_URL) -> None:
        self.backend = backend
        self._context = RequestContext(backend, callback_url)
        self._readers: dict[str, tuple[Callable[[dict[str, Any]], Any], Executor]] = {
            **READERS, SHOULD_ASSIGN: (AskedAbout(), should_assign_work_request)
        }
        self.requests: dict[str, int] = {}
        self.seconds: dict[str, float] = {}  # real time spent in the backend, per request name

    def send_value(self, request_name: str, body: dict[str, Any]) -> tuple[int, str]:
        reader = self._readers.get(request_name)
        request = reader[0](body) if reader is not None else None
        if reader is None or request is None:
            return self.send(request_name, encode(body))
        started = time.perf_counter()
        executor, context = reader[1], self._context
        answer = answer_safely(request_name, lambda: executor(request, context), lambda: body)
        self._count(request_name, started)
        return answer.status, answer.body

    def send(self, request_name: str, body: str) -> tuple[int, str]:
        started = time.perf_counter()
        executor = executor_for(request_name)
        if executor is None:
            return 404, f"'{request_name}' is not a request this plugin knows."
        text_executor, context = executor, self._context
        answer = answer_safely(request_name, lambda: text_executor(body, context), lambda: body)
        self._count(request_name, started)
        return answer.status, answer.body

    def _count(self, request_name: str, started: float) -> None:
        self.requests[request_name] = self.requests.get(request_name, 0) + 1
        self.seconds[request_name] = self.seconds.get(request_name, 0.0) + time.perf_counter() - started
