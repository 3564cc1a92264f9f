"""The trace tests' fixtures (tests/support/gocd_history_answers.py), for every test module here by name:
recorded GoCD answers behind `responses`, and a token file."""

from __future__ import annotations

from tests.support.gocd_history_answers import gocd, token_file

__all__ = ["gocd", "token_file"]  # fixtures, used by name
