"""The one exception the profiles package raises for bad settings."""

from __future__ import annotations


class ProfileError(ValueError):
    """A setting that cannot be used, with the same sentence validation would show next to its field.

    `problems` holds every problem found (key, message), the first of which is `key`/`message`: callers
    that only log one line use `str(error)`, status pages can list them all.
    """

    def __init__(self, key: str, message: str, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message
        self.problems = problems or ((key, message),)
