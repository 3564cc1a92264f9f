"""A stand-in GoCD agent: one process that does what a real elastic agent does in its pod.

It reads the variables the plugin puts in the pod (GO_EA_SERVER_URL, GO_EA_AUTO_REGISTER_KEY,
GO_EA_AUTO_REGISTER_ENVIRONMENT, GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID, GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID:
those that gocd/docker-gocd-agent's docker-entrypoint.sh writes into config/autoregister.properties),
registers once with its single-use key, pings, asks for work, runs each job, reports it, and asks for the
next while the pod is reused. It never exits after a job. Modelled on gocd/gocd's agent:
`SslInfrastructureService.register` with `TokenRequester.getToken` (GET /admin/agent/token, then POST
/admin/agent, retried every 5 s while refused: a refused key stays refused, so such an agent never gets work),
`AgentHTTPClientController` (get_cookie before the first get_work; ping on its own schedule),
`AgentWorkRetrievalScheduler.run` as in GoCD 25.4.0 and later (the first get-work at once after registering;
after a job, whatever its result, ask again at once and begin the back-off anew; after no work or a failed
attempt, wait the next back-off: Spring's `ExponentialBackOff` from `agent.get.work.delay` 1 s, times
`agent.get.work.backOffMultiplier` 1.5 in whole milliseconds, up to `agent.get.work.interval` 10 s, with no
jitter: 1, 1.5, 2.25, 3.375, 5.062, 7.593, then 10 s; `WorkBackOff`; STANDIN_WORK_WAITS_FIRST=true gives the
loop of GoCD 23.1.0 to 25.3.0, which slept the next back-off before every get-work, so one step before the
first and after each job), `agent.ping.interval` 5 s after an initial 1.5 s, and `RemotingClient` (POST
/remoting/api/agent/<action>, headers X-Agent-GUID and Authorization). A job is reported as `BuildWork.doWork`
does: Preparing, Building, completing, then completed with Passed or Failed, unless `is_ignored` says the
server cancelled or rescheduled it; a ping answered CANCEL (the server no longer has the agent building) ends
the job's tasks at once.

It runs in the agent image with Debian's python3 and nothing else, so it imports only the standard library,
and nothing of this project. STANDIN_SERVER_URL, when set, is where it reaches the server instead of
GO_EA_SERVER_URL: pods on loopback (host network) reach the simulated server at 127.0.0.1, which the
plugin's go_server_url may not name; an elastic profile's Environment can set it. The intervals can be
shortened for tests with STANDIN_PING_S, STANDIN_WORK_DELAY_S, STANDIN_WORK_MULTIPLIER,
STANDIN_WORK_INTERVAL_S and STANDIN_REGISTER_RETRY_S (a setting that is not a number, or a back-off that
cannot grow, stops it at once with exit code 2 and a sentence). STANDIN_EXIT_AT_START=<code> makes it exit
at once with that code, before it registers: an agent image that is broken, as a wrong entrypoint or a
missing Java would make one.

A job's work is a sleep and an exit code (gocd_agent_api.py); the agent prints one line per job to
stdout. On SIGTERM it stops at once: a running job is abandoned unreported, as a real agent's JVM exits on
SIGTERM without reporting; GoCD then finds the agent LostContact and reschedules the job. Reporting a
result the job did not reach would tell GoCD something false, and the plugin never deletes a busy pod.
A refused registration is logged as the real agent logs it (`SslInfrastructureService
.RemoteRegistrationRequester.requestRegistration`: a 422's body at ERROR, in the official images' console
pattern `%date{ISO8601} %-5level [%thread] %logger{0}:%line - %msg%n`), to stdout, at every try. GoCD's
body names the key it refuses, so that line prints the key, as the real agent's does; nothing else
prints it (the stand-in's own lines, on stderr, never do).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuid_module
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

SIGTERM_EXIT = 128 + signal.SIGTERM  # what a JVM ended by SIGTERM exits with
REQUEST_TIMEOUT_S = 30.0


class Refused(Exception):
    """The server answered a status that is not 200."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"status {status}")  # the body may name the key: `body` has it
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Settings:
    server_url: str
    auto_register_key: str
    environments: str
    elastic_agent_id: str
    elastic_plugin_id: str
    ping_s: float
    work_delay_s: float
    work_multiplier: float
    work_interval_s: float
    register_retry_s: float
    work_waits_first: bool = False

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Settings:
        return cls(
            server_url=(env.get("STANDIN_SERVER_URL") or env.get("GO_EA_SERVER_URL", "")).rstrip("/"),
            auto_register_key=env.get("GO_EA_AUTO_REGISTER_KEY", ""),
            environments=env.get("GO_EA_AUTO_REGISTER_ENVIRONMENT", ""),
            elastic_agent_id=env.get("GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID", ""),
            elastic_plugin_id=env.get("GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID", ""),
            ping_s=float(env.get("STANDIN_PING_S", "5")),
            work_delay_s=float(env.get("STANDIN_WORK_DELAY_S", "1")),
            work_multiplier=float(env.get("STANDIN_WORK_MULTIPLIER", "1.5")),
            work_interval_s=float(env.get("STANDIN_WORK_INTERVAL_S", "10")),
            register_retry_s=float(env.get("STANDIN_REGISTER_RETRY_S", "5")),
            work_waits_first=env.get("STANDIN_WORK_WAITS_FIRST", "false").lower() == "true",
        )


