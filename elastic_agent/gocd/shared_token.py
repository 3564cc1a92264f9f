"""The bridge contract's shared token, as the backend holds it.

The jar and the backend prove themselves to each other with one token: the jar sends it with every
plugin request, the backend with every callback. Run as a sidecar, the backend is given it as a file
(`--token-file`): a Secret mounted into both containers of the GoCD server's pod. When an administrator
rotates that Secret, kubelet swaps the files of the one volume both containers see and the jar reads its
copy again at its next request, so the backend must too (`elastic_agent.token_file.TokenFile`), or it
would refuse every request from then on until someone restarted it.
"""

from __future__ import annotations

from typing import Protocol


class SharedToken(Protocol):
    def current(self) -> str:
        """The token to send and to expect now; never empty."""
        ...


class FixedToken:
    """A token given as a value (the environment, a test): it never changes."""

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a token is required")
        self._value = value

    def current(self) -> str:
        return self._value

    def __repr__(self) -> str:  # never the token itself
        return "FixedToken(...)"


def shared(token: str | SharedToken) -> SharedToken:
    """A token as given by callers that have a plain value (tests, the simulator)."""
    return FixedToken(token) if isinstance(token, str) else token
