"""The advice for a whole trace: every profile's search side by side in one pool of workers, the
candidates that draw on what one backend shares run as whole installations (installation.py), then the
recommendations together on this server and a tuned one (together.py); and `run_advisor`, which reads
the trace and prints it all.

With `advise.py`, the advisor's modules that import the simulator; `command.py` imports this one only
when `advise` runs, so that building the command line (for `serve` too) loads no simulation module.
"""

from __future__ import annotations

import concurrent.futures
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from elastic_agent.advisor.advise import (
    BASELINE,
    DEFAULT_IDLE_TIMEOUTS,
    DEFAULT_MIN_IDLE,
    ProfileAdvice,
    ProfileRequest,
    ScheduleOptions,
    Shared,
    advise_profile,
    prediction_candidates,
    render,
    summary,
)
from elastic_agent.advisor.cache import RunCache
from elastic_agent.advisor.calibration import Calibration, calibrate
from elastic_agent.advisor.calibration_report import render_calibration, render_current
from elastic_agent.advisor.current_policy import CurrentPolicy, GivenPodStart
from elastic_agent.advisor.followers import following
from elastic_agent.advisor.holdout import Split, split_trace
from elastic_agent.advisor.installation import Installation, InstallationRun, same_everywhere, shares_state
from elastic_agent.advisor.knee import DEFAULT_MIN_GAIN_S, rule_text
from elastic_agent.advisor.predict_report import render_predict
from elastic_agent.advisor.report_html import save_html
from elastic_agent.advisor.report_json import Context, document, write
from elastic_agent.advisor.runner import Runner, Started
from elastic_agent.advisor.together import (
    GOCD_DEFAULTS,
    TUNED,
    Server,
    TogetherRun,
    as_recommended,
    render_together,
)
from elastic_agent.progress import Progress, progress_bar
from elastic_agent.simulation.run_settings import Engine, SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate_by_profile
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.schedule_advice import Demand, ScheduleProposal, analyse, propose
from elastic_agent.traces.workload import TraceJob, describe, read_trace


@dataclass(frozen=True)
class Request:
    """What to search and what to aim at (the command's options)."""

    idle_timeouts: Sequence[str] = DEFAULT_IDLE_TIMEOUTS
    min_idle: Sequence[int] = DEFAULT_MIN_IDLE
    target: float = 0.2
    p95_target: float | None = None
    schedules: ScheduleOptions = field(default_factory=ScheduleOptions)
    exhaustive: bool = False
    prediction: bool = True
    knee_gain: float = DEFAULT_MIN_GAIN_S  # knee.py: the recommendation when the targets are missed


@dataclass(frozen=True)
class ScheduleOption:
    """One combination of the schedule options' values; every profile's schedule made with it runs
    together."""

    plain: str  # IdleTimeout outside the busy hours
    busy: str  # IdleTimeout in them
    quantile: float  # the warm pool's share of busy-hour jobs

    @property
    def label(self) -> str:
        warm = f"warm pool p{self.quantile * 100:g}"
        return f"busy IdleTimeout={self.busy} {warm}, else IdleTimeout={self.plain}"


Proposals = Mapping[ScheduleOption, ScheduleProposal]


@dataclass(frozen=True)
class TraceAdvice:
    advices: list[ProfileAdvice]
    together: list[TogetherRun]
    days: float = 1.0  # the judged days the figures cover
    calibration: Calibration | None = None  # the pod start-up every candidate was simulated with
    # `--current` simulated on the judged days, per profile; empty when it is one pod per job everywhere
    # (then the baseline is the current policy).
    current: Mapping[str, PolicyResult] = field(default_factory=dict)


