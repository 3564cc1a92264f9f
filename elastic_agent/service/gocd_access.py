"""What the commands that call GoCD's REST API (`migrate-profiles`, `trace`) share: the server and
token options, read the same way, with one sentence for each way they can be wrong."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlsplit


class UsageError(Exception):
    """A wrong option or an unreadable token file: the message is the one line printed."""


def add_server_arguments(parser: argparse.ArgumentParser, token_help: str) -> None:
    parser.add_argument(
        "--server",
        required=True,
        metavar="URL",
        help="the GoCD server's URL, e.g. https://gocd.example.com/go",
    )
    parser.add_argument("--token-file", required=True, metavar="F", help=token_help)


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


def read_token(path_text: str) -> str:
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