class WorkBackOff:
    """The waits between get-work attempts that bring no job, as Spring's `ExponentialBackOff` execution
    (spring-core 4.3, which gocd/gocd's agent uses) computes them: in whole milliseconds, the first
    min(delay, interval), each next one `(long) (previous * multiplier)` up to the interval, then the
    interval for ever (no maximum elapsed time). `restart` is `BackOff.start()` after a job."""

    def __init__(self, delay_s: float, multiplier: float, interval_s: float) -> None:
        self._delay_ms, self._max_ms = round(delay_s * 1000), round(interval_s * 1000)
        if self._delay_ms < 1 or self._max_ms < 1 or not multiplier >= 1:
            raise ValueError(
                f"the work back-off needs a delay and an interval of at least 1 ms and a multiplier of at "
                f"least 1 (got {delay_s} s, {interval_s} s, {multiplier})"
            )
        self._multiplier = multiplier
        self._current_ms = -1

    def restart(self) -> None:
        self._current_ms = -1

    def next_s(self) -> float:
        current, ceiling = self._current_ms, self._max_ms
        if current < 0:
            current = min(self._delay_ms, ceiling)
        elif current < ceiling:
            current = min(int(current * self._multiplier), ceiling)
        self._current_ms = current
        return current / 1000


class Agent:
    def __init__(self, settings: Settings, stop: threading.Event) -> None:
        self.settings = settings
        self.stop = stop
        self.uuid = str(uuid_module.uuid4())  # the real agent keeps one in config/guid.txt
        self.hostname = socket.gethostname()
        self.token = ""
        self.cookie: str | None = None
        self.status = "Idle"  # what pings say: Building while a job runs
        # Ends a running job's tasks: set on SIGTERM, and when a ping answers CANCEL.
        self.interrupt = threading.Event()

    # ---- HTTP ------------------------------------------------------------------------------------

    def _send(self, request: urllib.request.Request) -> str:
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return str(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            raise Refused(error.code, error.read().decode("utf-8", "replace")) from None

    def _runtime_info(self, status: str) -> dict[str, Any]:
        return {
            "type": "ElasticAgentRuntimeInfo",
            "identifier": {"hostName": self.hostname, "ipAddress": "127.0.0.1", "uuid": self.uuid},
            "runtimeStatus": status,
            "location": os.getcwd(),
            "operatingSystemName": sys.platform,
            "cookie": self.cookie,
            "elasticAgentId": self.settings.elastic_agent_id,
            "elasticPluginId": self.settings.elastic_plugin_id,
        }

    def remoting(self, action: str, request_type: str, status: str = "Idle", **members: Any) -> Any:
        body = {"type": request_type, "agentRuntimeInfo": self._runtime_info(status), **members}
        request = urllib.request.Request(
            f"{self.settings.server_url}/remoting/api/agent/{action}",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/vnd.go.cd+json",
                "X-Agent-GUID": self.uuid,
                "Authorization": self.token,
            },
            method="POST",
        )
        text = self._send(request)
        return json.loads(text) if text else None

    # ---- registration ----------------------------------------------------------------------------

    def register(self) -> bool:
        """Fetch a token and register, retrying while refused; False if stopped first."""
        settings = self.settings
        while not self.stop.is_set():
            try:
                if not self.token:
                    query = urllib.parse.urlencode({"uuid": self.uuid})
                    self.token = self._send(
                        urllib.request.Request(f"{settings.server_url}/admin/agent/token?{query}")
                    )
                form = {
                    "hostname": self.hostname,
                    "uuid": self.uuid,
                    "location": os.getcwd(),
                    "usablespace": "0",
                    "operatingSystem": sys.platform,
                    "agentAutoRegisterKey": settings.auto_register_key,
                    "agentAutoRegisterResources": "",
                    "agentAutoRegisterEnvironments": settings.environments,
                    "agentAutoRegisterHostname": settings.elastic_agent_id,
                    "elasticAgentId": settings.elastic_agent_id,
                    "elasticPluginId": settings.elastic_plugin_id,
                    "token": self.token,
                }
                data = urllib.parse.urlencode(form).encode()
                self._send(
                    urllib.request.Request(f"{settings.server_url}/admin/agent", data=data, method="POST")
                )
                log(f"registered as {settings.elastic_agent_id}")
                return True
            except Refused as refused:
                if refused.status == 403:  # the token is not valid (any more): fetch another
                    self.token = ""
                if refused.status == 422:
                    print(agent_error_line(REGISTRATION_ERROR + refused.body), flush=True)
                log(f"registration refused ({refused}); retrying")
            except OSError as error:
                log(f"cannot reach the server ({type(error).__name__}); retrying")
            self.stop.wait(settings.register_retry_s)
        return False

    # ---- the loops -------------------------------------------------------------------------------

    def ping_loop(self) -> None:
        self.stop.wait(min(1.5, self.settings.ping_s))
        while not self.stop.is_set():
            if self.cookie is not None:
                try:
                    if self.remoting("ping", "PingRequest", self.status) == "CANCEL":
                        # The server cancelled or rescheduled the job: stop its tasks, as
                        # `JobRunner.handleInstruction` does.
                        self.interrupt.set()
                except (Refused, OSError, ValueError) as error:
                    log(f"ping failed: {error}")
            self.stop.wait(self.settings.ping_s)

    def work_loop(self) -> None:
        settings = self.settings
        backoff = WorkBackOff(settings.work_delay_s, settings.work_multiplier, settings.work_interval_s)
        while not self.stop.is_set():
            if settings.work_waits_first and self.stop.wait(backoff.next_s()):
                break
            try:
                if self.cookie is None:
                    self.cookie = str(self.remoting("get_cookie", "GetCookieRequest"))
                work = self.remoting("get_work", "GetWorkRequest")
            except (Refused, OSError, ValueError) as error:
                log(f"get_work failed: {error}")
                work = None
            if isinstance(work, dict) and work.get("type") == "BuildWork":
                try:
                    self.run_job(work["assignment"])
                except (Refused, OSError, ValueError, KeyError) as error:
                    log(f"job failed to run or report: {type(error).__name__}: {error}")
                backoff.restart()  # after a job, ask again at once (`BuildWork` swallows its failures)
                continue
            if not settings.work_waits_first:
                self.stop.wait(backoff.next_s())

    def run(self) -> None:
        """Register, then ping and work until stopped."""
        if self.register():
            threading.Thread(target=self.ping_loop, name="ping", daemon=True).start()
            self.work_loop()

    def run_job(self, assignment: dict[str, Any]) -> None:
        job = assignment["jobIdentifier"]
        tasks = assignment["tasks"]
        name = "/".join(
            str(job[k]) for k in ("pipelineName", "pipelineCounter", "stageName", "stageCounter", "buildName")
        )
        seconds, exit_code = float(tasks["sleepSeconds"]), int(tasks["exitCode"])
        print(f"job {name} (id {job['buildId']}): sleep {seconds:g} s, exit {exit_code}", flush=True)
        self.remoting(
            "report_current_status",
            "ReportCurrentStatusRequest",
            "Building",
            jobIdentifier=job,
            jobState="Preparing",
        )
        self.remoting(
            "report_current_status",
            "ReportCurrentStatusRequest",
            "Building",
            jobIdentifier=job,
            jobState="Building",
        )
        self.interrupt.clear()
        self.status = "Building"
        try:
            self.interrupt.wait(seconds)
            if self.stop.is_set():
                return  # SIGTERM: abandoned unreported (see the module's docstring)
            result = "Passed" if exit_code == 0 else "Failed"
            if self.remoting("is_ignored", "IsIgnoredRequest", "Building", jobIdentifier=job) is True:
                print(f"job {name}: ignored (cancelled or rescheduled by the server)", flush=True)
                return
        finally:
            self.status = "Idle"
        print(f"job {name}: {result}", flush=True)  # before reporting: once GoCD knows, it is done
        self.remoting(
            "report_completing",
            "ReportCompleteStatusRequest",
            "Building",
            jobIdentifier=job,
            jobResult=result,
        )
        self.remoting(
            "report_completed", "ReportCompleteStatusRequest", "Idle", jobIdentifier=job, jobResult=result
        )