def advise_trace(
    jobs: Sequence[TraceJob],
    origin: datetime,
    split: Split,
    settings: SimSettings,
    request: Request = Request(),
    *,
    workers: int = 1,
    server: Server = GOCD_DEFAULTS,
    tuned: Server | None = TUNED,
    progress: Callable[[str], None] | None = None,
    bar: bool = False,
    calibration: Calibration | None = None,
    cache: RunCache | None = None,
) -> TraceAdvice:
    """Every profile's advice; `settings` are the server's (`server.settings`), with `calibration`'s pod
    start-up when given (`Calibration.settings`), and its current policy simulated beside the baseline
    when it is not one pod per job; `cache`: runs made before (cache.py)."""
    days = split.days_judged
    by_profile: dict[str, list[TraceJob]] = {}
    for job in jobs:
        by_profile.setdefault(job.profile, []).append(job)
    profiles = sorted(by_profile)
    # Schedules learn on the learning days only; every candidate is judged on the rest (holdout.py).
    proposals = {
        p: _schedules(p, split.learning(by_profile[p]), origin, settings, request.schedules) for p in profiles
    }
    extra = prediction_candidates(request.idle_timeouts) if request.prediction else []
    options = {option for _, by_option in proposals.values() for option in by_option}
    timeouts, warm = len(request.idle_timeouts), request.min_idle
    alone = timeouts * sum(1 for n in warm if n == 0)
    together = timeouts * sum(1 for n in warm if n > 0) + len(options) + len(extra)
    current = _current_policy(calibration, profiles)
    runs_of_current = 1 if current is not None else 0
    shown = progress_bar(
        1 + runs_of_current + alone * len(profiles) + together + (2 if tuned is not None else 1), bar
    )
    try:
        runner = Runner(workers, _counting(shown, progress), _dropping(shown), cache)
        try:
            # One pod per job shares nothing between profiles: one run of the whole trace is every
            # profile's baseline.
            baselines = runner.submit(simulate_by_profile, (jobs, BASELINE, settings))
            currents = (
                None if current is None else runner.submit(simulate_by_profile, (jobs, current, settings))
            )
            installation = Installation(runner, jobs, settings)

            def shared_for(profile: str) -> Shared:
                def shared(
                    label: str, properties: Mapping[str, str], schedule: ScheduleProposal | None
                ) -> Started:
                    if schedule is None:
                        return installation.figures(same_everywhere(label, properties, profiles), profile)
                    option = next(o for o, p in proposals[profile][1].items() if p is schedule)
                    return installation.figures(_schedule_run(option, proposals), profile)

                return shared

            def request_for(profile: str) -> ProfileRequest:
                demand, by_option = proposals[profile]
                return ProfileRequest(
                    profile,
                    by_profile[profile],
                    settings,
                    request.idle_timeouts,
                    request.min_idle,
                    request.target,
                    request.p95_target,
                    schedules=list({p.label: p for p in by_option.values()}.values()),
                    demand=demand,
                    baseline=lambda: baselines.result()[profile],
                    exhaustive=request.exhaustive,
                    extra=extra,
                    shared=shared_for(profile),
                    days=days,
                    knee_gain=request.knee_gain,
                )

            requests = {profile: request_for(profile) for profile in profiles}
            started = _start_all(requests, runner)
            # Each profile's search waits on its own runs, all started: side by side, they drop the runs
            # they did not ask for as early as they can. With one worker, runs are made when asked for
            # (runner.py): one search at a time.
            searches = max(1, len(profiles) if workers > 1 else 1)
            with concurrent.futures.ThreadPoolExecutor(searches) as threads:
                advices = list(
                    threads.map(lambda p: advise_profile(requests[p], runner, started[p]), profiles)
                )
            recommended = {a.profile: a.recommended.properties for a in advices}
            made = installation.made(recommended, server.settings(settings))
            if made is not None and shown.total is not None:
                shown.total -= 1
                shown.refresh()
            runs = as_recommended(runner, jobs, recommended, settings, server, tuned, made)
            simulated_current = {} if currents is None else dict(currents.result())
        finally:
            runner.close()
    finally:
        shown.close()
    return TraceAdvice(advices, runs, days, calibration, simulated_current)


