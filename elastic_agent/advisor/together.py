"""The recommendations run together, on the GoCD server the advice is for and on one tuned for reuse.

Each profile's recommendation was chosen from its own table; `as_recommended` runs all of them at once,
as one backend would (installation.py says why that can differ), and runs the same settings again on a
tuned server, so that the report says what the server's two settings would buy
(docs/install.md, "A GoCD server tuned for reuse"):

- the assignment tick, `cruise.build.assignment.service.interval` (gocd/gocd `BuildAssignmentService`,
  5 s by default): a job waits for the next tick before any agent may take it;
- the registration keys' lifetime, `gocd.ephemeral.auto.register.key.expiry.millis`
  (`EphemeralAutoRegisterKeyService`, 30 minutes by default): how long a key a reused pod left over can
  start a warm or predicted pod, a night's or a weekend's gap included when it is long.

The recommendations are for the server the advice was asked for; on the tuned one, other settings may
be cheaper (run `advise` again with its values to see them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from elastic_agent.advisor.runner import Runner
from elastic_agent.advisor.tuned_server import TUNED_KEY_LIFETIME_S, TUNED_TICK_S
from elastic_agent.simulation.run_settings import SimSettings
from elastic_agent.simulation.virtual_time import Policy, simulate
from elastic_agent.traces.measures import PolicyResult
from elastic_agent.traces.workload import TraceJob
from profiles.quantities import format_duration


@dataclass(frozen=True)
class Server:
    """A GoCD server's settings that bound reuse; GoCD's defaults unless said."""

    assignment_tick_s: float = 5.0
    key_lifetime_s: float = 30 * 60.0

    def settings(self, base: SimSettings) -> SimSettings:
        return replace(base, scheduler_s=self.assignment_tick_s, key_lifetime_s=self.key_lifetime_s)

    def describe(self) -> str:
        return f"tick {format_duration(self.assignment_tick_s)}, keys {format_duration(self.key_lifetime_s)}"


GOCD_DEFAULTS = Server()
TUNED = Server(assignment_tick_s=TUNED_TICK_S, key_lifetime_s=TUNED_KEY_LIFETIME_S)


@dataclass(frozen=True)
class TogetherRun:
    title: str
    result: PolicyResult


def as_recommended(
    runner: Runner,
    jobs: Sequence[TraceJob],
    recommended: Mapping[str, Mapping[str, str]],
    settings: SimSettings,
    server: Server,
    tuned: Server | None,
    made: PolicyResult | None = None,
) -> list[TogetherRun]:
    """The whole trace with every profile on its recommendation, on `server` and (when given) `tuned`;
    `made`: the run on `server`, when an installation run already made it (installation.py)."""
    policy = Policy("as recommended", per_profile=recommended)
    servers = [(f"this server ({server.describe()})", server)]
    if tuned is not None:
        servers.append((f"tuned ({tuned.describe()})", tuned))
    futures: list[tuple[str, Callable[[], PolicyResult]]] = [
        (title, runner.submit(simulate, (jobs, policy, chosen.settings(settings))).result)
        for title, chosen in servers[1 if made is not None else 0 :]
    ]
    if made is not None:
        futures.insert(0, (servers[0][0], lambda: made))
    return [TogetherRun(title, result()) for title, result in futures]


def render_together(runs: Sequence[TogetherRun], days: float = 1.0) -> str:
    """`days`: the judged days the runs' pod-seconds cover, for the pod-hours a day."""
    lines = [
        "## Every profile on its recommendation, together",
        "",
        "| GoCD server | pods/job | mean wait | p95 wait | idle pod-s/job | idle pod-h/day | idle pod-h/week "
        "| predicted pods without a key | registrations refused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        r = run.result
        per_day = r.pod_hours_per_day(days)
        lines.append(
            f"| {run.title} | {r.pods_per_job:.3f} | {r.wait_mean:.1f} s | {r.wait_p95:.1f} s | "
            f"{r.idle_pod_s_per_job:.1f} | {per_day:.1f} | {7 * per_day:.1f} | {r.predicted_without_key} | "
            f"{r.registrations_refused} |"
        )
    if len(runs) > 1:
        lines += [
            "",
            'A tuned server (docs/install.md, "A GoCD server tuned for reuse") sets '
            "cruise.build.assignment.service.interval and gocd.ephemeral.auto.register.key.expiry.millis, "
            "and the cluster profile's auto_register_key_expiry to match; `advise --assignment-tick ... "
            "--key-lifetime ...` gives the recommendations for it.",
        ]
    return "\n".join(lines) + "\n"
