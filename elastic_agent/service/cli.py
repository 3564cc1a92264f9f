"""Command line: `python -m elastic_agent serve|demo|advise|trace|migrate-profiles`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from elastic_agent.service import migrate as migrate_command
from elastic_agent.service import trace_command
from elastic_agent.service.config import DEFAULT_BIND, ConfigError, load_config
from elastic_agent.service.heap_trim import DEFAULT_EVERY_S
from profiles.quantities import parse_duration


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elastic_agent", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the bridge contract over HTTP")
    serve.add_argument(
        "--bind", default=DEFAULT_BIND, help=f"HOST:PORT to listen on (default {DEFAULT_BIND})"
    )
    serve.add_argument("--token-file", help="file holding the shared token (else GOCD_ELASTIC_AGENT_TOKEN)")
    serve.add_argument("--callback-url", help="default callback URL of the bridge (the header wins)")
    serve.add_argument("--threads", type=int, default=16, help="worker threads (default 16)")
    serve.add_argument(
        "--heap-trim-every",
        type=float,
        default=DEFAULT_EVERY_S,
        metavar="SECONDS",
        help="give freed memory back to the OS this often (glibc's malloc_trim; 0: never; "
        f"default {DEFAULT_EVERY_S:g})",
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    demo = commands.add_parser("demo", help="run the backend against a simulated GoCD server and cluster")
    demo.add_argument("--jobs", type=int, default=60, help="jobs to run (default 60)")
    demo.add_argument(
        "--speed", type=float, default=30.0, help="simulated seconds per real second (default 30)"
    )
    demo.add_argument("--seed", type=int, default=7)
    advise = commands.add_parser(
        "advise",
        help="simulate IdleTimeout and MinIdlePods candidates and ReuseSchedule proposals per profile on a "
        "trace of jobs",
    )
    _advise_arguments(advise)
    probe = commands.add_parser(
        "probe", help="exit 0 when the backend answers 200 (a Kubernetes exec probe: it listens on loopback)"
    )
    probe.add_argument(
        "--url", default=f"http://{DEFAULT_BIND}/readyz", help="default: /readyz on the default bind"
    )
    probe.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    migrate = commands.add_parser(
        "migrate-profiles",
        help="copy the official Kubernetes plugin's cluster and elastic profiles to this plugin (GoCD's API)",
        description=migrate_command.DESCRIPTION,
        epilog=migrate_command.EPILOG,
    )
    migrate_command.add_arguments(migrate)
    trace = commands.add_parser(
        "trace",
        help="build a trace of real jobs from a GoCD server's history (REST API) and print their waits",
        description=trace_command.DESCRIPTION,
        epilog=trace_command.EPILOG,
    )
    trace_command.add_arguments(trace)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "probe":
        return _probe(args.url, args.timeout)
    if args.command == "advise":
        return _advise(args)
    if args.command == "migrate-profiles":
        return migrate_command.run(args)
    if args.command == "trace":
        return trace_command.run(args)
    from elastic_agent.simulation.demo import run_demo

    return run_demo(jobs=args.jobs, speed=args.speed, seed=args.seed)


def _probe(url: str, timeout_s: float) -> int:
    """An httpGet probe connects to the pod's IP, where the backend does not listen; an exec probe runs
    in the container, on its loopback. No dependency beyond the standard library: it runs every few
    seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            ok = answer.status == 200
    except (OSError, ValueError) as error:
        print(f"probe: {url}: {error}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def _advise_arguments(advise: argparse.ArgumentParser) -> None:
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
        "--timezone", default="UTC", help="IANA time zone the schedules' hours are read in (default UTC)"
    )
    advise.add_argument("--no-schedules", action="store_true", help="flat candidates only")
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
    advise.add_argument("--pending-pods", type=int, default=100, help="the cluster's pending_pods_count")
    advise.add_argument("--max-jobs", type=int, help="only the first N jobs of the trace")
    advise.add_argument("--seed", type=int, default=1)
    advise.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="simulations side by side (default: cores)"
    )


def _advise(args: argparse.Namespace) -> int:
    from elastic_agent.advisor.advise import ScheduleOptions, run_advisor
    from elastic_agent.advisor.workload import TraceError

    try:
        options = _advise_options(args)
        return run_advisor(
            args.trace,
            idle_timeouts=_durations(args.idle_timeouts, "--idle-timeouts"),
            min_idle=[_count(n, "--min-idle", 0) for n in _items(args.min_idle)],
            target=args.target,
            p95_target=args.p95_target if args.p95_target > 0 else None,
            schedules=ScheduleOptions(**options),
            seed=args.seed,
            pending_pods=_count(str(args.pending_pods), "--pending-pods", 1),
            max_jobs=args.max_jobs,
            workers=args.workers,
        )
    except OSError as error:
        print(f"error: cannot read the trace {args.trace}: {error.strerror or error}", file=sys.stderr)
        return 2
    except (TraceError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _advise_options(args: argparse.Namespace) -> dict[str, Any]:
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


def _serve(args: argparse.Namespace) -> int:
    level = getattr(logging, str(args.log_level).upper(), None)
    if not isinstance(level, int):
        print(
            f"error: --log-level must be DEBUG, INFO, WARNING or ERROR, not '{args.log_level}'",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(
            args.bind, args.token_file, args.callback_url, args.threads, args.heap_trim_every
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from elastic_agent.service.wsgi import build_backend, serve_in_background

    backend = build_backend(config.token, config.callback_url)
    try:
        running = serve_in_background(
            backend, config.token, config.host, config.port, config.threads, config.heap_trim_every_s
        )
    except OSError as error:
        print(f"error: cannot listen on {config.host}:{config.port}: {error.strerror}", file=sys.stderr)
        return 2
    print(f"listening on {running.url}", flush=True)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    # SIGTERM (Kubernetes, the bridge): stop accepting, answer what is in flight, write every queued pod
    # state change, stop watching, exit 0, all within STOP_WITHIN_S.
    logging.getLogger(__name__).info("stopping: answering the requests in flight and writing pod states")
    running.stop()
    return 0