def _start_all(requests: Mapping[str, ProfileRequest], runner: Runner) -> dict[str, dict[str, Started]]:
    """Every candidate of every profile's search, started now, the longest runs first: those of the
    whole installation, then those of each profile alone, the profile with the most jobs first (in each,
    in the order the search asks for them, `ProfileRequest.planned`)."""
    by_size = sorted(requests.values(), key=lambda r: -len(r.jobs))
    planned = [(r, label, k, schedule) for r in by_size for label, k, schedule in r.planned()]
    started: dict[str, dict[str, Started]] = {profile: {} for profile in requests}
    # A stable sort: the whole installation's runs first, each group in the order above.
    for r, label, k, schedule in sorted(
        planned, key=lambda run: not (run[0].shared and shares_state(run[2]))
    ):
        started[r.profile][label] = r.start(runner, label, k, schedule)
    return started


def _current_policy(calibration: Calibration | None, profiles: Sequence[str]) -> Policy | None:
    """The policy the trace was recorded under, as a run of the simulator; None when it is one pod per
    job for every profile (the baseline is then that run)."""
    if calibration is None:
        return None
    policy = calibration.current
    if all(policy.properties(p).get("Reuse", "false").lower() != "true" for p in profiles):
        return None
    return Policy("current", policy.everywhere, per_profile=policy.per_profile)


def run_advisor(
    trace_path: str,
    request: Request = Request(),
    *,
    seed: int = 1,
    pending_pods: int = 100,
    max_jobs: int | None = None,
    out: Callable[[str], None] = print,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    learn_days: int | None = None,
    bar: bool = False,
    server: Server = GOCD_DEFAULTS,
    tuned: Server | None = TUNED,
    json_path: str | None = None,
    html: str | None = None,
    current: CurrentPolicy | None = None,
    pod_start: GivenPodStart | None = None,
    cache: RunCache | None = None,
    engine: Engine = "policy",
) -> int:
    """`bar`: a progress bar on stderr (tqdm), counting simulations; `server`: the GoCD server's settings
    the advice is for; `tuned`: a server whose figures for the recommendations are shown beside;
    `json_path`: where to write the report's figures as JSON too (report_json.py); `html`: a file to
    write the report to as a page with plots, drawn from the same figures (report_html.py); `current`:
    the policy the trace was recorded under (one pod per job by default), on which the pod start-up is
    calibrated (calibration.py) unless `pod_start` gives it; `cache`: runs made before (cache.py), none
    when not given; `engine`: how the runs are simulated (run_settings.SimSettings.engine: the same
    figures either way, "full" being the reference)."""
    trace = read_trace(trace_path)
    jobs = trace.jobs if max_jobs is None else trace.jobs[:max_jobs]
    if not jobs:
        out("the trace has no jobs")
        return 1
    assumed = "" if trace.origin_given else " (the trace gives none: assumed)"
    out(f"# Advice for {trace_path}\n\n{describe(jobs)}; time 0 is {trace.origin.isoformat()}{assumed}\n")
    split = split_trace(jobs, trace.origin, request.schedules.timezone, learn_days)
    out(split.describe(jobs) + "\n")
    base = SimSettings(
        seed=seed, pending_pods_count=pending_pods, start=trace.start, judged_from_s=split.at, engine=engine
    )
    settings = server.settings(base)
    calibrating = Runner(workers, cache=cache)
    try:
        calibration = calibrate(
            jobs,
            current or CurrentPolicy(),
            settings,
            given=pod_start,
            timezone=request.schedules.timezone,
            runner=calibrating,
        )
    finally:
        calibrating.close()
    out(render_calibration(calibration))
    settings = calibration.settings(settings)
    found = advise_trace(
        jobs,
        trace.origin,
        split,
        settings,
        request,
        workers=workers,
        server=server,
        tuned=tuned,
        progress=progress,
        bar=bar,
        calibration=calibration,
        cache=cache,
    )
    follows = following(jobs)
    for advice in found.advices:
        out(render(advice, request.target, settings.resend_s))
        out(render_predict(advice, follows.get(advice.profile)))
    out(summary(found.advices))
    if found.current:
        out(render_current(current or CurrentPolicy(), found.current, found.days))
    out(render_together(found.together, found.days))
    out(
        "Cost is pod-seconds spent booting or idle per job, and pod-hours a day over the judged days "
        f"({found.days:g}; a week is 7 such days); wait is from scheduling to assignment. When no "
        f"candidate meets the targets, the recommendation is {rule_text(request.knee_gain)}. "
        "Settings that share nothing between profiles were simulated on each profile's jobs alone; warm "
        "pools, schedules and Predict draw on what one backend shares (its registration keys, what it "
        "learns of which stage follows which), so each of those candidates was simulated on the whole "
        f"trace at once, every profile with it, and read per profile. GoCD server: {settings.server()}; "
        f"pods starting as the first section says, {settings.polling()}."
    )
    if json_path is None and html is None:
        return 0
    context = Context(
        trace_path,
        jobs,
        trace.origin,
        split,
        request.target,
        request.p95_target,
        settings.resend_s,
        request.knee_gain,
        current or CurrentPolicy(),
        found.current,
    )
    figures = document(found.advices, found.together, context, follows)
    for name, profile in figures["profiles"].items():  # the start-up every figure rests on
        fitted = found.calibration.profiles.get(name) if found.calibration is not None else None
        profile["calibration"] = fitted.numbers() if fitted is not None else None
    if json_path is not None:
        try:
            write(json_path, figures)
        except OSError as error:
            print(f"error: --json: cannot write {json_path}: {error.strerror or error}", file=sys.stderr)
            return 2
    if html is not None:
        save_html(html, figures)
    return 0


