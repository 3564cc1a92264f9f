"""The agent-facing HTTP side of the simulated GoCD server: what a GoCD agent process talks to.

An agent that runs in its pod (tests/support/doubles/standin_agent.py, or anything that speaks the same
protocol) registers and gets work over HTTP, as a real agent does with a real server. Modelled on
gocd/gocd:

- `GET /go/admin/agent/token?uuid=U`: `AgentRegistrationController.getToken`. The token is the server's
  HMAC-SHA256 of the uuid, base64 (`hmacOf`); refused (409) for a blank uuid or a registered agent.
- `POST /go/admin/agent` (form fields hostname, uuid, location, usablespace, operatingSystem,
  agentAutoRegisterKey, agentAutoRegisterResources, agentAutoRegisterEnvironments,
  agentAutoRegisterHostname, elasticAgentId, elasticPluginId, token): `AgentRegistrationController
  .agentRequest`. 403 for a token that is not the uuid's; an elastic agent goes through
  `SimulatedGoCD.register_agent`, the same single-use key rules as the in-process agents (a key spent
  once, expired or unknown is refused, 422, whatever the ids, with GoCD's own words, which name the
  key: gocd_registration.py); 200 once registered.
- `POST /go/remoting/api/agent/{ping,get_work,get_cookie,report_current_status,report_completing,
  report_completed,is_ignored}`: `InternalAgentControllerV1`, the bodies as gocd/gocd's `Serialization`
  (Gson, with a `type` member naming each request's class) writes them, answered as
  `BuildRepositoryRemoteImpl` does. Headers `X-Agent-GUID` (must be the uuid of the body's
  agentRuntimeInfo: `ensureAgentIsMakingARequestForItself`) and `Authorization` (the uuid's token).

Simplified: plain HTTP on 127.0.0.1, no TLS and no client certificates; only elastic agents register (no
static auto-register key); a job's work is one sleep and an exit code (`assignment.tasks`), from the
simulated Job's duration and planned result, in place of builders, materials and artifacts; no
console-log or artifact upload. A job cancelled while it runs is finished by the server (gocd_model.py's
`cancel_job`); the agent's next ping while it still says Building is answered CANCEL, and `is_ignored`
tells it not to report the job. Job durations are model seconds:
`time_scale` (model seconds per real second, as ScaledClock's factor) turns them into the agent's sleep.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from elastic_agent.service.wsgi import WsgiServer
from elastic_agent.simulation.gocd_model import Job, SimulatedGoCD

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

Answer = tuple[int, str]

CONTEXT = "/go"
TOKEN_PATH = CONTEXT + "/admin/agent/token"
REGISTRATION_PATH = CONTEXT + "/admin/agent"
REMOTING_PREFIX = CONTEXT + "/remoting/api/agent/"
REGISTRATION_FIELDS = (
    "hostname",
    "uuid",
    "location",
    "usablespace",
    "operatingSystem",
    "agentAutoRegisterKey",
    "agentAutoRegisterResources",
    "agentAutoRegisterEnvironments",
    "agentAutoRegisterHostname",
    "elasticAgentId",
    "elasticPluginId",
    "token",
)
_MAX_BODY_BYTES = 64 * 1024  # an agent's requests are small: a runtime info and a job identifier


class AgentApi:
    """The WSGI app. Keeps what the real server keeps about agent processes beside its agent records:
    which uuid registered as which elastic agent, and each uuid's cookie."""

    def __init__(self, model: SimulatedGoCD, *, time_scale: float = 1.0) -> None:
        self._model = model
        self._time_scale = time_scale
        self._token_key = secrets.token_bytes(32)  # the server's token generation key
        self._lock = threading.Lock()
        self._agent_by_uuid: dict[str, str] = {}
        self._cookies: dict[str, str] = {}
        self._remoting: dict[str, Callable[[str, str, dict[str, Any]], Answer]] = {
            "ping": self._ping,
            "get_cookie": self._get_cookie,
            "get_work": self._get_work,
            "report_current_status": self._report_current_status,
            "report_completing": self._report_completing,
            "report_completed": self._report_completed,
            "is_ignored": self._is_ignored,
        }

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        status, text = self._answer(environ)
        content_type = "application/json" if status == 200 else "text/plain; charset=utf-8"
        start_response(f"{status} {HTTPStatus(status).phrase}", [("Content-Type", content_type)])
        return [text.encode("utf-8")]

    def token_for(self, uuid: str) -> str:
        return base64.b64encode(hmac.new(self._token_key, uuid.encode(), hashlib.sha256).digest()).decode()

    def _answer(self, environ: WSGIEnvironment) -> Answer:
        path: str = environ.get("PATH_INFO", "")
        method: str = environ.get("REQUEST_METHOD", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length > _MAX_BODY_BYTES:
            return 413, "request body too large"
        body = environ["wsgi.input"].read(length).decode("utf-8") if length else ""
        if path == TOKEN_PATH and method == "GET":
            return self._token(_single_values(environ.get("QUERY_STRING", "")))
        if path == REGISTRATION_PATH and method == "POST":
            return self._register(_single_values(body))
        if path.startswith(REMOTING_PREFIX) and method == "POST":
            action = self._remoting.get(path[len(REMOTING_PREFIX) :])
            if action is None:
                return 404, f"no such agent API: {path}"
            return self._remote_call(action, environ, body)
        return 404, f"not found: {method} {path}"

    # ---- registration ----------------------------------------------------------------------------

    def _token(self, query: dict[str, str]) -> Answer:
        uuid = query.get("uuid", "").strip()
        if not uuid:
            return 409, "UUID cannot be blank."
        with self._lock:
            if uuid in self._agent_by_uuid:
                return 409, "A token has already been issued for this agent."
        return 200, self.token_for(uuid)

    def _register(self, form: dict[str, str]) -> Answer:
        missing = [name for name in REGISTRATION_FIELDS if name not in form]
        if missing:  # Spring refuses a request without a @RequestParam before the controller runs
            return 400, f"missing form fields: {', '.join(missing)}"
        uuid = form["uuid"]
        if not hmac.compare_digest(form["token"].encode(), self.token_for(uuid).encode()):
            return 403, "Not a valid token."
        agent_id, plugin_id = form["elasticAgentId"].strip(), form["elasticPluginId"].strip()
        if not agent_id and not plugin_id:
            return 422, "this server registers elastic agents only (no auto-register key is configured)"
        environments = frozenset(
            e.strip() for e in form["agentAutoRegisterEnvironments"].split(",") if e.strip()
        )
        # The request reached this server's /go context, so its server URL is this one.
        attempt = self._model.register_agent(
            agent_id, agent_id, plugin_id, form["agentAutoRegisterKey"], environments, CONTEXT, remote=True
        )
        if attempt.reason is not None:
            return 422, attempt.answer  # GoCD's own words: they name the key (gocd_registration.py)
        with self._lock:
            self._agent_by_uuid[uuid] = agent_id
        return 200, ""

    # ---- the remoting API ------------------------------------------------------------------------

    def _remote_call(
        self, action: Callable[[str, str, dict[str, Any]], Answer], environ: WSGIEnvironment, body: str
    ) -> Answer:
        try:
            request = json.loads(body)
            uuid = str(request["agentRuntimeInfo"]["identifier"]["uuid"])
        except (ValueError, KeyError, TypeError):
            return 400, "expected an agent request with agentRuntimeInfo.identifier.uuid"
        header_uuid = environ.get("HTTP_X_AGENT_GUID", "")
        if header_uuid != uuid:
            return 403, f"Agent with uuid: '{header_uuid}' is attempting a request for agent: '{uuid}'."
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        if not hmac.compare_digest(authorization.encode(), self.token_for(uuid).encode()):
            return 403, "the Authorization header is not this agent's token"
        with self._lock:
            agent_id = self._agent_by_uuid.get(uuid)
        if agent_id is None or self._model.agent(agent_id) is None:
            if action == self._get_work:  # `UnregisteredAgentWork`: the agent is not (or no longer) known
                return 200, json.dumps({"type": "UnregisteredAgentWork", "uuid": uuid})
            return 403, "This agent is not registered (deleted from the configuration, or never approved)."
        return action(uuid, agent_id, request)

    def _get_cookie(self, uuid: str, agent_id: str, _request: dict[str, Any]) -> Answer:
        cookie = secrets.token_hex(16)
        with self._lock:
            self._cookies[uuid] = cookie
        self._model.agent_heard(agent_id)
        return 200, json.dumps(cookie)

    def _cookie_refusal(self, uuid: str, request: dict[str, Any]) -> Answer | None:
        """Another process with this uuid took a newer cookie (GoCD's AgentWithDuplicateUUIDException)."""
        with self._lock:
            cookie = self._cookies.get(uuid)
        if cookie is None or request["agentRuntimeInfo"].get("cookie") != cookie:
            return 403, "the agent's cookie is not the one this server gave it: ask for a cookie first"
        return None

    def _ping(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        refused = self._cookie_refusal(uuid, request)
        if refused is not None:
            return refused
        self._model.agent_heard(agent_id)
        # The agent says Building while the server has it building nothing: its job was cancelled, or it
        # was lost and the job rescheduled (`AgentInstance.agentInstruction` answers CANCEL then).
        agent = self._model.agent(agent_id)
        building = request["agentRuntimeInfo"].get("runtimeStatus") == "Building"
        if building and agent is not None and agent.running_job_id is None:
            return 200, json.dumps("CANCEL")
        return 200, json.dumps("NONE")

    def _get_work(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        refused = self._cookie_refusal(uuid, request)
        if refused is not None:
            return refused
        self._model.agent_heard(agent_id)
        job = self._model.work_for(agent_id)
        if job is None:
            return 200, json.dumps({"type": "NoWork"})
        return 200, json.dumps(self._build_work(job))

    def _build_work(self, job: Job) -> dict[str, Any]:
        return {
            "type": "BuildWork",
            "assignment": {
                "jobIdentifier": job_identifier(job),
                "tasks": {
                    "sleepSeconds": job.duration_s / self._time_scale,
                    "exitCode": 0 if job.planned_result == "Passed" else 1,
                },
            },
        }

    def _report(self, uuid: str, agent_id: str, request: dict[str, Any], member: str, prefix: str) -> Answer:
        refused = self._cookie_refusal(uuid, request)
        if refused is not None:
            return refused
        self._model.agent_heard(agent_id)
        try:
            job_id, value = int(request["jobIdentifier"]["buildId"]), str(request[member])
        except (KeyError, TypeError, ValueError):
            return 400, f"expected jobIdentifier.buildId and {member}"
        if prefix == "Completed":
            self._model.complete_reported_job(agent_id, job_id, value)
        else:
            self._model.record_agent_report(agent_id, job_id, f"{prefix}{value}")
        return 200, ""

    def _report_current_status(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        return self._report(uuid, agent_id, request, "jobState", "")

    def _report_completing(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        return self._report(uuid, agent_id, request, "jobResult", "Completing ")

    def _report_completed(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        return self._report(uuid, agent_id, request, "jobResult", "Completed")

    def _is_ignored(self, uuid: str, agent_id: str, request: dict[str, Any]) -> Answer:
        self._model.agent_heard(agent_id)
        try:
            job_id = int(request["jobIdentifier"]["buildId"])
        except (KeyError, TypeError, ValueError):
            return 400, "expected jobIdentifier.buildId"
        return 200, json.dumps(self._model.is_ignored(job_id))


def job_identifier(job: Job) -> dict[str, Any]:
    """gocd/gocd's `JobIdentifier` as Gson writes it (buildId is the job's database id)."""
    return {
        "pipelineName": job.pipeline,
        "pipelineCounter": job.pipeline_counter,
        "pipelineLabel": str(job.pipeline_counter),
        "stageName": job.stage,
        "stageCounter": job.stage_counter,
        "buildName": job.job_name,
        "buildId": job.job_id,
    }


def _single_values(encoded: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(encoded, keep_blank_values=True).items()}


class AgentApiServer:
    """Serves the agent API with waitress on loopback from a background thread."""

    def __init__(
        self, model: SimulatedGoCD, *, time_scale: float = 1.0, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        """`port` 0 takes a free one; a fixed one lets a pod's go_server_url name it before it runs."""
        self.app = AgentApi(model, time_scale=time_scale)
        self._host, self._port = host, port
        self._server: WsgiServer | None = None

    def start(self) -> str:
        """Start serving; the server URL an agent is given (GO_EA_SERVER_URL: it ends in /go)."""
        if self._server is None:
            # One thread per agent is plenty: each holds a request only while should-assign-work runs.
            self._server = WsgiServer(self.app, self._host, self._port, threads=8)
            self._server.start()
        return self.url

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the agent API is not running")
        return f"http://{self._host}:{self._server.port}{CONTEXT}"

    def stop(self) -> None:
        if self._server is not None:
            # Real time on purpose: how long answers in flight may take, not the model's time.
            self._server.stop(time.monotonic() + 2.0)
            self._server = None
