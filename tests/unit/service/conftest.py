"""The migrate-profiles tests' fixtures (tests/support/migrate_world.py), for every test module here by
name: the GoCD double behind `responses`, a process that is not in a pod, and a token file."""

from __future__ import annotations

from tests.support.migrate_world import gocd, not_in_a_pod, token_file

__all__ = ["gocd", "not_in_a_pod", "token_file"]  # fixtures, used by name