def _schedule_run(
    option: ScheduleOption, proposals: Mapping[str, tuple[Demand | None, Proposals]]
) -> InstallationRun:
    """Every profile on the schedule made for it with `option`'s values, or on that option's plain values
    when its demand gave it no schedule."""
    per_profile: dict[str, Mapping[str, str]] = {}
    for profile, (_, by_option) in proposals.items():
        proposal = by_option.get(option)
        plain = {"Reuse": "true", "IdleTimeout": option.plain, "MinIdlePods": "0"}
        per_profile[profile] = proposal.properties() if proposal else plain
    return InstallationRun(f"schedules: {option.label}", per_profile)


def _schedules(
    profile: str, jobs: Sequence[TraceJob], origin: datetime, settings: SimSettings, options: ScheduleOptions
) -> tuple[Demand | None, dict[ScheduleOption, ScheduleProposal]]:
    """The profile's demand, and its schedule for each combination of the options' values (keyed by
    that combination), so that every profile's schedule of one combination runs together."""
    if not options.enabled:
        return None, {}
    demand = analyse(
        jobs,
        origin,
        options.timezone,
        refill_window_s=settings.pod_start(profile).median_s + settings.ping_s,
        busy_share=options.busy_share,
    )
    found: dict[ScheduleOption, ScheduleProposal] = {}
    for plain in options.plain_idle_timeouts:
        for busy in options.busy_idle_timeouts:
            for quantile in options.quantiles:
                made = propose(
                    demand, quantiles=[quantile], busy_idle_timeouts=[busy], plain_idle_timeouts=[plain]
                )
                if made:
                    found[ScheduleOption(plain, busy, quantile)] = made[0]
    return demand, found


def _dropping(shown: Progress) -> Callable[[], None]:
    """A run cancelled before it began is one the bar will not count."""

    def dropped() -> None:
        if shown.total is not None:
            shown.total -= 1
            shown.refresh()

    return dropped


def _counting(shown: Progress, progress: Callable[[str], None] | None) -> Callable[[PolicyResult], None]:
    def done(result: PolicyResult) -> None:
        shown.update(1)
        if progress:
            progress(f"  {result.policy}: {result.wall_s:.1f} s")

    return done
