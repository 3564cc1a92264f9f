"""A simulated GoCD server: the part of GoCD an elastic-agent plugin sees (docs/architecture.md, "GoCD's
elastic-agent protocol").

It schedules jobs, sends create-agent (re-sent to starving jobs with a fresh single-use key), registers
agents started by the simulated kubelet, lets idle agents poll for work under one global assignment lock
asking should-assign-work in scheduling order, completes jobs, pings, and answers the plugin's server
calls. Everything is recorded for tests and benchmarks.

Two drive modes share one code path: `step()` does everything due at `clock.now()` in a fixed order
(virtual time, in process: see `advance_to`), and `start()`/`stop()` run `step()` in a background thread
for real or scaled time. In that mode create-agent is sent as the real server sends it: the scheduler
posts each to a queue that `create_agent_threads` listeners serve at once (gocd/gocd's
`CreateAgentQueueHandler`, five `CreateAgentListener` threads per plugin by default), so a burst
reaches the plugin concurrently; in virtual time the posts are sent in order. Plugin calls never happen
under the state lock, because the plugin calls back (list-agents during a ping, disable-agents during
should-assign-work) from other threads.

The timed queues and the agents' poll times are in gocd_timing.py; what the plugin calls back and what
tests read are in gocd_server_side.py. Agents may also be processes of their own that register and get
work over HTTP (gocd_agent_api.py): they register by the same key rules, and what the model does for them
instead of polling and completing on its own timers is in gocd_agent_side.py.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from elastic_agent.clock import Clock
from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.agents import Console
from elastic_agent.simulation.gocd_agent_side import AgentSide
from elastic_agent.simulation.gocd_records import (  # re-exported: callers import them from here
    ENV_AGENT_ID,
    ENV_ENVIRONMENT,
    ENV_KEY,
    ENV_PLUGIN_ID,
    ENV_SERVER_URL,
    Agent,
    AgentState,
    Assignment,
    BuildState,
    ConfigState,
    GoCDConfig,
    GoCDStats,
    HealthMessage,
    Job,
    JobState,
    PluginFailure,
    RegistrationAttempt,
    RegistrationKey,
)
from elastic_agent.simulation.gocd_registration import (
    DUPLICATE_REASON,
    EXPIRED_KEY,
    REGISTER_RETRY_S,
    SPENT_KEY,
    UNKNOWN_KEY,
    refusal_log_line,
    registration_answer,
)
from elastic_agent.simulation.gocd_server_side import ConsoleKey, ServerSide
from elastic_agent.simulation.gocd_timing import EPSILON_S, PollBackOff, TimedQueue, is_due
from elastic_agent.simulation.gocd_transport import PluginTransport


@runtime_checkable
class AdvanceableClock(Protocol):
    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


class SimulatedGoCD(ServerSide, AgentSide):
    def __init__(
        self,
        clock: Clock,
        transport: PluginTransport,
        config: GoCDConfig | None = None,
        *,
        stopwatch: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config = config or GoCDConfig()
        self.stats = GoCDStats()
        self._clock = clock
        self._transport = transport
        # Latency of the plugin is real elapsed time even when the model runs in virtual time.
        self._stopwatch = stopwatch
        self._key_rng = random.Random(self.config.seed)
        config = self.config
        self._backoff = PollBackOff.of(
            config.get_work_delay_s,
            config.get_work_multiplier,
            config.get_work_interval_s,
            waits_first=config.get_work_waits_first,
        )
        self._state_lock = threading.RLock()
        # GoCD assigns work under one server-wide lock: a slow should-assign-work delays every agent.
        self._assignment_lock = threading.Lock()
        self._step_lock = threading.Lock()
        self._jobs: dict[int, Job] = {}
        # Scheduled jobs the assignment tick has not picked up yet: no agent sees them, no create-agent
        # was sent (gocd/gocd BuildAssignmentService.reloadJobPlans: work is assigned only from the job
        # plans the 5-s timer loaded, and the same timer sends create-agent for the plans new to it).
        self._planned: dict[int, Job] = {}
        # Job ids grow with scheduling, so insertion order is scheduling order in all three.
        self._waiting: dict[int, Job] = {}
        self._waiting_by_env: dict[str | None, dict[int, Job]] = {}
        self._dormant_by_env: dict[str | None, set[str]] = {}
        # Waiting job id -> its should-assign-work members, encoded (gocd_inprocess.py keeps them as values).
        self._encoded_jobs: dict[int, Any] = {}
        self._polls: TimedQueue[str] = TimedQueue(self._poll_is_current)  # agent ids
        self._completions: TimedQueue[int] = TimedQueue(self._completion_is_current)  # job ids
        self._silences: TimedQueue[str] = TimedQueue(self._silence_is_current)  # agent ids
        # Refused in-process agents, which ask again every REGISTER_RETRY_S: pod -> (next try, env, console).
        self._retrying: dict[str, tuple[float, Mapping[str, str], Console]] = {}
        self._retries: TimedQueue[str] = TimedQueue(self._retry_is_current)  # pod names
        self._running: dict[int, Job] = {}
        self._job_by_identifier: dict[ConsoleKey, int] = {}
        self._pipeline_counters: dict[str, int] = {}
        self._next_job_id = self.config.first_job_id
        self._agents: dict[str, Agent] = {}
        self._agent_by_pod: dict[str, str] = {}
        self._keys: dict[str, RegistrationKey] = {}
        self._cluster_profiles_seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self.registrations: list[RegistrationAttempt] = []
        self.refusals: list[RegistrationAttempt] = []
        self.assignments: list[Assignment] = []
        self._open_assignments: dict[int, Assignment] = {}
        self.health_messages: list[HealthMessage] = []
        self.orphan_console: dict[ConsoleKey, list[str]] = {}
        start = clock.now()
        self._next_scheduler_at = start + self.config.scheduler_interval_s
        self._next_ping_at = start + self.config.ping_interval_s
        self._runner: threading.Thread | None = None
        self._stop_runner = threading.Event()
        self._create_agent_queue: concurrent.futures.ThreadPoolExecutor | None = None

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
            if pipeline_counter is None:
                pipeline_counter = self._pipeline_counters.get(pipeline, 0) + 1
            latest = self._pipeline_counters.get(pipeline, 0)
            self._pipeline_counters[pipeline] = max(latest, pipeline_counter)
            cluster = dict(cluster_profile_properties)
            self._cluster_profiles_seen.setdefault(tuple(sorted(cluster.items())), cluster)
            job = Job(
                job_id=self._next_job_id,
                pipeline=pipeline,
                pipeline_counter=pipeline_counter,
                stage=stage,
                stage_counter=stage_counter,
                job_name=job_name,
                elastic_profile_properties=dict(elastic_profile_properties),
                cluster_profile_properties=cluster,
                environment=environment or None,
                duration_s=duration_s,
                scheduled_at=self._clock.now(),
                planned_result=planned_result,
            )
            self._add_job(job)
            return job

    def edit_cluster_profile(self, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        """An admin edits a cluster profile: server-pings carry the new properties from now on, and so do
        the jobs scheduled from now on. A job already scheduled keeps the profiles it was scheduled with,
        waiting or running, in every request about it: gocd/gocd stores them with the job
        (`JobInstanceSqlMapDao.save` writes a `JobAgentMetadata`; `loadJobPlanAssociatedEntities` reads
        it back into the plan) and `ElasticAgentPluginService.createAgentsFor`, `shouldAssignWork`
        (from `BuildAssignmentService`) and `jobCompleted` send the plan's copies. So for a while the
        plugin hears both: old credentials for old jobs, new ones in the pings."""
        with self._state_lock:
            self._cluster_profiles_seen.pop(tuple(sorted(old.items())), None)
            self._cluster_profiles_seen[tuple(sorted(new.items()))] = dict(new)

    def create_cluster_profile(self, properties: Mapping[str, str]) -> None:
        """An admin creates a cluster profile: server-pings carry it from now on, whether or not a job
        used it yet (`ElasticAgentPluginService.heartbeat` sends the configured profiles)."""
        with self._state_lock:
            self._cluster_profiles_seen.setdefault(tuple(sorted(properties.items())), dict(properties))

    def delete_cluster_profile(self, properties: Mapping[str, str]) -> None:
        """An admin deletes a cluster profile: the next server-pings no longer carry it (gocd/gocd's
        `ElasticAgentPluginService.heartbeat` sends the plugin's cluster profiles as they are then, an
        empty list when none is left). Jobs already assigned keep the properties their plan was
        scheduled with, which job-completion sends (`ElasticAgentPluginService.jobCompleted` reads
        `job.getPlan().getClusterProfile()`). GoCD refuses to delete a cluster profile that elastic
        profiles use (`DeleteClusterProfileCommand.isValid`), and an elastic profile that pipelines use;
        a job still waiting for an agent of a deleted profile needs its pipeline edited after it was
        scheduled (it keeps its stored profiles). That case is not modelled: refused here."""
        key = tuple(sorted(properties.items()))
        with self._state_lock:
            waiting = [
                job.job_id
                for job in self._jobs.values()
                if job.state is JobState.SCHEDULED
                and tuple(sorted(job.cluster_profile_properties.items())) == key
            ]
            if waiting:
                raise ValueError(f"the cluster profile is still used by waiting jobs {waiting}")
            self._cluster_profiles_seen.pop(key, None)

    def cancel_job(self, job_id: int) -> bool:
        """Cancel a waiting job (it just stops being offered: no message) or a building one (the agent
        stops at once and job-completion follows, as for any completed job)."""
        with self._state_lock:
            job = self._jobs.get(job_id)
            if job is None:
                return False
            if job.state is JobState.SCHEDULED:
                job.state = JobState.CANCELLED
                if self._planned.pop(job.job_id, None) is None:
                    self._unwait(job)
                return True
            if job.state is JobState.BUILDING and job.result != "Cancelled":  # cancelled once, ends once
                job.result = "Cancelled"
                job.ends_at = self._clock.now()
                self._completions.push(job.ends_at, job.job_id)
                agent = self._agents.get(job.agent_id or "")
                if agent is not None:  # a cancelling agent still shows Building
                    agent.build_state = BuildState.CANCELLED
                return True
            return False

    def _add_job(self, job: Job) -> None:
        """A job is scheduled: it waits for the next assignment tick (`_admit_planned`)."""
        self._next_job_id = job.job_id + 1
        self._jobs[job.job_id] = job
        self._planned[job.job_id] = job
        self._job_by_identifier[job.console_key()] = job.job_id

    def _admit_planned(self, now: float) -> None:
        """The assignment tick loads the scheduled jobs: from now on agents are offered them, and the
        dormant agents of their environments poll at their next poll time (their back-off went on)."""
        planned, self._planned = self._planned, {}
        for job in planned.values():
            if job.state is not JobState.SCHEDULED:
                continue
            self._waiting[job.job_id] = job
            self._waiting_by_env.setdefault(job.environment, {})[job.job_id] = job
            for agent_id in self._dormant_by_env.pop(job.environment, set()):
                agent = self._agents.get(agent_id)
                if agent is not None and agent.dormant:
                    for environment in agent.environments:
                        self._dormant_by_env.get(environment, set()).discard(agent_id)
                    self._queue_poll(agent, self._next_poll_time(agent, now, inclusive=True))

    def _unwait(self, job: Job) -> None:
        del self._waiting[job.job_id]
        del self._waiting_by_env[job.environment][job.job_id]
        self._encoded_jobs.pop(job.job_id, None)

    # ---- agents (the AgentHost protocol of the simulated kubelet) --------------------------------

    def agent_started(self, pod_name: str, env: Mapping[str, str], console: Console | None = None) -> None:
        """The in-process agent registers at once; refused, it writes GoCD's answer to its console as the
        real agent does (gocd_registration.py) and asks again every REGISTER_RETRY_S with the same key
        (`SslInfrastructureService.register`), until its pod stops. A retry after a refusal for another
        cause than the key is told the key "is either not provided or expired": the first try spent it."""
        attempt = self._register_from(pod_name, env, retry=False)
        if attempt.status == 422 and console is not None:
            console(refusal_log_line(attempt.at, attempt.answer))
            self._retrying[pod_name] = (attempt.at + REGISTER_RETRY_S, env, console)
            self._retries.push(attempt.at + REGISTER_RETRY_S, pod_name)

    def _register_from(self, pod_name: str, env: Mapping[str, str], *, retry: bool) -> RegistrationAttempt:
        environments = frozenset(e.strip() for e in env.get(ENV_ENVIRONMENT, "").split(",") if e.strip())
        agent_id, plugin_id, key = env.get(ENV_AGENT_ID, ""), env.get(ENV_PLUGIN_ID, ""), env.get(ENV_KEY, "")
        server_url = env.get(ENV_SERVER_URL, "")
        return self.register_agent(pod_name, agent_id, plugin_id, key, environments, server_url, retry=retry)

    def _run_retries(self) -> None:
        with self._state_lock:
            due = self._retries.pop_due(self._clock.now())
        for pod_name in due:
            retrying = self._retrying.pop(pod_name, None)
            if retrying is None:
                continue
            _, env, console = retrying
            attempt = self._register_from(pod_name, env, retry=True)
            if attempt.status == 422:
                console(refusal_log_line(attempt.at, attempt.answer))
                self._retrying[pod_name] = (attempt.at + REGISTER_RETRY_S, env, console)
                self._retries.push(attempt.at + REGISTER_RETRY_S, pod_name)

    def _retry_is_current(self, at: float, pod_name: str) -> bool:
        retrying = self._retrying.get(pod_name)
        return retrying is not None and retrying[0] == at

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
        """An elastic agent asks to be registered, by the same rules whether it is in process (the
        simulated kubelet's `agent_started`) or a process of its own (gocd_agent_api.py). `retry`: the
        same agent asks again after a refusal; a refusal then is not counted again (`refusals` and the
        stats count agents refused)."""
        now = self._clock.now()
        with self._state_lock:
            reason = self._registration_refusal(agent_id, plugin_id, server_url, key, now)
            status = 422 if reason else 200
            answer = registration_answer(reason, key, agent_id, plugin_id) if reason else ""
            attempt = RegistrationAttempt(now, pod_name, agent_id, key, environments, status, reason, answer)
            if reason:
                if not retry:
                    self.refusals.append(attempt)
                    self.stats.registrations_refused += 1
                return attempt
            self.registrations.append(attempt)
            self.stats.registrations_accepted += 1
            agent = Agent(agent_id, pod_name, plugin_id, environments, now)
            agent.remote = remote
            self._agents[agent_id] = agent
            self._agent_by_pod[pod_name] = agent_id
            if remote:
                self.agent_heard(agent_id)
            else:
                # At once as it is registered (a step later on an agent before 25.4.0: PollBackOff)
                self._queue_poll(agent, self._next_poll_time(agent, now, inclusive=True))
            return attempt

    def _registration_refusal(
        self, agent_id: str, plugin_id: str, server_url: str, key: str, now: float
    ) -> str | None:
        """Why the server refuses the registration, or None. Modelled on gocd/gocd's
        `AgentRegistrationController.agentRequest`: an elastic agent's key is validated and revoked
        first (`shouldAutoRegister` -> `EphemeralAutoRegisterKeyService.validateAndRevoke`, one
        `ConcurrentMap.remove` that only one caller can win), and only then are the ids checked, so a
        registration refused for a duplicate elastic agent id has spent its key all the same. A refused
        agent keeps retrying with the same key and is refused forever: it never registers."""
        if not server_url.rstrip("/").endswith("/go"):
            return "the agent has no server URL ending in /go"  # it never reaches the server
        if not agent_id or not plugin_id:
            return "the elastic agent id and the plugin id are both required"
        registration_key = self._keys.get(key)
        if registration_key is None:
            return UNKNOWN_KEY
        if registration_key.used_by is not None:
            return SPENT_KEY
        if now >= registration_key.expires_at:
            return EXPIRED_KEY
        registration_key.used_by, registration_key.used_at = agent_id, now  # revoked: whatever follows
        if plugin_id != self.config.plugin_id:
            return f"no elastic agent plugin with id {plugin_id}"
        if agent_id in self._agents:
            return DUPLICATE_REASON
        return None

    def agent_stopped(self, pod_name: str) -> None:
        """The pod's agent process is gone: heartbeats stop, and GoCD notices only after
        `lost_contact_after_s` (or at once with `immediate_lost_contact`). A refused one stops asking."""
        with self._state_lock:
            self._retrying.pop(pod_name, None)
            agent = self._agents.get(self._agent_by_pod.get(pod_name, ""))
            if agent is None or not agent.process_alive:
                return
            now = self._clock.now()
            agent.process_alive = False
            delay = 0.0 if self.config.immediate_lost_contact else self.config.lost_contact_after_s
            agent.lost_contact_at = now + delay
            if delay == 0.0:
                self._lose_contact(agent, now)
            else:
                self._silences.push(agent.lost_contact_at, agent.agent_id)

    def _lose_contact(self, agent: Agent, now: float) -> None:
        agent.agent_state = AgentState.LOST_CONTACT
        job = self._jobs.get(agent.running_job_id) if agent.running_job_id is not None else None
        agent.running_job_id = None
        if job is None:
            return
        # GoCD reschedules a job whose agent vanished: a new run with a new job id, and no job-completion
        # for the old one.
        agent.build_state = BuildState.UNKNOWN
        job.state = JobState.RESCHEDULED
        self._running.pop(job.job_id, None)
        self._finish_assignment(job.job_id, now)
        rerun = job.rerun(self._next_job_id, now)
        job.rescheduled_as = rerun.job_id
        self._add_job(rerun)
        self.stats.jobs_rescheduled += 1

    # ---- driving ---------------------------------------------------------------------------------

    def step(self) -> None:
        """Everything due at `clock.now()`, in a fixed order."""
        with self._step_lock:
            self._update_liveness()
            self._run_scheduler()
            self._run_retries()
            self._run_polls()
            self._run_completions()
            self._run_ping()

    def next_due_at(self) -> float:
        """The earliest clock time at which `step()` has something to do."""
        with self._state_lock:
            return min(
                self._next_scheduler_at,
                self._next_ping_at,
                self._polls.first(),
                self._retries.first(),
                self._completions.first(),
                self._silences.first(),
            )

    def advance_to(self, target: float) -> None:
        """Virtual time: move an advanceable clock (ManualClock) event by event up to `target`."""
        clock = self._clock
        if not isinstance(clock, AdvanceableClock):
            raise TypeError("advance_to needs a clock with advance(), such as ManualClock")
        while (due := self.next_due_at()) <= target:
            if due > clock.now():
                clock.advance(due - clock.now())
            self.step()
        if target > clock.now():
            clock.advance(target - clock.now())

    def start(self) -> None:
        """Run `step()` in a daemon thread, for real or scaled time."""
        if self._runner is not None:
            return
        self._create_agent_queue = concurrent.futures.ThreadPoolExecutor(
            self.config.create_agent_threads, thread_name_prefix="gocd-create-agent"
        )
        self._stop_runner.clear()
        self._runner = threading.Thread(target=self._run, name="simulated-gocd", daemon=True)
        self._runner.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop_runner.set()
        if self._runner is not None:
            self._runner.join(timeout_s)
            self._runner = None
        queue, self._create_agent_queue = self._create_agent_queue, None
        if queue is not None:
            queue.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop_runner.is_set():
            try:
                self.step()
            except Exception as error:  # keep the server alive, like GoCD's timers; surface it in stats
                self.record_protocol_error(f"simulated server step failed: {type(error).__name__}: {error}")
            # Sleep until the next timed event, but never longer than a tick: jobs and agents also arrive
            # from other threads and should be seen promptly.
            until_due = self.next_due_at() - self._clock.now()
            self._clock.sleep(max(0.0, min(self.config.runner_tick_s, until_due)))

    def _completes(self, job: Job) -> bool:
        # A job whose agent process died never completes: it waits for LostContact and a reschedule.
        agent = self._agents.get(job.agent_id or "")
        return job.ends_at is not None and agent is not None and agent.process_alive

    def _poll_is_current(self, at: float, agent_id: str) -> bool:
        agent = self._agents.get(agent_id)
        return agent is not None and agent.can_poll and not agent.dormant and agent.next_poll_at == at

    def _completion_is_current(self, at: float, job_id: int) -> bool:
        job = self._running.get(job_id)
        return job is not None and job.ends_at == at and self._completes(job)

    def _silence_is_current(self, at: float, agent_id: str) -> bool:
        agent = self._agents.get(agent_id)
        return agent is not None and agent.lost_contact_pending and agent.lost_contact_at == at

    def _update_liveness(self) -> None:
        with self._state_lock:
            now = self._clock.now()
            for agent_id in self._silences.pop_due(now):
                self._lose_contact(self._agents[agent_id], now)

    def _run_scheduler(self) -> None:
        sends: list[dict[str, Any]] = []
        with self._state_lock:
            now = self._clock.now()
            if not is_due(self._next_scheduler_at, now):
                return
            while is_due(self._next_scheduler_at, now):
                self._next_scheduler_at += self.config.scheduler_interval_s
            self._admit_planned(now)
            for job in self._waiting.values():
                last = job.create_agent_sent_at
                if last is not None and now - last < self.config.job_starvation_timeout_s - EPSILON_S:
                    continue
                if last is not None:
                    self.stats.create_agent_resends += 1
                self.stats.create_agent_sent += 1
                job.create_agent_sent_at, job.create_agent_sends = now, job.create_agent_sends + 1
                key = self.issue_key(job.job_id)
                sends.append(wire.create_agent_body(key, *job.profiles(), job.environment, job.identifier()))
        queue = self._create_agent_queue
        for body in sends:
            if queue is None:
                self._call("create-agent", body)
            else:
                queue.submit(self._call, "create-agent", body)

    def issue_key(self, job_id: int) -> str:
        """A fresh single-use auto-register key, as the server's `EphemeralAutoRegisterKeyService
        .autoRegisterKey` issues one for each create-agent (it expires `key_ttl_s` after issue)."""
        now = self._clock.now()
        with self._state_lock:
            key = f"{self._key_rng.getrandbits(128):032x}"
            self._keys[key] = RegistrationKey(key, job_id, now, now + self.config.key_ttl_s)
        return key

    def _run_polls(self) -> None:
        with self._state_lock:
            due = self._polls.pop_due(self._clock.now())
        for agent_id in due:
            self._poll(agent_id)

    def _poll(self, agent_id: str) -> None:
        with self._assignment_lock:
            with self._state_lock:
                agent = self._agents.get(agent_id)
                if agent is None or not agent.can_poll:
                    return
                candidates = self._candidates(agent)
                status = self._agent_status(agent)  # unchanged through this poll: it ends at a `true`
            for job in candidates:
                with self._state_lock:
                    if not agent.can_poll or agent_id not in self._agents:
                        break
                    if job.state is not JobState.SCHEDULED:
                        continue
                    body = self._should_assign_body(status, job)
                if self._ask_should_assign(body):
                    with self._state_lock:
                        self._assign(job, agent_id)
                    break
            with self._state_lock:
                if agent.can_poll and agent_id in self._agents:
                    now = self._clock.now()
                    self._queue_poll(agent, self._next_poll_time(agent, now, inclusive=False))

    def poll_now(self, agent_id: str) -> None:
        """The agent asks for work now, between its polls (an idle agent's poll may come at any moment):
        should-assign-work for each waiting job of its environments, the first `true` assigned."""
        self._poll(agent_id)

    def _candidates(self, agent: Agent) -> list[Job]:
        """Waiting jobs of the agent's environments, in scheduling order."""
        if len(agent.environments) < 2:  # the usual case: one list, already in job-id order
            environment = next(iter(agent.environments), None)
            return list(self._waiting_by_env.get(environment, {}).values())
        groups = [list(self._waiting_by_env.get(e, {}).values()) for e in sorted(agent.environments)]
        return list(heapq.merge(*groups, key=lambda job: job.job_id))

    def _queue_poll(self, agent: Agent, at: float) -> None:
        if agent.remote:  # it asks for work itself (get_work)
            return
        environments: Iterable[str | None] = agent.environments or (None,)
        if not any(self._waiting_by_env.get(environment) for environment in environments):
            agent.dormant = True
            for environment in environments:
                self._dormant_by_env.setdefault(environment, set()).add(agent.agent_id)
            return
        agent.dormant, agent.next_poll_at = False, at
        self._polls.push(at, agent.agent_id)

    def _next_poll_time(self, agent: Agent, after: float, *, inclusive: bool) -> float:
        return self._backoff.next_poll(agent.backoff_since, after, inclusive=inclusive)

    def _agent_status(self, agent: Agent) -> Any:
        """The agent's part of a should-assign-work body (encoded here; gocd_inprocess.py keeps the value)."""
        return agent.status_text()

    def _should_assign_body(self, status: Any, job: Job) -> dict[str, Any] | str:
        return wire.should_assign_work_text(status, self._job_members(job))

    def _job_members(self, job: Job) -> str:
        members: str | None = self._encoded_jobs.get(job.job_id)
        if members is None:
            members = wire.should_assign_work_job_members(job.environment, *job.profiles(), job.identifier())
            self._encoded_jobs[job.job_id] = members
        return members

    def _ask_should_assign(self, body: dict[str, Any] | str) -> bool:
        self.stats.should_assign_asked += 1
        started = self._stopwatch()
        answer = self._call("should-assign-work", body)
        if self.config.record_latencies:
            self.stats.should_assign_latencies_s.append(self._stopwatch() - started)
        if answer is None or answer[0] != 200:
            return False
        text = answer[1].strip()
        if text not in ("true", "false"):
            self.record_protocol_error(f"should-assign-work answered {text[:40]!r}, not true or false")
            return False
        return text == "true"

    def _assign(self, job: Job, agent_id: str) -> None:
        now = self._clock.now()
        agent = self._agents.get(agent_id)
        if job.state is not JobState.SCHEDULED or agent is None:
            self.stats.assignment_races.append(f"job {job.job_id} not given to {agent_id}: changed meanwhile")
            return
        if agent.config_state is ConfigState.DISABLED:
            # The plugin disabled the agent between its `true` and the assignment (docs/architecture.md,
            # "What the earlier attempt got wrong", item 9): GoCD still hands the work over, so the test
            # sees what the plugin caused.
            self.stats.assignment_races.append(f"agent {agent_id} disabled while assigned job {job.job_id}")
        if agent.running_job_id is not None:
            self.stats.invariant_violations.append(f"agent {agent_id} got job {job.job_id} while building")
            return
        self._unwait(job)
        self._running[job.job_id] = job
        job.state, job.agent_id, job.assigned_at = JobState.BUILDING, agent_id, now
        if not agent.remote:  # a remote agent reports its job's end itself (report_completed)
            job.ends_at = now + job.duration_s
            self._completions.push(job.ends_at, job.job_id)
        agent.agent_state, agent.build_state = AgentState.BUILDING, BuildState.BUILDING
        agent.running_job_id = job.job_id
        assignment = Assignment(job.job_id, agent_id, now)
        self.assignments.append(assignment)
        self._open_assignments[job.job_id] = assignment
        self.stats.assignments += 1

    def _run_completions(self) -> None:
        bodies: list[dict[str, Any]] = []
        with self._state_lock:
            now = self._clock.now()
            for job_id in self._completions.pop_due(now):
                bodies.append(self._finish_job(self._running.pop(job_id), now))
        for body in bodies:  # sent once, never retried, whatever the answer
            self.stats.job_completions_sent += 1
            self._call("job-completion", body)

    def _finish_job(self, job: Job, now: float) -> dict[str, Any]:
        """The job is Completed and its agent idle; the job-completion body to send (under the state lock)."""
        agent = self._agents[job.agent_id or ""]
        job.state, job.completed_at, job.result = JobState.COMPLETED, now, job.result or job.planned_result
        agent.agent_state, agent.build_state = AgentState.IDLE, BuildState.IDLE
        agent.running_job_id = None
        agent.jobs_run += 1
        # The agent asks for work again at once, its back-off begun anew (`AgentWorkRetrievalScheduler` after
        # `WorkAttempt.OK`; before GoCD 25.4.0 it waited a step first: PollBackOff). That poll is handled at
        # the next step of this instant, after this job-completion reached the plugin. In GoCD the two race:
        # `reportCompleted` posts the job's status on `JobStatusTopic`, whose listener sends job-completion,
        # while the agent checks for an upgrade over HTTP (`AgentController.performWork`) before its next
        # get-work; a plugin that hears the poll first says no, and the agent asks again 1 s later.
        agent.backoff_since = now
        self._queue_poll(agent, self._next_poll_time(agent, now, inclusive=True))
        self._finish_assignment(job.job_id, now)
        return wire.job_completion_body(agent.agent_id, *job.profiles(), job.identifier())

    def _finish_assignment(self, job_id: int, now: float) -> None:
        assignment = self._open_assignments.pop(job_id, None)
        if assignment is not None:
            assignment.finished_at = now

    def _run_ping(self) -> None:
        with self._state_lock:
            now = self._clock.now()
            if not is_due(self._next_ping_at, now):
                return
            while is_due(self._next_ping_at, now):
                self._next_ping_at += self.config.ping_interval_s
            profiles = self.config.cluster_profiles
            if profiles is None:
                profiles = list(self._cluster_profiles_seen.values())
            body = wire.server_ping_body(profiles)
        self.stats.pings_sent += 1
        self._call("server-ping", body)

    def _call(self, name: str, body: dict[str, Any] | str) -> tuple[int, str] | None:
        request_name = wire.REQUEST_PREFIX + name
        try:
            status, answer = self._send(request_name, body)
        except Exception as error:  # a transport that raises is a broken plugin, not a broken server
            self.record_protocol_error(f"{request_name} raised {type(error).__name__}")
            return None
        if status != 200:
            with self._state_lock:
                failure = PluginFailure(self._clock.now(), request_name, status, answer[:200])
                self.stats.non_200_answers.append(failure)
        return status, answer

    def _send(self, request_name: str, body: dict[str, Any] | str) -> tuple[int, str]:
        return self._transport.send(request_name, body if isinstance(body, str) else wire.encode(body))

    def record_protocol_error(self, message: str) -> None:
        with self._state_lock:
            self.stats.protocol_errors.append(message)
