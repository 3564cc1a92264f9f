"""Counted nouns for the status pages: "1 job", "2 jobs". Its own module so that every page and every
sentence built in Python say a count the same way (templates use it as the `counted` and `noun`
filters)."""

from __future__ import annotations

IRREGULAR = {"pod-hour": "pod-hours", "its": "their"}


def noun(count: int | float, singular: str) -> str:
    """The noun as it follows `count`: singular for exactly one, plural otherwise (0 jobs, 1.5 pod-hours)."""
    if count == 1:
        return singular
    return IRREGULAR.get(singular, singular + "s")


def counted(count: int | float, singular: str) -> str:
    return f"{count} {noun(count, singular)}"
