"""A long fuzz of the running service over HTTP: schemathesis's command line, driven by
docs/bridge-openapi.yaml, against the backend served by waitress on the project's fake API server with
the simulated GoCD's callback endpoint (simulation.stack.Stack, as tests/http/test_fuzz_http.py runs it for
a few examples per operation).

    python -m benchmarks.fuzz_http [--examples 1000] [--seed N] [--report-dir DIR]

Every phase (the document's examples, boundary values, random and schema-breaking data, stateful
sequences), checked for no 5xx and answers as documented (status, content type, body schema) and for
the refusal of data that breaks the document. The real token and callback URL are sent with every
request: a generated callback URL would send the backend's server calls to hosts on the internet.
Exits with schemathesis's status (0: nothing found); its summary gives the number of cases run.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

from elastic_agent.clock import ScaledClock
from elastic_agent.simulation.stack import TOKEN, Stack, StackOptions

DOCUMENT = Path(__file__).resolve().parent.parent / "docs" / "bridge-openapi.yaml"
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
    "negative_data_rejection"
)


def command(url: str, callback_url: str, args: argparse.Namespace) -> list[str]:
    run = [
        sys.executable, "-m", "schemathesis.cli", "run", str(DOCUMENT), "--url", url,
        "--header", f"Authorization: Bearer {TOKEN}", "--header", f"X-GoCD-Callback-URL: {callback_url}",
        "--checks", CHECKS, "--max-examples", str(args.examples), "--mode", "all",
        "--request-timeout", "30", "--workers", "1",
    ]  # fmt: skip
    if args.seed is not None:
        run += ["--seed", str(args.seed)]
    if args.report_dir is not None:
        run += ["--report", "junit", "--report-dir", str(args.report_dir)]
    return run


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=1000, help="examples per operation and phase")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--report-dir", type=Path, default=None)
    args = parser.parse_args()
    # Each refusal is one warning line; only errors (an incident, a bug) belong in the fuzzer's output.
    logging.basicConfig(level=logging.ERROR, format="backend: %(levelname)s %(name)s: %(message)s")
    stack = Stack(ScaledClock(60.0), StackOptions(start_gocd=False))
    try:
        assert stack.service is not None
        return subprocess.run(command(stack.service.url, stack.callback_url, args), check=False).returncode
    finally:
        stack.stop()


if __name__ == "__main__":
    raise SystemExit(main())
