"""A simulated GoCD server: the part of GoCD an elastic-agent plugin sees (docs/architecture.md, "GoCD's
elastic-agent protocol").

It schedules jobs, sends create-agent (re-sent to starving jobs with a fresh single-use key), registers
agents started by the simulated kubelet, lets idle agents poll for work under one global assignment lock
asking should-assign-work in scheduling order, completes jobs, pings, and answers the plugin's server
calls. Everything is recorded for tests and benchmarks. `step()` does everything due at `clock.now()` in
a fixed order, event by event in virtual time or in a thread for real or scaled time (gocd_driver.py).

`SimulatedGoCD` composes parts with one job each, every one passed what it needs:

- gocd_jobs.JobBook: the jobs, and which are planned, waiting or running;
- gocd_tick.AssignmentTick: the 5-s tick that loads the planned jobs and sends create-agent;
- gocd_keys.RegistrationKeys: the single-use auto-register keys;
- gocd_agents.AgentRegistry: the registered agents, their states, and when one's silence is noticed;
- gocd_lost_contact.LostContact: an agent lost, and the job it was building rescheduled;
- gocd_registrar.Registrar: who may register, and the refused agents that ask again;
- gocd_polls.PollTimers: when each idle in-process agent asks for work;
- gocd_assignment.WorkAssignment: should-assign-work asked across the waiting jobs, and the assignment;
- gocd_completions.JobCompletions: a job's end and its job-completion;
- gocd_pings.ServerPings: the server-ping and the cluster profiles it carries;
- gocd_messages.PluginMessenger: every request to the plugin, and what its answers leave in the stats;
- gocd_server_side.ServerSide: the plugin's other calls (server info, health messages, console);
- gocd_agent_side.RemoteAgents: what agents that are processes of their own ask (gocd_agent_api.py);
- gocd_assignment_log.AssignmentLog: which agent ran which job, when.

This class keeps the rules that span parts (a job scheduled or cancelled, an agent registered or
stopped), the order of a step, and the public API. The records are in gocd_records.py; the timed queues
and the agents' poll times in gocd_timing.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from elastic_agent.clock import Clock
from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.agents import Console
from elastic_agent.simulation.gocd_agent_side import RemoteAgents
from elastic_agent.simulation.gocd_agents import AgentRegistry
from elastic_agent.simulation.gocd_assignment import WorkAssignment
from elastic_agent.simulation.gocd_assignment_log import AssignmentLog
from elastic_agent.simulation.gocd_completions import JobCompletions
from elastic_agent.simulation.gocd_driver import Driver
from elastic_agent.simulation.gocd_jobs import ConsoleKey, JobBook
from elastic_agent.simulation.gocd_keys import RegistrationKeys
from elastic_agent.simulation.gocd_lost_contact import LostContact
from elastic_agent.simulation.gocd_messages import Body, PluginMessenger
from elastic_agent.simulation.gocd_pings import ProfileKey, ServerPings
from elastic_agent.simulation.gocd_polls import PollTimers

# ENV_KEY, AgentState and ConfigState are re-exported: callers import them from here.
from elastic_agent.simulation.gocd_records import ENV_KEY as ENV_KEY
from elastic_agent.simulation.gocd_records import (
    Agent,
    Assignment,
    GoCDConfig,
    GoCDStats,
    HealthMessage,
    Job,
    JobState,
    RegistrationAttempt,
    RegistrationKey,
    ServerCore,
)
from elastic_agent.simulation.gocd_records import AgentState as AgentState
from elastic_agent.simulation.gocd_records import ConfigState as ConfigState
from elastic_agent.simulation.gocd_registrar import Registrar
from elastic_agent.simulation.gocd_server_side import ServerSide
from elastic_agent.simulation.gocd_tick import AssignmentTick
from elastic_agent.simulation.gocd_transport import PluginTransport


class SimulatedGoCD:
    def __init__(
        self,
        clock: Clock,
        transport: PluginTransport,
        config: GoCDConfig | None = None,
        *,
        stopwatch: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`stopwatch`: the plugin's latency is real elapsed time even when the model runs in virtual time."""
        self.config = config or GoCDConfig()
        self.stats = GoCDStats()
        config, stats = self.config, self.stats
        self._clock = clock
        self._transport = transport
        self._state_lock = threading.RLock()
        lock = self._state_lock
        self._step_lock = threading.Lock()
        start = clock.now()
        core = ServerCore(clock, lock, config, stats)
        self._keys = RegistrationKeys(core)
        self._book = JobBook(config.first_job_id, lock)
        self._registry = AgentRegistry(core)
        agents = self._registry.agents
        self._timers = PollTimers(config, agents, self._book, self._poll_is_current)
        self._messenger = PluginMessenger(core, self._send)
        self._log = AssignmentLog()
        self._lost_contact = LostContact(stats, self._book, self._log, self._add_job)
        self._completions = JobCompletions(core, self._book, agents, self._timers, self._log, self._messenger)
        self._assigner = WorkAssignment(
            core,
            book=self._book,
            agents=agents,
            timers=self._timers,
            completions=self._completions,
            log=self._log,
            messenger=self._messenger,
            stopwatch=stopwatch,
            agent_status=self._agent_status,
            should_assign_body=self._should_assign_body,
        )
        self._tick = AssignmentTick(core, self._book, self._timers, self.issue_key, self._messenger, start)
        # GoCD's own memory of its cluster profiles: an attribute of the server, which
        # tests/scenarios/test_secrets_and_honesty.py tells apart from the plugin's by `vars(gocd)`.
        self._cluster_profiles_seen: dict[ProfileKey, dict[str, str]] = {}
        self._pings = ServerPings(core, self._messenger, start, self._cluster_profiles_seen)
        self._registrar = Registrar(core, self._keys, agents, self._registered)
        self._server_side = ServerSide(core, self._book)
        self._remote = RemoteAgents(core, self._book, self._registry, self._assigner.poll, self._completions)
        self.registrations: list[RegistrationAttempt] = self._registrar.registrations
        self.refusals: list[RegistrationAttempt] = self._registrar.refusals
        self.assignments: list[Assignment] = self._log.assignments
        self.orphan_console: dict[ConsoleKey, list[str]] = self._server_side.orphan_console
        self._driver = Driver(clock, self.step, self.next_due_at, config, self.record_protocol_error)

    # ---- records read by tests and benchmarks (the others are the parts' lists, set in __init__) ---

    @property
    def health_messages(self) -> list[HealthMessage]:
        return self._server_side.health_messages

    # ---- jobs -------------------------------------------------------------------------------------

    def schedule_job(
        self,
        pipeline: str,
        stage: str,
        job_name: str,
        elastic_profile_properties: Mapping[str, str],
        cluster_profile_properties: Mapping[str, str],
        environment: str | None = None,
        duration_s: float = 60.0,
        *,
        pipeline_counter: int | None = None,
        stage_counter: str = "1",
        planned_result: str = "Passed",
    ) -> Job:
        with self._state_lock:
            cluster = dict(cluster_profile_properties)
            self._pings.note_profile(cluster)
            job = self._book.new_job(
                pipeline,
                stage,
                job_name,
                elastic_profile_properties,
                cluster,
                environment,
                duration_s,
                self._clock.now(),
                pipeline_counter=pipeline_counter,
                stage_counter=stage_counter,
                planned_result=planned_result,
            )
            self._add_job(job)
            return job

    def edit_cluster_profile(self, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        """An admin edits a cluster profile (gocd_pings.ServerPings.edit_profile)."""
        with self._state_lock:
            self._pings.edit_profile(old, new)

    def create_cluster_profile(self, properties: Mapping[str, str]) -> None:
        """An admin creates a cluster profile (gocd_pings.ServerPings.create_profile)."""
        with self._state_lock:
            self._pings.create_profile(properties)

    def delete_cluster_profile(self, properties: Mapping[str, str]) -> None:
        """An admin deletes a cluster profile (gocd_pings.ServerPings.delete_profile)."""
        with self._state_lock:
            self._pings.delete_profile(properties, self._book.scheduled_with_cluster)

    def cancel_job(self, job_id: int) -> bool:
        """Cancel a waiting job (it just stops being offered: no message) or a building one (the agent
        stops at once and job-completion follows, as for any completed job)."""
        with self._state_lock:
            job = self._book.jobs.get(job_id)
            if job is None:
                return False
            if job.state is JobState.SCHEDULED:
                job.state = JobState.CANCELLED
                if self._book.planned.pop(job.job_id, None) is None:
                    self._assigner.withdraw(job)
                return True
            return self._completions.cancel(job)

    def _add_job(self, job: Job) -> None:
        """A job is scheduled: it waits for the next assignment tick (gocd_tick.py)."""
        self._book.add(job)

    # ---- agents (the AgentHost protocol of the simulated kubelet) --------------------------------

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        """The in-process agent registers at once; refused, it asks again until its pod stops."""
        self._registrar.agent_started(pod_name, env, console)

    def register_agent(
        self,
        pod_name: str,
        agent_id: str,
        plugin_id: str,
        key: str,
        environments: frozenset[str],
        server_url: str,
        *,
        remote: bool = False,
        retry: bool = False,
    ) -> RegistrationAttempt:
        """An elastic agent asks to be registered, by the same rules (gocd_registrar.py) whether it is in
        process (the simulated kubelet's `agent_started`) or a process of its own (gocd_agent_api.py)."""
        return self._registrar.register(
            pod_name, agent_id, plugin_id, key, environments, server_url, remote=remote, retry=retry
        )

    def _registered(self, agent: Agent, now: float) -> None:
        """The agent joins the registry and asks for work: at once as it is registered (a step later on an
        agent before 25.4.0: PollBackOff), or by itself when it is remote, which starts its ping deadline."""
        self._registry.add(agent)
        if agent.remote:
            self.agent_heard(agent.agent_id)
        else:
            self._timers.queue_poll(agent, self._timers.next_time(agent, now, inclusive=True))

    def agent_stopped(self, pod_name: str) -> None:
        """The pod's agent process is gone: heartbeats stop, and GoCD notices only after
        `lost_contact_after_s` (or at once with `immediate_lost_contact`). A refused one stops asking."""
        with self._state_lock:
            self._registrar.agent_stopped(pod_name)
            now = self._clock.now()
            agent = self._registry.process_ended(pod_name, now)
            if agent is not None:
                self._lose_contact(agent, now)

    def _lose_contact(self, agent: Agent, now: float) -> None:
        """The agent is LostContact, its job rescheduled (gocd_lost_contact.py)."""
        self._lost_contact.lose(agent, now)

    def _update_liveness(self) -> None:
        with self._state_lock:
            now = self._clock.now()
            for agent in self._registry.silent(now):
                self._lose_contact(agent, now)

    # ---- driving ---------------------------------------------------------------------------------

    def step(self) -> None:
        """Everything due at `clock.now()`, in a fixed order."""
        with self._step_lock:
            self._update_liveness()
            self._tick.run()
            self._registrar.run_retries()
            self._run_polls()
            self._completions.run()
            self._pings.run()

    def next_due_at(self) -> float:
        """The earliest clock time at which `step()` has something to do."""
        with self._state_lock:
            return min(
                self._tick.next_at,
                self._pings.next_at,
                self._timers.queue.first(),
                self._registrar.retries.first(),
                self._completions.queue.first(),
                self._registry.silences.first(),
            )

    def advance_to(self, target: float) -> None:
        """Virtual time: move an advanceable clock (ManualClock) event by event up to `target`."""
        self._driver.advance_to(target)

    def start(self) -> None:
        """Run `step()` in a daemon thread, for real or scaled time (create-agent posted to a queue)."""
        if self._driver.running:
            return
        self._messenger.start_queue(self.config.create_agent_threads)
        self._driver.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._driver.stop(timeout_s)
        self._messenger.stop_queue()

    def _run_polls(self) -> None:
        with self._state_lock:
            due = self._timers.queue.pop_due(self._clock.now())
        for agent_id in due:
            self._assigner.poll(agent_id)

    def poll_now(self, agent_id: str) -> None:
        """The agent asks for work now, between its polls (an idle agent's poll may come at any moment)."""
        self._assigner.poll(agent_id)

    def issue_key(self, job_id: int) -> str:
        """A fresh single-use auto-register key, as the server's `EphemeralAutoRegisterKeyService
        .autoRegisterKey` issues one for each create-agent (it expires `key_ttl_s` after issue)."""
        return self._keys.issue(job_id, self._clock.now())

    # ---- what the in-process server varies (gocd_inprocess.py) -----------------------------------

    def _poll_is_current(self, at: float, agent_id: str) -> bool:
        return self._timers.is_current(at, agent_id)

    def _agent_status(self, agent: Agent) -> Any:
        """The agent's part of a should-assign-work body (encoded here; gocd_inprocess.py keeps the value)."""
        return agent.status_text()

    def _should_assign_body(self, status: Any, job: Job) -> Body:
        return self._assigner.text_body(status, job)

    def _send(self, request_name: str, body: Body) -> tuple[int, str]:
        return self._transport.send(request_name, body if isinstance(body, str) else wire.encode(body))

    def record_protocol_error(self, message: str) -> None:
        self._messenger.record_protocol_error(message)

    # ---- calls from the plugin (gocd_callbacks.ServerApi) ----------------------------------------

    def list_agents(self) -> list[dict[str, str]]:
        return self._registry.list_agents()

    def list_agents_json(self) -> str:
        return self._registry.list_agents_json()

    def disable_agents(self, agent_ids: Iterable[str]) -> None:
        self._registry.disable(agent_ids)

    def delete_agents(self, agent_ids: Iterable[str]) -> list[str]:
        return self._registry.delete(agent_ids)

    def server_info(self) -> dict[str, str]:
        return self._server_side.server_info()

    def forget_keys(self) -> None:
        self._keys.forget()

    def replace_health_messages(self, messages: list[HealthMessage]) -> None:
        self._server_side.replace_health_messages(messages)

    def append_console(self, key: ConsoleKey, text: str) -> bool:
        return self._server_side.append_console(key, text)

    # ---- calls from remote agents (gocd_agent_api.py) --------------------------------------------

    def agent_heard(self, agent_id: str) -> bool:
        return self._remote.heard(agent_id)

    def work_for(self, agent_id: str) -> Job | None:
        return self._remote.work_for(agent_id)

    def record_agent_report(self, agent_id: str, job_id: int, report: str) -> bool:
        return self._remote.record_report(agent_id, job_id, report)

    def complete_reported_job(self, agent_id: str, job_id: int, result: str) -> bool:
        return self._remote.complete_reported(agent_id, job_id, result)

    def is_ignored(self, job_id: int) -> bool:
        return self._remote.is_ignored(job_id)

    # ---- queries for tests and benchmarks --------------------------------------------------------

    def job(self, job_id: int) -> Job:
        return self._book.job(job_id)

    def jobs(self) -> list[Job]:
        return self._book.all()

    def agent(self, agent_id: str) -> Agent | None:
        return self._registry.get(agent_id)

    def agents(self) -> list[Agent]:
        return self._registry.all()

    def keys_issued_for(self, job_id: int) -> list[str]:
        return self._keys.issued_for(job_id)

    def registration_key(self, key: str) -> RegistrationKey | None:
        return self._keys.get(key)

    def wait_times(self) -> dict[int, float]:
        return self._book.wait_times()

    def invariant_violations(self) -> list[str]:
        """Jobs assigned twice, agents running two jobs at once, registrations refused (a pod with a spent,
        expired or unknown key never becomes an agent: a key went into two pods, or waited too long),
        and everything recorded on the way."""
        with self._state_lock:
            return self._log.violations(self.stats, self.refusals)
