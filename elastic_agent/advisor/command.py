"""`python -m elastic_agent advise TRACE`: the command's options and their checks (a bad one is a sentence
and exit status 2, not a failed simulation).

Kept with the advisor, as the trace and migrate commands keep theirs, and wired in by
`elastic_agent/cli.py`. The command line builds every command's parser whatever the command, so this
module imports nothing of the simulator: `run` imports `advise.py`, which runs it, when `advise` runs.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from elastic_agent.advisor.tuned_server import TUNED_KEY_LIFETIME_S, TUNED_TICK_S
from elastic_agent.traces.workload import TraceError
from profiles.quantities import format_duration, parse_duration
from profiles.values import key_expiry

HELP = (
    "simulate IdleTimeout and MinIdlePods candidates and ReuseSchedule proposals per profile on a trace of "
    "jobs"
)


def add_arguments(advise: argparse.ArgumentParser) -> None:
    advise.add_argument(
        "trace",
        help="trace: .jsonl or .csv with at,profile,environment,pipeline,duration (`at` in seconds, with an "
        "optional `# origin: ISO-TIME` line, or ISO 8601 times)",
    )
    advise.add_argument("--idle-timeouts", default="2m,5m,10m,20m", help="flat IdleTimeout candidates")
    advise.add_argument("--min-idle", default="0,1", help="flat MinIdlePods candidates (default 0,1)")
    advise.add_argument(
        "--target", type=float, default=0.2, help="mean wait wanted, as a share of one pod per job's"
    )
    advise.add_argument(
        "--p95-target", type=float, default=10.0, help="p95 wait wanted, in seconds (default 10; 0: none)"
    )
    advise.add_argument(
        "--knee-gain",
        type=float,
        default=60.0,
        metavar="S",
        help="when no candidate meets the targets, recommend the cheapest point of the frontier from which "
        "no costlier point saves at least S seconds of the jobs' waiting (summed) per extra pod-hour "
        "idle or booting (default 60; 0: the point that waits least)",
    )
    advise.add_argument(
        "--json",
        metavar="FILE",
        help='also write every figure of the report to FILE as JSON (docs/advisor.md, "--json")',
    )
    advise.add_argument(
        "--timezone", default="UTC", help="IANA time zone the schedules' hours are read in (default UTC)"
    )
    advise.add_argument("--no-schedules", action="store_true", help="flat candidates only")
    advise.add_argument(
        "--no-prediction",
        action="store_true",
        help="leave out the Predict=true candidates (pods for a pipeline's next stage started ahead)",
    )
    advise.add_argument(
        "--warm-quantiles",
        default="0.5",
        help="a schedule's MinIdlePods serves this share of busy-hour jobs without a boot (0: none; "
        "default 0.5)",
    )
    advise.add_argument(
        "--busy-idle-timeouts",
        default="30m,60m",
        help="a schedule's IdleTimeout in busy hours (default 30m,60m)",
    )
    advise.add_argument(
        "--plain-idle-timeouts",
        default="2m,10m",
        help="a schedule's IdleTimeout outside busy hours (default 2m,10m)",
    )
    advise.add_argument(
        "--busy-share",
        type=float,
        default=0.25,
        help="an hour is busy from this share of the busiest hour's arrivals (default 0.25)",
    )
    advise.add_argument(
        "--learn-days",
        type=int,
        help="schedules are learned on the trace's first N calendar days and every candidate judged on the "
        "rest (default: the first 4/7 of its days, Monday to Thursday of a week; 0: learn and judge on the "
        "whole trace)",
    )
    advise.add_argument(
        "--assignment-tick",
        default="5s",
        help="the GoCD server's cruise.build.assignment.service.interval: jobs are offered to agents at "
        "this tick (default 5s, GoCD's)",
    )
    advise.add_argument(
        "--key-lifetime",
        default="30m",
        help="the GoCD server's gocd.ephemeral.auto.register.key.expiry.millis as a duration, and the "
        "cluster profile's auto_register_key_expiry (default 30m, GoCD's)",
    )
    tick, lifetime = format_duration(TUNED_TICK_S), format_duration(TUNED_KEY_LIFETIME_S)
    advise.add_argument(
        "--tuned-tick",
        default=tick,
        help=f"the tuned server's assignment tick shown beside (default {tick})",
    )
    advise.add_argument(
        "--tuned-key-lifetime",
        default=lifetime,
        help=f"the tuned server's key lifetime shown beside (default {lifetime}; docs/install.md, \"A GoCD "
        'server tuned for reuse", says why)',
    )
    advise.add_argument(
        "--no-tuned", action="store_true", help="leave out the recommendations' figures on a tuned server"
    )
    advise.add_argument(
        "--current",
        action="append",
        default=[],
        metavar="POLICY",
        help="the policy the trace was recorded under, on which pod start-up is calibrated from the trace's "
        "waits: one-pod-per-job (the default, the official plugin's way) or this plugin's settings, e.g. "
        "Reuse=true,IdleTimeout=10m,MinIdlePods=1; prefix PROFILE: for one profile (repeatable)",
    )
    advise.add_argument(
        "--pod-start",
        action="append",
        default=[],
        metavar="DURATION",
        help="pods start in about this long (median; 90s, 2m; a bare number is seconds) instead of the "
        "start-up calibrated on the trace; prefix PROFILE: for one profile (repeatable)",
    )
    advise.add_argument("--pending-pods", type=int, default=100, help="the cluster's pending_pods_count")
    advise.add_argument("--max-jobs", type=int, help="only the first N jobs of the trace")
    advise.add_argument("--seed", type=int, default=1)
    advise.add_argument(
        "--exhaustive",
        action="store_true",
        help="run every flat candidate (the reference) instead of the search that runs only those that "
        "could be recommended",
    )
    advise.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    advise.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as one self-contained HTML page with plots of each profile's frontier "
        "and waits by hour of day (needs the `sim` extra: matplotlib)",
    )
    advise.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="simulations side by side (default: cores)"
    )
    advise.add_argument(
        "--engine",
        choices=("policy", "full"),  # run_settings.Engine: not imported, the parser loads no simulator
        default="policy",
        help="how each run is simulated: policy (the default: the pods in memory, only booted) or full (the "
        "fake Kubernetes API server and kubelet, the reference; the same figures, slower)",
    )
    kept = advise.add_mutually_exclusive_group()
    kept.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep every simulation's figures in DIR, and take them from there when the same trace, "
        "settings and code ask for them again (default: $XDG_CACHE_HOME/gocd-reuse-advisor, else "
        "~/.cache/gocd-reuse-advisor)",
    )
    kept.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def run(args: argparse.Namespace) -> int:
    # Here, not at the top: every command's parser is built whatever the command, `serve` included, and
    # this is what loads the simulator.
    from elastic_agent.advisor.advise import ScheduleOptions
    from elastic_agent.advisor.cache import RunCache, default_directory
    from elastic_agent.advisor.current_policy import parse_current, parse_pod_starts
    from elastic_agent.advisor.together import Server
    from elastic_agent.advisor.whole_trace import Request, run_advisor

    # The simulated backends log as the real one does (a warm pod short of a key, say): their lines are
    # about simulated pods, which the report sums up, so only errors reach the terminal (as in the demo).
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")

    try:
        html = _report_file(args.html, "--html", args.trace)
        if html is not None:
            _plotting_library("--html")
        options = _options(args)
        server = Server(
            _tick(args.assignment_tick, "--assignment-tick"), _lifetime(args.key_lifetime, "--key-lifetime")
        )
        tuned = None
        if not args.no_tuned:
            tuned = Server(
                _tick(args.tuned_tick, "--tuned-tick"),
                _lifetime(args.tuned_key_lifetime, "--tuned-key-lifetime"),
            )
        request = Request(
            idle_timeouts=_durations(args.idle_timeouts, "--idle-timeouts"),
            min_idle=[_count(n, "--min-idle", 0) for n in _items(args.min_idle)],
            target=args.target,
            p95_target=args.p95_target if args.p95_target > 0 else None,
            schedules=ScheduleOptions(**options),
            exhaustive=args.exhaustive,
            prediction=not args.no_prediction,
            knee_gain=_knee_gain(args.knee_gain),
        )
        json_path = _report_file(args.json, "--json", args.trace)
        directory = None if args.no_cache else Path(args.cache_dir) if args.cache_dir else default_directory()
        cache = RunCache(directory) if directory is not None else None
        status = run_advisor(
            args.trace,
            request,
            seed=args.seed,
            pending_pods=_count(str(args.pending_pods), "--pending-pods", 1),
            max_jobs=args.max_jobs,
            workers=args.workers,
            learn_days=_learn_days(args.learn_days),
            bar=not args.quiet and sys.stderr.isatty(),
            server=server,
            tuned=tuned,
            json_path=json_path,
            html=html,
            current=parse_current(args.current),
            pod_start=parse_pod_starts(args.pod_start),
            cache=cache,
            engine=args.engine,
        )
        if cache is not None and cache.hits + cache.misses:
            print(cache.said(), file=sys.stderr)
        return status
    except OSError as error:
        print(f"error: cannot read the trace {args.trace}: {error.strerror or error}", file=sys.stderr)
        return 2
    except (TraceError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The schedule options, each checked here: a bad one is a sentence, not a failed simulation."""
    try:
        ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"--timezone: {args.timezone!r} is not an IANA time zone (e.g. Europe/Berlin)"
        ) from None
    quantiles = []
    for text in _items(args.warm_quantiles):
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 <= value <= 1:
            raise ValueError(f"--warm-quantiles: {text!r} is not a share from 0 to 1 (e.g. 0.8)")
        quantiles.append(value)
    if not 0 < args.busy_share <= 1:
        raise ValueError(f"--busy-share: {args.busy_share:g} is not a share between 0 and 1")
    return {
        "enabled": not args.no_schedules,
        "timezone": args.timezone,
        "quantiles": quantiles,
        "busy_idle_timeouts": _durations(args.busy_idle_timeouts, "--busy-idle-timeouts"),
        "plain_idle_timeouts": _durations(args.plain_idle_timeouts, "--plain-idle-timeouts"),
        "busy_share": args.busy_share,
    }


