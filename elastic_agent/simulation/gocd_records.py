"""The records of the simulated GoCD server: jobs, agents, keys, registrations, assignments, settings,
statistics, and what all its parts share (the model is in gocd_model.py)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.clock import Clock

ENV_SERVER_URL = "GO_EA_SERVER_URL"
ENV_KEY = "GO_EA_AUTO_REGISTER_KEY"
ENV_ENVIRONMENT = "GO_EA_AUTO_REGISTER_ENVIRONMENT"
ENV_AGENT_ID = "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID"
ENV_PLUGIN_ID = "GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID"


class JobState(StrEnum):
    SCHEDULED = "Scheduled"
    BUILDING = "Building"
    COMPLETED = "Completed"
    CANCELLED = "Cancelled"  # cancelled while waiting; a cancelled build completes with result Cancelled
    RESCHEDULED = "Rescheduled"


class AgentState(StrEnum):
    IDLE = "Idle"
    BUILDING = "Building"
    LOST_CONTACT = "LostContact"
    MISSING = "Missing"


class BuildState(StrEnum):
    IDLE = "Idle"
    BUILDING = "Building"
    CANCELLED = "Cancelled"
    UNKNOWN = "Unknown"


class ConfigState(StrEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"


@dataclass
class Job:
    job_id: int
    pipeline: str
    pipeline_counter: int
    stage: str
    stage_counter: str
    job_name: str
    elastic_profile_properties: dict[str, str]
    cluster_profile_properties: dict[str, str]
    environment: str | None
    duration_s: float
    scheduled_at: float
    # What the job's tasks end with: Passed, or Failed (a remote agent is told to exit 1).
    planned_result: str = "Passed"
    state: JobState = JobState.SCHEDULED
    result: str | None = None  # Passed, Failed or Cancelled once completed
    agent_id: str | None = None
    assigned_at: float | None = None
    ends_at: float | None = None
    completed_at: float | None = None
    create_agent_sent_at: float | None = None  # the latest send
    create_agent_sends: int = 0
    rescheduled_as: int | None = None
    console: list[str] = field(default_factory=list)
    # The states and results a remote agent reported for this job, in order (gocd_agent_api.py).
    agent_reports: list[str] = field(default_factory=list)

    @property
    def console_text(self) -> str:
        return "".join(self.console)

    @property
    def wait_s(self) -> float | None:
        return None if self.assigned_at is None else self.assigned_at - self.scheduled_at

    def identifier(self) -> dict[str, Any]:
        """The `job_identifier` object GoCD sends (docs/architecture.md, "Requests"): pipeline_counter and
        job_id numbers, stage_counter a string."""
        return {
            "pipeline_name": self.pipeline,
            "pipeline_label": str(self.pipeline_counter),
            "pipeline_counter": self.pipeline_counter,
            "stage_name": self.stage,
            "stage_counter": self.stage_counter,
            "job_name": self.job_name,
            "job_id": self.job_id,
        }

    def profiles(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.elastic_profile_properties, self.cluster_profile_properties

    def console_key(self) -> tuple[str, str, str, str, str]:
        return self.pipeline, str(self.pipeline_counter), self.stage, self.stage_counter, self.job_name

    def rerun(self, job_id: int, now: float) -> Job:
        """A new run of the same job (GoCD's reschedule): same identifier, new job id, waiting again."""
        name = (self.pipeline, self.pipeline_counter, self.stage, self.stage_counter, self.job_name)
        rerun = Job(job_id, *name, *self.profiles(), self.environment, self.duration_s, now)
        rerun.planned_result = self.planned_result
        return rerun


@dataclass
class Agent:
    agent_id: str  # the elastic agent id: GoCD's handle for the plugin
    pod_name: str
    plugin_id: str
    environments: frozenset[str]
    # When its get-work back-off last began: its registration, then the end of each job it ran
    # (gocd_timing.PollBackOff: its polls are a pure function of this instant).
    backoff_since: float
    agent_state: AgentState = AgentState.IDLE
    build_state: BuildState = BuildState.IDLE
    config_state: ConfigState = ConfigState.ENABLED
    running_job_id: int | None = None
    process_alive: bool = True
    lost_contact_at: float | None = None  # when GoCD notices (or noticed) the silence
    next_poll_at: float = 0.0
    # Idle with no job of its environments waiting: its polls would ask nothing, so none are queued
    # until such a job arrives (poll times are a pure function of the agent, so skipping is invisible).
    dormant: bool = False
    jobs_run: int = 0
    # A process of its own that talks to the agent API over HTTP (gocd_agent_api.py): it asks for work
    # itself, reports its jobs' completion and pings; the model neither polls nor completes for it.
    remote: bool = False
    # status() as compact JSON, for the states it was encoded in: an idle agent's status goes into every
    # should-assign-work body of every poll, and rarely changes between them.
    _status_text: tuple[tuple[str, str, str], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def can_poll(self) -> bool:
        return (
            self.process_alive
            and self.agent_state is AgentState.IDLE
            and self.config_state is ConfigState.ENABLED
        )

    @property
    def lost_contact_pending(self) -> bool:
        unheard = self.agent_state in (AgentState.LOST_CONTACT, AgentState.MISSING)
        # A remote agent is always due to be lost at its latest ping's deadline (`lost_contact_at`).
        return (self.remote or not self.process_alive) and not unheard

    def status_text(self) -> str:
        """`status()` encoded as GoCD sends it (compact JSON)."""
        states = (self.agent_state.value, self.build_state.value, self.config_state.value)
        if self._status_text is None or self._status_text[0] != states:
            self._status_text = (states, json.dumps(self.status(), separators=(",", ":")))
        return self._status_text[1]

    def status(self) -> dict[str, str]:
        return {
            "agent_id": self.agent_id,
            "agent_state": self.agent_state.value,
            "build_state": self.build_state.value,
            "config_state": self.config_state.value,
        }


@dataclass
class RegistrationKey:
    key: str
    job_id: int
    issued_at: float
    expires_at: float
    used_by: str | None = None
    used_at: float | None = None


@dataclass(frozen=True)
class RegistrationAttempt:
    at: float
    pod_name: str
    agent_id: str
    key: str
    environments: frozenset[str]
    status: int  # 200 registered, 422 refused
    reason: str | None
    answer: str = ""  # the body GoCD answers with (gocd_registration.py): it names the key when refusing it


@dataclass
class Assignment:
    job_id: int
    agent_id: str
    assigned_at: float
    finished_at: float | None = None


@dataclass(frozen=True)
class PluginFailure:
    at: float
    request_name: str
    status: int
    answer_excerpt: str


@dataclass(frozen=True)
class HealthMessage:
    type: str  # warning or error
    message: str


@dataclass
class GoCDConfig:
    scheduler_interval_s: float = 5.0
    job_starvation_timeout_s: float = 120.0
    key_ttl_s: float = 30 * 60.0
    # An idle agent's get-work back-off (gocd/gocd agent.properties, gocd_timing.PollBackOff): the first
    # wait, its growth after each poll without work, and the longest wait. A fixed interval X is
    # get_work_delay_s = get_work_interval_s = X.
    get_work_delay_s: float = 1.0  # agent.get.work.delay
    get_work_multiplier: float = 1.5  # agent.get.work.backOffMultiplier
    get_work_interval_s: float = 10.0  # agent.get.work.interval
    # True: agents of GoCD 23.1.0 to 25.3.0, which slept a step before every get-work, even the one after
    # a job; False: 25.4.0 and later, which ask at once after a job (gocd_timing.PollBackOff).
    get_work_waits_first: bool = False
    ping_interval_s: float = 60.0
    lost_contact_after_s: float = 300.0
    immediate_lost_contact: bool = False
    cluster_profiles: list[dict[str, str]] | None = None  # None: every cluster profile jobs used
    seed: int = 0
    first_job_id: int = 1
    plugin_id: str = PLUGIN_ID
    server_id: str = "simulated-gocd-server"
    site_url: str = "http://gocd.example.test:8153/go"
    secure_site_url: str = "https://gocd.example.test:8154/go"
    runner_tick_s: float = 0.05
    record_latencies: bool = True
    # GoCD's create-agent queue has this many listener threads per plugin
    # (SystemEnvironment.GO_ELASTIC_PLUGIN_CREATE_AGENT_THREADS, go.elasticplugin.createagent.threads).
    create_agent_threads: int = 5


@dataclass
class GoCDStats:
    create_agent_sent: int = 0  # including re-sends
    create_agent_resends: int = 0
    should_assign_asked: int = 0
    assignments: int = 0
    job_completions_sent: int = 0
    pings_sent: int = 0
    pings_skipped: int = 0  # when nothing could be due (quiet_pings.py)
    registrations_accepted: int = 0
    registrations_refused: int = 0
    jobs_rescheduled: int = 0
    delete_refused_enabled: int = 0
    deleted_with_live_process: int = 0
    should_assign_latencies_s: list[float] = field(default_factory=list)
    protocol_errors: list[str] = field(default_factory=list)
    non_200_answers: list[PluginFailure] = field(default_factory=list)
    deleted_while_building: list[str] = field(default_factory=list)
    assignment_races: list[str] = field(default_factory=list)
    invariant_violations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ServerCore:
    """What every part of the simulated server shares (gocd_model.py): its clock, its state lock (one
    lock: a part that calls another holds it already), its settings (which tests may change while it
    runs, so parts read them when they act) and its statistics."""

    clock: Clock
    lock: threading.RLock
    config: GoCDConfig
    stats: GoCDStats
