"""What the commands that call GoCD's REST API (`migrate-profiles`, `trace`) share: the server and
token options, read the same way, with one sentence for each way they can be wrong."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit


class UsageError(Exception):
    """A wrong option or an unreadable token file: the message is the one line printed."""


def add_server_arguments(
    parser: argparse.ArgumentParser, token_help: str, *, token_required: bool = True
) -> None:
    parser.add_argument(
        "--server",
        required=True,
        metavar="URL",
        help="the GoCD server's URL, e.g. https://gocd.example.com/go",
    )
    parser.add_argument(
        "--token-file",
        required=token_required,
        metavar="F",
        help=f"{token_help}; '-' reads it from standard input (one line), so that it is never on disk",
    )


def server_url(text: str) -> str:
    try:
        parts = urlsplit(text.strip())
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        raise UsageError("--server is not a valid URL: give the GoCD server's URL, ending in /go") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--server must be an http:// or https:// URL, e.g. https://gocd.example.com/go")
    if parts.username is not None or parts.password is not None:
        raise UsageError("--server must not carry a user name or password: the token comes from --token-file")
    if parts.query or parts.fragment:
        raise UsageError(
            "--server must be the server's URL alone, without ? or #, e.g. https://gocd.example.com/go"
        )
    return text.strip().rstrip("/")


STDIN = "-"


def read_token(path_text: str, stdin: TextIO | None = None) -> str:
    """The token from a file (a mounted Secret), or from standard input for `-`: piped in from a Secret
    or a password manager, it is never written anywhere, so nothing is left to delete afterwards. It
    appears in no message."""
    if path_text == STDIN:
        return _token_from_stdin(stdin if stdin is not None else sys.stdin)
    path = Path(path_text)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise UsageError(f"cannot read the token file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"the token file {path} is not text") from None
    if not token:
        raise UsageError(f"the token file {path} is empty")
    if any(c.isspace() for c in token):
        raise UsageError(f"the token file {path} must hold the token alone, on one line")
    return token


def _token_from_stdin(stream: TextIO | None) -> str:
    """One line of standard input. At a terminal it is asked for with echo off (getpass), so that a
    token typed or pasted there does not stay on the screen."""
    if stream is None:
        raise UsageError("--token-file -: there is no standard input to read the token from")
    try:
        if stream.isatty():
            line = getpass.getpass("GoCD personal access token (not shown): ", stream=sys.stderr)
        else:
            line = stream.readline()
    except EOFError:
        raise UsageError("--token-file -: standard input holds no token (pipe it in, one line)") from None
    except OSError as error:
        raise UsageError(f"--token-file -: cannot read standard input: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise UsageError("--token-file -: standard input is not text") from None
    token = line.strip()
    if not token:
        raise UsageError("--token-file -: standard input holds no token (pipe it in, one line)")
    if any(c.isspace() for c in token):
        raise UsageError("--token-file -: standard input must hold the token alone, on one line")
    return token