def log(message: str) -> None:
    print(f"standin-agent: {message}", file=sys.stderr, flush=True)


REGISTRATION_ERROR = "[Agent Registration] Error occurred during agent registration process: "


def agent_error_line(message: str) -> str:
    """`message` as the real agent's ERROR line of SslInfrastructureService.java (its line 159, in the
    work loop's thread of the Spring scheduler `scheduler`; the JVM's zone is UTC in the images)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return f"{now} ERROR [scheduler-1] SslInfrastructureService:159 - {message}"


def main() -> int:
    broken = os.environ.get("STANDIN_EXIT_AT_START")
    if broken:
        log(f"told to exit at start with code {broken}")
        return int(broken)
    try:
        settings = Settings.from_env(dict(os.environ))
        WorkBackOff(settings.work_delay_s, settings.work_multiplier, settings.work_interval_s)
    except ValueError as error:
        log(f"a setting is not usable: {error}")
        return 2
    if not settings.server_url.endswith("/go"):
        log("GO_EA_SERVER_URL must be the server's URL ending in /go")
        return 2
    stop = threading.Event()
    agent = Agent(settings, stop)

    def on_sigterm(_signal: int, _frame: FrameType | None) -> None:
        stop.set()
        agent.interrupt.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)
    # Every request runs off the main thread, which only waits: a SIGTERM arriving while a request waits
    # on the network is handled at once, not when that request returns.
    worker = threading.Thread(target=agent.run, name="work", daemon=True)
    worker.start()
    while worker.is_alive() and not stop.is_set():
        stop.wait(1.0)
    log("stopped")
    return SIGTERM_EXIT if stop.is_set() else 1


def standin_command(_pod_name: str, _variables: Sequence[str]) -> list[str]:
    """How `StackOptions(agent_command=...)` runs this file for each pod: with this interpreter."""
    return [sys.executable, str(Path(__file__).resolve())]


if __name__ == "__main__":
    sys.exit(main())
