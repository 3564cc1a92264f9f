"""Parsing the quantities people type into profiles: durations, memory sizes and CPU amounts.

Every parser takes the text as typed (surrounding whitespace allowed) and raises `ValueError` whose message
is a sentence shown to the person who typed it, so callers can pass it straight to GoCD's form.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_NUMBER = r"\d+(?:\.\d+)?"
_BARE_NUMBER = re.compile(rf"^{_NUMBER}$")
# Units in fixed order, each at most once, so "1h30m" is accepted and "30m1h" or "1h1h" are not.
_DURATION = re.compile(
    rf"^(?:(?P<d>{_NUMBER})d)?(?:(?P<h>{_NUMBER})h)?(?:(?P<m>{_NUMBER})m)?"
    rf"(?:(?P<s>{_NUMBER})s)?(?:(?P<ms>{_NUMBER})ms)?$"
)
_SECONDS_PER = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION_HELP = "write 30s, 10m or 2h; a bare number means minutes"
# No setting needs more; past it, a long run of digits would reach infinity (which nothing can format
# or wait for) and threads' timeouts overflow.
_LONGEST_S = 3650 * 86400.0
# Kubernetes quantities are 64-bit: a larger amount is not a limit any pod can be given.
_LARGEST_QUANTITY = 2**63 - 1


def parse_duration(text: str, bare_unit_seconds: float = 60.0) -> float:
    """`30s`, `10m`, `2h`, `1h30m`, `1d`, `500ms`, or a bare number (minutes unless the field says
    otherwise) → seconds."""
    raw = text.strip().lower().replace(" ", "")
    if _BARE_NUMBER.match(raw):
        seconds = float(raw) * bare_unit_seconds
    else:
        match = _DURATION.match(raw)
        if not raw or match is None or not any(match.groupdict().values()):
            raise ValueError(f"{text.strip()!r} is not a duration: {_DURATION_HELP}")
        seconds = sum(float(v) * _SECONDS_PER[unit] for unit, v in match.groupdict().items() if v is not None)
    if not seconds <= _LONGEST_S:
        raise ValueError(f"{text.strip()!r} is too long: the longest duration is 3650d (ten years)")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact spelling, for help texts and status pages: 600 → `10m`, 5400 → `1h30m`."""
    if seconds != int(seconds):
        return f"{seconds:.15g}s"  # :g alone keeps 6 digits: 1000.001 would show as 1000s
    rest = int(seconds)
    if rest == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


@dataclass(frozen=True)
class Memory:
    """A memory size: the Kubernetes quantity to put in a pod spec, and the same amount in bytes."""

    quantity: str
    bytes: int


# GoCD users migrating from the official plugin wrote `1G` or `1024M` and got 1024-based sizes (its parser
# treats K, M, G, T and their -B/-iB forms all as powers of 1024). Keeping that reading means a migrated
# profile gets the same limit as before, rather than 7% less memory and surprise OOM kills; this is why
# `1G` here is `1Gi`, not Kubernetes' decimal 10^9.
_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "ki": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mi": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gi": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "ti": 1024**4,
    "tib": 1024**4,
}
_MEMORY = re.compile(rf"^(?P<n>{_NUMBER})\s*(?P<unit>[a-z]*)$")
_MEMORY_HELP = "write 512Mi, 1Gi, 1024M or a number of bytes (M and G count in 1024s, as Mi and Gi)"


def parse_memory(text: str) -> Memory:
    raw = text.strip()
    match = _MEMORY.match(raw.lower())
    if match is None or match.group("unit") not in _MEMORY_UNITS:
        raise ValueError(f"{raw!r} is not a memory size: {_MEMORY_HELP}")
    exact = Decimal(match.group("n")) * _MEMORY_UNITS[match.group("unit")]
    # Kubernetes rounds fractional bytes up; so do we, so the limit shown is the limit applied.
    amount = math.ceil(exact)
    if amount <= 0:
        raise ValueError(f"{raw!r} is not a memory size: it must be more than zero")
    if amount > _LARGEST_QUANTITY:
        raise ValueError(f"{raw!r} is more memory than Kubernetes can express (less than 8Ei)")
    return Memory(quantity=_binary_quantity(amount), bytes=amount)


def _binary_quantity(amount: int) -> str:
    """The largest 1024-based suffix that divides `amount` exactly; plain bytes otherwise."""
    for suffix, size in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


@dataclass(frozen=True)
class Cpu:
    """A CPU amount: the Kubernetes quantity, and the same amount in thousandths of a core."""

    quantity: str
    millicores: int


_CPU_HELP = "write 0.5, 500m or 2 (cores; m means thousandths of a core)"


def parse_cpu(text: str) -> Cpu:
    raw = text.strip()
    try:
        if raw.endswith("m") and raw[:-1].isdigit():
            millis = Decimal(raw[:-1])
        elif re.fullmatch(r"\d+(?:\.\d+)?|\.\d+", raw):
            millis = Decimal(raw) * 1000
        else:
            raise ValueError
    except (ValueError, InvalidOperation):
        raise ValueError(f"{raw!r} is not a CPU amount: {_CPU_HELP}") from None
    if millis != millis.to_integral_value():
        raise ValueError(f"{raw!r} is finer than Kubernetes allows: the smallest CPU step is 1m (0.001)")
    if millis <= 0:
        raise ValueError(f"{raw!r} is not a CPU amount: it must be more than zero")
    if millis > _LARGEST_QUANTITY:
        raise ValueError(f"{raw!r} is more CPU than Kubernetes can express")
    count = int(millis)
    quantity = str(count // 1000) if count % 1000 == 0 else f"{count}m"
    return Cpu(quantity=quantity, millicores=count)