def _knee_gain(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--knee-gain: {value:g} is not 0 or more seconds of waiting per pod-hour")
    return value


def _report_file(path: str | None, option: str, trace: str) -> str | None:
    """A file a report can be written to, checked before minutes or hours of simulation rather than
    after: a path that cannot be written is a sentence now, not a traceback at the end."""
    if path is None:
        return None
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise ValueError(f"{option}: {path} is a folder; give the name of a file to write (e.g. report.html)")
    if target.exists() and target.resolve() == Path(trace).resolve():
        raise ValueError(f"{option}: {path} is the trace itself; give another file")
    if not folder.is_dir():
        raise ValueError(f"{option}: cannot write {path}: the folder {folder} does not exist")
    if not os.access(target if target.exists() else folder, os.W_OK):
        raise ValueError(f"{option}: cannot write {path}: permission denied")
    return path


def _plotting_library(option: str) -> None:
    # Imported here, when the report is asked for: the image installs no `sim` extra, and `serve` must not
    # load a plotting library.
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(
            f"{option} draws its plots with matplotlib, which is not installed here: install the "
            "package with its `sim` extra (pip install '.[sim]')"
        ) from None


def _learn_days(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise ValueError(f"--learn-days: {value} is not 0 or more")
    return value


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _durations(text: str, option: str) -> list[str]:
    items = _items(text)
    if not items:
        raise ValueError(f"{option}: give at least one duration (e.g. 10m)")
    for item in items:
        try:
            parse_duration(item)
        except ValueError as error:
            raise ValueError(f"{option}: {error}") from None
    return items


def _count(text: str, option: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise ValueError(f"{option}: {text!r} is not a whole number of at least {least}")
    return value


def _tick(text: str, option: str) -> float:
    """GoCD reads the interval in milliseconds; a tick under 100 ms or over 10 minutes is a typo."""
    try:
        seconds = parse_duration(text, bare_unit_seconds=1.0)
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None
    if not 0.1 <= seconds <= 600:
        raise ValueError(f"{option}: {text!r} is not between 100ms and 10m (GoCD's default is 5s)")
    return seconds


def _lifetime(text: str, option: str) -> float:
    try:
        return key_expiry(text)
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None
