"""How the simulated GoCD server sends its requests to the plugin, and what it records of the answers.

Every request goes through `call`: a transport that raises is a broken plugin, not a broken server (a
protocol error is recorded and the request counts as unanswered), and an answer other than 200 is kept
(`GoCDStats.non_200_answers`). create-agent is posted as the real server posts it: in real or scaled time
to a queue that `create_agent_threads` listeners serve at once (gocd/gocd's `CreateAgentQueueHandler`,
five `CreateAgentListener` threads per plugin by default), so a burst reaches the plugin concurrently;
in virtual time, with no queue started, the posts are sent in order. Requests are never sent under the
state lock: the plugin calls back (list-agents during a ping, disable-agents during should-assign-work)
from other threads.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from elastic_agent.simulation import gocd_transport as wire
from elastic_agent.simulation.gocd_records import PluginFailure, ServerCore

Body = dict[str, Any] | str
Send = Callable[[str, Body], tuple[int, str]]


class PluginMessenger:
    def __init__(self, core: ServerCore, send: Send) -> None:
        """`send(request name, body)`: delivers one request and returns the plugin's (status, answer)."""
        self._clock = core.clock
        self._lock = core.lock
        self._stats = core.stats
        self._send = send
        self._create_agent_queue: concurrent.futures.ThreadPoolExecutor | None = None

    def call(self, name: str, body: Body) -> tuple[int, str] | None:
        """Send one request named `name` (without GoCD's prefix); its answer, None when it raised."""
        request_name = wire.REQUEST_PREFIX + name
        try:
            status, answer = self._send(request_name, body)
        except Exception as error:  # a transport that raises is a broken plugin, not a broken server
            self.record_protocol_error(f"{request_name} raised {type(error).__name__}")
            return None
        if status != 200:
            with self._lock:
                failure = PluginFailure(self._clock.now(), request_name, status, answer[:200])
                self._stats.non_200_answers.append(failure)
        return status, answer

    def record_protocol_error(self, message: str) -> None:
        with self._lock:
            self._stats.protocol_errors.append(message)

    def post_create_agents(self, bodies: list[dict[str, Any]]) -> None:
        queue = self._create_agent_queue
        for body in bodies:
            if queue is None:
                self.call("create-agent", body)
            else:
                queue.submit(self.call, "create-agent", body)

    def start_queue(self, threads: int) -> None:
        """From now on create-agent is posted to `threads` listeners (real or scaled time)."""
        self._create_agent_queue = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix="gocd-create-agent"
        )

    def stop_queue(self) -> None:
        queue, self._create_agent_queue = self._create_agent_queue, None
        if queue is not None:
            queue.shutdown(wait=False, cancel_futures=True)
