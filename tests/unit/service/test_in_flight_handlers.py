"""The handler threads of the plugin requests that may wait on the network (elastic_agent/service/
in_flight.py): reused daemons, an exception raised where the request waits, every waiting request answered
at once when a graceful stop gives up; and which requests stay on the server's own thread."""

from __future__ import annotations

import threading

import pytest

from elastic_agent.service.in_flight import Handlers
from executors.dispatch import EXECUTORS, FROM_MEMORY, PREFIX
from tests.support.live_stack import wait_until


def test_a_request_handed_over_is_answered_by_a_daemon_thread_reused_for_the_next() -> None:
    handlers: Handlers[threading.Thread] = Handlers()
    first = handlers.answer(threading.current_thread, lambda: pytest.fail("not given up"))
    assert first is not threading.current_thread() and first.daemon
    assert handlers.answer(threading.current_thread, threading.current_thread) is first


def test_an_exception_of_the_handler_is_raised_where_the_request_waits() -> None:
    def fail() -> str:
        raise LookupError("from the handler")

    with pytest.raises(LookupError, match="from the handler"):
        Handlers[str]().answer(fail, lambda: "given up")


def test_give_up_answers_every_request_still_waiting_at_once_and_every_later_one() -> None:
    handlers: Handlers[str] = Handlers()
    blocked = threading.Event()  # never set: the network that never answers
    answers: list[str] = []
    running: list[str] = []

    def blocked_on_the_network() -> str:
        running.append(threading.current_thread().name)
        return str(blocked.wait())

    def request() -> None:
        answers.append(handlers.answer(blocked_on_the_network, lambda: "503"))

    waiting = [threading.Thread(target=request) for _ in range(3)]
    for thread in waiting:
        thread.start()
    wait_until(lambda: len(running) == 3, 5, "three handlers to wait on the network")
    assert handlers.give_up() == 3
    for thread in waiting:
        thread.join(5)
    assert answers == ["503"] * 3
    assert handlers.answer(lambda: "ran", lambda: "503") == "503", "a later request is not run"
    blocked.set()


def test_an_idle_handler_thread_ends() -> None:
    handlers: Handlers[threading.Thread] = Handlers(idle_exit_s=0.05)
    thread = handlers.answer(threading.current_thread, threading.current_thread)
    thread.join(5)
    assert not thread.is_alive()
    assert handlers.answer(threading.current_thread, threading.current_thread) is not thread, "a new one"


def test_only_requests_that_never_wait_on_the_network_are_answered_on_the_server_thread() -> None:
    assert EXECUTORS.keys() >= FROM_MEMORY
    assert PREFIX + "should-assign-work" in FROM_MEMORY
    may_wait = (
        "create-agent", "server-ping", "cluster-status-report", "agent-status-report", "plugin-status-report",
        "validate-elastic-agent-profile", "cluster-profile-changed", "migrate-config",
    )  # fmt: skip
    assert not FROM_MEMORY & {PREFIX + name for name in may_wait}
