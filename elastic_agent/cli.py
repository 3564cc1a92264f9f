"""Command line: `python -m elastic_agent
serve|probe|migrate-profiles|trace|merge-helm-values|demo|advise|generate`, and `python -m elastic_agent
--version`.

The one module that knows every command, so it sits above every layer (the layers contract in
pyproject.toml): the service wires its own commands (`service/cli.py`), the advisor its own
(`advisor/command.py`), and neither knows the other or the demo. The demo and the advisor's simulation
are imported only when their command runs, so `serve` loads no module of `elastic_agent.simulation`
(tests/http/test_cli.py proves it of a running service).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from elastic_agent import __version__
from elastic_agent.advisor import command as advise_command
from elastic_agent.advisor import generate_command
from elastic_agent.service import cli as service_cli

DESCRIPTION = "The GoCD elastic-agent plugin's backend, with pod reuse, and its tools."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elastic_agent", description=DESCRIPTION)
    # The backend's version alone, to compare with the jar's (docs/install.md, Upgrading).
    parser.add_argument(
        "--version", action="version", version=__version__, help="print the backend's version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    service_cli.add_commands(commands)
    demo = commands.add_parser("demo", help="run the backend against a simulated GoCD server and cluster")
    demo.add_argument("--jobs", type=int, default=60, help="jobs to run (default 60)")
    demo.add_argument(
        "--speed", type=float, default=30.0, help="simulated seconds per real second (default 30)"
    )
    demo.add_argument("--seed", type=int, default=7)
    demo.set_defaults(run=_demo)
    advise = commands.add_parser("advise", help=advise_command.HELP)
    advise_command.add_arguments(advise)
    advise.set_defaults(run=advise_command.run)
    generate = commands.add_parser(
        "generate", help=generate_command.HELP, description=generate_command.__doc__.split("\n\n")[0]
    )
    generate_command.add_arguments(generate)
    generate.set_defaults(run=generate_command.run)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


def _demo(args: argparse.Namespace) -> int:
    # Here, not at the top: the demo is the simulator, which `serve` must not load.
    from elastic_agent.simulation.demo import run_demo

    return run_demo(jobs=args.jobs, speed=args.speed, seed=args.seed)
