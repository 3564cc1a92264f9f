"""Start-up configuration of the service: where to listen, the shared token, the default callback URL."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from elastic_agent.gocd.shared_token import FixedToken, SharedToken
from elastic_agent.service.heap_trim import DEFAULT_EVERY_S
from elastic_agent.token_file import TokenFile, TokenFileError

TOKEN_VARIABLE = "GOCD_ELASTIC_AGENT_TOKEN"
CALLBACK_VARIABLE = "GOCD_ELASTIC_AGENT_CALLBACK_URL"
DEFAULT_BIND = "127.0.0.1:8155"


class ConfigError(Exception):
    """A start-up setting is wrong; the message is the one line printed before exiting."""


@dataclass(frozen=True)
class ServiceConfig:
    host: str
    port: int
    token: SharedToken
    callback_url: str | None
    threads: int = 16
    heap_trim_every_s: float = DEFAULT_EVERY_S

    def __repr__(self) -> str:  # the token never appears in a log line
        return f"ServiceConfig(host={self.host!r}, port={self.port}, callback_url={self.callback_url!r})"


def parse_bind(text: str) -> tuple[str, int]:
    host, separator, port_text = text.rpartition(":")
    if not separator or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"--bind must look like HOST:PORT (for example {DEFAULT_BIND}), not '{text}'")
    host = host.strip("[]")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ConfigError(f"--bind: '{host}' is not an IP address or localhost") from None
    return host, int(port_text)


def load_token(token_file: str | None, environ: dict[str, str] | None = None) -> SharedToken:
    """The token file (read again whenever it changes: see shared_token), else the environment's."""
    environ = dict(os.environ) if environ is None else environ
    if token_file:
        try:
            return TokenFile(Path(token_file))
        except TokenFileError as error:
            raise ConfigError(str(error)) from None
    token = environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise ConfigError(
            f"no token: set {TOKEN_VARIABLE} or pass --token-file PATH (the bridge jar must send the same "
            "token); refusing to start without one"
        )
    return FixedToken(token)


def load_config(
    bind: str,
    token_file: str | None,
    callback_url: str | None,
    threads: int,
    heap_trim_every_s: float = DEFAULT_EVERY_S,
) -> ServiceConfig:
    host, port = parse_bind(bind)
    token = load_token(token_file)
    callback = callback_url or os.environ.get(CALLBACK_VARIABLE) or None
    if callback and not callback.startswith(("http://", "https://")):
        raise ConfigError(f"the callback URL must start with http:// or https://, not '{callback}'")
    if threads < 1:
        raise ConfigError("--threads must be at least 1")
    if not heap_trim_every_s >= 0:  # NaN too
        raise ConfigError(
            f"--heap-trim-every must be 0 (never) or a number of seconds, not {heap_trim_every_s}"
        )
    return ServiceConfig(host, port, token, callback, threads, heap_trim_every_s)
