"""The service's commands: `serve` (the bridge contract over HTTP), `probe` (its exec probe),
`migrate-profiles` and `trace` (tools that talk to a GoCD server's REST API), `merge-helm-values`
(an install tool).

`elastic_agent/cli.py` builds the command line from these and from the demo's and the advisor's
commands; this module knows neither, so the serving layer imports nothing of the simulator.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import urllib.request

from elastic_agent.service import helm_values, trace_command
from elastic_agent.service import migrate as migrate_command
from elastic_agent.service.config import DEFAULT_BIND, ConfigError, load_config
from elastic_agent.service.heap_trim import DEFAULT_EVERY_S


# `commands` is what `ArgumentParser.add_subparsers` returns: argparse does not export its class.
def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Each command's parser, with the function that runs it as its `run` default."""
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
    serve.set_defaults(run=_serve)
    probe = commands.add_parser(
        "probe", help="exit 0 when the backend answers 200 (a Kubernetes exec probe: it listens on loopback)"
    )
    probe.add_argument(
        "--url", default=f"http://{DEFAULT_BIND}/readyz", help="default: /readyz on the default bind"
    )
    probe.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    probe.set_defaults(run=lambda args: _probe(args.url, args.timeout))
    migrate = commands.add_parser(
        "migrate-profiles",
        help="copy the official Kubernetes plugin's cluster and elastic profiles to this plugin (GoCD's API)",
        description=migrate_command.DESCRIPTION,
        epilog=migrate_command.EPILOG,
    )
    migrate_command.add_arguments(migrate)
    migrate.set_defaults(run=migrate_command.run)
    trace = commands.add_parser(
        "trace",
        help="build a trace of real jobs from a GoCD server's history (REST API) and print their waits",
        description=trace_command.DESCRIPTION,
        epilog=trace_command.EPILOG,
    )
    trace_command.add_arguments(trace)
    trace.set_defaults(run=trace_command.run)
    merge = commands.add_parser(
        "merge-helm-values", help=helm_values.HELP, description=helm_values.DESCRIPTION
    )
    helm_values.add_arguments(merge)
    merge.set_defaults(run=helm_values.run)


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
    # SIGTERM (Kubernetes, the bridge): stop accepting, answer what is in flight (a 503 with a sentence for
    # a request still waiting on the network at the deadline: never a dropped connection), write every
    # queued pod state change, stop watching, exit 0, all within STOP_WITHIN_S.
    logging.getLogger(__name__).info("stopping: answering the requests in flight and writing pod states")
    running.stop()
    return 0
