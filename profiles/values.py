"""Readers for the kinds of values profiles hold. Each takes the non-blank text a person typed and returns
the value, or raises ValueError with the sentence to show next to the field."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from profiles.quantities import format_duration, parse_duration


def safe_url(url: str) -> str:
    """`scheme://host[:port]/path`, the parts of a URL that are safe to show: user info, query strings
    and fragments often carry access tokens, and shown URLs reach logs, consoles and status pages."""
    try:
        parts = urlsplit(url.strip())
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an invalid URL)"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets, or the port would be unreadable
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{text.strip()!r} is not true or false")
    return value == "true"


def integer(minimum: int, maximum: int = 1_000_000) -> Callable[[str], int]:
    def read(text: str) -> int:
        raw = text.strip()
        if not re.fullmatch(r"\d+", raw):
            raise ValueError(f"{raw!r} is not a whole number")
        if len(raw.lstrip("0")) > len(str(maximum)):
            # Before int(): past 4,300 digits Python refuses with a message about its own settings.
            raise ValueError(f"the number is out of range: write a number from {minimum} to {maximum}")
        value = int(raw)
        if not minimum <= value <= maximum:
            raise ValueError(f"{value} is out of range: write a number from {minimum} to {maximum}")
        return value

    return read


def choice(*options: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"{text.strip()!r} is not one of {', '.join(options)}")
        return value

    return read


def duration(minimum_s: float = 0.0, bare_unit_seconds: float = 60.0) -> Callable[[str], float]:
    def read(text: str) -> float:
        seconds = parse_duration(text, bare_unit_seconds)
        if seconds < minimum_s:
            raise ValueError(f"{text.strip()!r} is too short: the minimum is {format_duration(minimum_s)}")
        return seconds

    return read


# GoCD's property counts milliseconds, this setting minutes when a number is bare (as every duration of the
# profiles does). A bare number this big is the property's value copied over: as minutes it is 41 days.
_LIKELY_MILLISECONDS = 60_000
_KEY_PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"


def key_expiry(text: str) -> float:
    """The lifetime of GoCD's registration keys (at least a minute: no pod registers sooner)."""
    raw = text.strip()
    if re.fullmatch(r"\d{5,15}", raw) and int(raw) >= _LIKELY_MILLISECONDS:
        server = format_duration(int(raw) / 1000)
        raise ValueError(
            f"{raw!r} would be {raw} minutes: the GoCD server's {_KEY_PROPERTY} counts milliseconds, "
            f"so {raw} there is {server} here; write the duration with its unit, e.g. {server}"
        )
    return duration(60.0)(text)


def http_url(text: str) -> str:
    """Messages show the URL as `safe_url` does: a RemoteFile URL often carries an access token (a
    resolved {{SECRET:...}}) in its user info or query, and messages reach job consoles."""
    raw = text.strip()
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError("the text is not a valid URL: its host or port cannot be read") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{safe_url(raw)!r} is not an http:// or https:// URL")
    if any(c.isspace() for c in raw):
        raise ValueError(f"{safe_url(raw)!r} is not a valid URL: it contains spaces")
    return raw


def _is_own_host(host: str) -> bool:
    """True for names a pod would resolve to itself (or to nothing useful)."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def go_server_url(text: str) -> str:
    example = "e.g. https://gocd.example.com/go"
    raw = http_url(text)
    parts = urlsplit(raw)
    if parts.query or parts.fragment:
        raise ValueError(f"{raw!r} must not have a query or fragment ({example})")
    if not parts.path.endswith("/go"):
        raise ValueError(f"{raw!r} must end in /go ({example})")
    if _is_own_host(parts.hostname or ""):
        raise ValueError(
            f"{raw!r} points at localhost: each agent pod would reach itself, not GoCD; use an address "
            "pods can reach (a service name or the server's host name)"
        )
    return raw


def dns_label(text: str) -> str:
    raw = text.strip()
    if len(raw) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", raw):
        raise ValueError(
            f"{raw!r} is not a Kubernetes namespace name: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return raw


def token(text: str) -> str:
    raw = text.strip()
    if any(c.isspace() for c in raw):
        raise ValueError("the token contains spaces or line breaks: paste it as one line")
    return raw


_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s+([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----")


def ca_certificate(text: str) -> str:
    """PEM text, or the base64 `certificate-authority-data` of a kubeconfig (what the official plugin
    expects in this field, so migrated profiles keep working); returns PEM."""
    raw = text.strip()
    if "-----BEGIN" not in raw:
        try:
            raw = base64.b64decode("".join(raw.split()), validate=True).decode("ascii").strip()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raw = ""
    blocks = _PEM.findall(raw)
    if not blocks:
        raise ValueError(
            "not a PEM certificate: paste the text from -----BEGIN CERTIFICATE----- to "
            "-----END CERTIFICATE-----, or the certificate-authority-data value of a kubeconfig"
        )
    for block in blocks:
        try:
            base64.b64decode("".join(block.split()), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the PEM certificate is damaged: its body is not valid base64") from None
    return raw + "\n"


def text_value(text: str) -> str:
    return text


def image(text: str) -> str:
    raw = text.strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-/:@]*", raw):
        raise ValueError(f"{raw!r} is not an image name such as gocd/gocd-agent-wolfi:v25.4.0")
    return raw


_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def environment(text: str) -> tuple[tuple[str, str], ...]:
    """One KEY=VALUE per line; blank lines skipped; the value may itself contain '='."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, separator, value = line.partition("=")
        name = name.strip()
        # The line itself is never quoted: it may be a value, or a line of a multi-line secret (a
        # resolved {{SECRET:...}} holding a key), and these messages reach job consoles.
        if not separator:
            raise ValueError(f"line {number} is not NAME=value: it has no '=' (a value cannot span lines)")
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(
                f"line {number} is not NAME=value: a name is letters, digits, '_', '-' and '.', "
                "and does not start with a digit"
            )
        if name.upper().startswith("GO_EA_"):
            raise ValueError(f"line {number}: {name} is set by the plugin itself and cannot be overridden")
        if name in seen:
            raise ValueError(f"line {number}: {name} is set twice")
        seen.add(name)
        pairs.append((name, value))
    return tuple(pairs)


def describe(value: Any) -> str:
    """How a value that is not text is named in messages (never its content: it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"
