"""Registration keys kept for the warm pool: newest first, single use, dropped before they expire."""

from elastic_agent.clock import ManualClock
from elastic_agent.pool.keys import RegistrationKeys


def test_the_newest_key_is_used_first_and_only_once() -> None:
    keys = RegistrationKeys(ManualClock())
    keys.offer("old")
    keys.offer("new")
    assert keys.take() == "new"
    assert keys.take() == "old"
    assert keys.take() is None


def test_keys_past_their_age_are_never_used() -> None:
    clock = ManualClock()
    keys = RegistrationKeys(clock, max_age_s=25 * 60)
    keys.offer("a")
    clock.advance(20 * 60)
    keys.offer("b")
    clock.advance(6 * 60)
    assert len(keys) == 1
    assert keys.take() == "b"
    assert keys.take() is None


def test_a_re_offered_key_is_kept_once_and_never_shown() -> None:
    keys = RegistrationKeys(ManualClock())
    keys.offer("secret-key")
    keys.offer("secret-key")
    assert len(keys) == 1
    assert "secret-key" not in repr(keys)
