"""The parts of the outage behaviour (docs/architecture.md, "When the Kubernetes API is away") one by
one: the backoff schedule, the outage tracker's few lines, the annotation writer's per-pod backoff on its
thread (against the fake API server over HTTP), and urllib3's reconnect warnings of the Kubernetes client
only turned into DEBUG lines."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from functools import partial

import pytest
import urllib3
from kubernetes import client

from elastic_agent.clock import ManualClock, SystemClock
from elastic_agent.kube.adapter import KubeCluster
from elastic_agent.kube.connect import connect
from elastic_agent.kube.outage import OutageTracker, failure_reason
from elastic_agent.kube.port import ClusterError, Unreachable
from elastic_agent.pool.backoff import Backoff, RetryTimes
from elastic_agent.pool.writer import AnnotationWriter
from elastic_agent.simulation.fake_kube import FakeKubeServer
from tests.support import kube_fixtures
from tests.support.doubles.fake_kube_faults import Fault, faults_of
from tests.support.kube_fixtures import NS, pod_manifest, wait_for

fake_kube = kube_fixtures.fake_kube  # fixture

OURS = {"reuse.gocd.org/plugin-id": "plugin", "reuse.gocd.org/server-id": "s", "reuse.gocd.org/cluster": "c"}
STATE = "reuse.gocd.org/state"


# -- the schedule --------------------------------------------------------------------------------------


def test_the_backoff_doubles_from_one_second_up_to_a_minute() -> None:
    schedule = Backoff()
    assert [schedule.delay_s(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert schedule.delay_s(10_000) == 60
    assert schedule.attempts_within(0) == 1
    assert schedule.attempts_within(63) == 7  # at 0, 1, 3, 7, 15, 31, 63
    assert schedule.attempts_within(3600) == 7 + (3600 - 63) // 60


def test_a_failed_key_waits_for_its_delay_a_success_or_the_end_of_an_outage() -> None:
    retries = RetryTimes()
    assert retries.is_due("pod", 0.0, epoch=0)
    assert retries.failed("pod", 100.0) == 1
    assert not retries.is_due("pod", 100.5, epoch=0) and retries.is_due("pod", 101.0, epoch=0)
    assert retries.failed("pod", 101.0) == 2 and not retries.is_due("pod", 102.5, epoch=0)
    retries.succeeded("pod")
    assert retries.is_due("pod", 0.0, epoch=0) and retries.failed("pod", 200.0) == 1  # reset
    retries.failed("down", 300.0, epoch=4)
    assert not retries.is_due("down", 300.0, epoch=4)
    assert retries.is_due("down", 300.0, epoch=5), "the outage ended since: due at once"
    assert not retries.is_due("pod", 200.5, epoch=5), "an answered failure is not an outage's"


# -- the outage tracker --------------------------------------------------------------------------------


def test_an_outage_is_one_line_down_one_every_five_minutes_and_one_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    tracker = OutageTracker("https://k8s.example.test:6443", clock)
    caplog.set_level(logging.DEBUG, logger="elastic_agent.kube.outage")
    tracker.reached()
    assert tracker.problem() is None and not caplog.records
    for _ in range(1000):  # 1000 failed calls over 16 minutes
        tracker.failed("NewConnectionError (connection refused)")
        clock.advance(1.0)
    problem = tracker.problem()
    assert isinstance(problem, Unreachable) and str(problem) == str(tracker.problem())
    assert "connection refused" in str(problem) and "assigned from memory" in str(problem)
    tracker.reached()
    tracker.reached()
    lines = [record.getMessage() for record in caplog.records]
    assert all(record.levelno == logging.WARNING for record in caplog.records)
    assert len(lines) == 5, lines  # down, still down at 5, 10, 15 minutes, back
    assert "https://k8s.example.test:6443 is unreachable: NewConnectionError (connection refused)" in lines[0]
    assert "still unreachable after 300 s (301 calls failed)" in lines[1]
    assert "reachable again after 1000 s (1000 calls failed meanwhile)" in lines[-1]
    assert tracker.problem() is None and tracker.recoveries == 1


def test_the_reason_of_a_refused_connection_names_the_failure_and_the_systems_words() -> None:
    http = urllib3.PoolManager()
    with pytest.raises(urllib3.exceptions.HTTPError) as raised:
        http.request("GET", f"http://127.0.0.1:{_closed_port()}/", retries=urllib3.Retry(0))
    assert failure_reason(raised.value) == "NewConnectionError (connection refused)"


# -- urllib3's reconnect warnings ------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_urllib3_reconnects_of_the_kubernetes_client_are_debug_lines_and_others_stay_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    core = client.CoreV1Api(connect(url=url, token="t"))
    caplog.set_level(logging.DEBUG, logger="urllib3")
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_namespaced_pod("x", _request_timeout=2)
    retrying = [r for r in caplog.records if r.getMessage().startswith("Retrying")]
    assert retrying and all(r.levelno == logging.DEBUG for r in retrying), "one reconnect, at DEBUG"
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="urllib3")
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_namespaced_pod("x", _request_timeout=2)
    assert not caplog.records, "nothing at all when DEBUG is off"
    with pytest.raises(urllib3.exceptions.HTTPError):  # another urllib3 user, e.g. a GoCD client
        urllib3.PoolManager().request("GET", url, retries=urllib3.Retry(1))
    assert [r.levelno for r in caplog.records if r.getMessage().startswith("Retrying")] == [logging.WARNING]


# -- the annotation writer's backoff, on its thread --------------------------------------------------------


class Pending:
    """What the pool would have the writer persist: one state annotation per pod."""

    def __init__(self, port: KubeCluster, states: dict[str, str]) -> None:
        self._port = port
        self.states = dict(states)
        self.problems: list[ClusterError | None] = []

    def take_unwritten(self, name: str) -> tuple[dict[str, str | None], dict[str, str | None]] | None:
        pod = self._port.get(name)
        if pod is None or pod.annotations.get(STATE) == self.states.get(name):
            return None
        return {STATE: self.states[name]}, {}

    def note_problem(self, what: str, error: ClusterError | None) -> None:
        self.problems.append(error)


@pytest.fixture
def port(fake_kube: FakeKubeServer) -> Iterator[KubeCluster]:
    for n in range(5):
        fake_kube.store.create_pod(NS, pod_manifest(f"pod-{n}", OURS))
    cluster = KubeCluster.connect(NS, OURS, SystemClock(), url=fake_kube.url, request_timeout=2.0,
                                  watch_timeout=1, backoff_initial=0.05, backoff_max=0.2)  # fmt: skip
    cluster.start()
    assert cluster.wait_synced(5)
    yield cluster
    cluster.stop()


def _at_least(fault: Fault, hits: int) -> bool:
    return fault.hits >= hits


def _on_pods(fake_kube: FakeKubeServer) -> dict[str, str | None]:
    pods, _ = fake_kube.store.list_pods(NS)
    return {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(STATE) for p in pods}


def _writer(port: KubeCluster, clock: ManualClock) -> tuple[AnnotationWriter, Pending]:
    pending = Pending(port, {f"pod-{n}": "busy" for n in range(5)})
    writer = AnnotationWriter(port, clock, pending)
    writer.start()
    return writer, pending


def test_a_refused_write_is_tried_again_only_after_its_backoff_on_the_writers_clock(
    fake_kube: FakeKubeServer, port: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()  # the writer's: it moves only when the test says
    writer, pending = _writer(port, clock)
    refusing = faults_of(fake_kube).add("PATCH", r"/pods/pod-0$", status=500, times=None, message="quota")
    writer.enqueue("pod-0")

    assert wait_for(lambda: refusing.hits == 1)
    # (seconds the writer's clock moves on, attempts made by then): 1 s, then 2 s, then 4 s later
    for seconds, attempts in ((0.9, 1), (0.1, 2), (1.5, 2), (0.5, 3), (3.9, 3), (0.1, 4)):
        assert wait_for(lambda: not writer.due("pod-0")), "the failure is booked before the clock moves"
        clock.advance(seconds)
        if attempts == refusing.hits:
            time.sleep(0.3)  # time for the thread to look: it must not try before the pod is due
        assert wait_for(partial(_at_least, refusing, attempts))
        assert refusing.hits == attempts, (seconds, attempts)
    assert wait_for(lambda: not writer.due("pod-0"))
    faults_of(fake_kube).clear()
    clock.advance(8.0)
    assert wait_for(lambda: _on_pods(fake_kube)["pod-0"] == "busy"), "a success ends the backoff"
    assert wait_for(lambda: pending.problems[-1] is None), "and the write problem"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.endswith("writer")]
    assert len(warnings) == 1 and "pod-0" in warnings[0].getMessage()
    assert isinstance(pending.problems[0], ClusterError)
    writer.stop(time.monotonic() + 5)


def test_a_write_that_fails_unexpectedly_leaves_no_backoff_behind_for_its_pod(
    fake_kube: FakeKubeServer, port: KubeCluster
) -> None:
    """The pod is not queued again after a bug-shaped failure (the next ping re-queues it), so what the
    writer booked for it must go too, or it would stay for a pod no one writes again."""
    clock = ManualClock()
    writer, pending = _writer(port, clock)
    refusing = faults_of(fake_kube).add("PATCH", r"/pods/pod-0$", status=500, times=None, message="quota")
    writer.enqueue("pod-0")
    assert wait_for(lambda: refusing.hits == 1)
    assert wait_for(lambda: not writer.due("pod-0"))
    clock.advance(1.0)
    assert wait_for(partial(_at_least, refusing, 2))  # the second failure: next try 2 s later
    assert wait_for(lambda: not writer.due("pod-0"))
    take = pending.take_unwritten
    raised: list[str] = []

    def a_bug(name: str) -> None:
        raised.append(name)
        raise RuntimeError("a bug below the writer")

    pending.take_unwritten = a_bug  # type: ignore[method-assign,assignment]
    clock.advance(2.0)
    assert wait_for(lambda: raised == ["pod-0"])
    pending.take_unwritten = take  # type: ignore[method-assign]
    assert wait_for(lambda: writer.due("pod-0"))
    writer.enqueue("pod-0")  # the next ping's re-queue: a first failure again, so 1 s, not 4 s
    assert wait_for(lambda: refusing.hits == 3)
    assert wait_for(lambda: not writer.due("pod-0"))
    clock.advance(1.0)
    assert wait_for(partial(_at_least, refusing, 4)), "the backoff starts over"
    writer.stop(time.monotonic() + 5)


def test_stopping_writes_every_queued_pod_even_those_waiting_for_their_backoff(
    fake_kube: FakeKubeServer, port: KubeCluster
) -> None:
    writer, _ = _writer(port, ManualClock())
    refusing = faults_of(fake_kube).add("PATCH", r"/pods/", status=500, times=5)
    for n in range(5):
        writer.enqueue(f"pod-{n}")
    assert wait_for(lambda: refusing.hits == 5), "each pod refused once: all in backoff"
    time.sleep(0.2)
    assert set(_on_pods(fake_kube).values()) == {None}
    assert writer.stop(time.monotonic() + 10) == 0
    assert set(_on_pods(fake_kube).values()) == {"busy"}


def test_a_pod_that_kept_changing_is_tried_again_after_its_backoff_without_a_warning(
    fake_kube: FakeKubeServer, port: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    writer, _ = _writer(port, clock)
    conflicts = faults_of(fake_kube).add(
        "PATCH", r"/pods/pod-1$", status=409, times=AnnotationWriter.MAX_ATTEMPTS
    )
    writer.enqueue("pod-1")
    assert wait_for(lambda: conflicts.hits == AnnotationWriter.MAX_ATTEMPTS and not writer.due("pod-1"))
    assert _on_pods(fake_kube)["pod-1"] is None
    clock.advance(1.0)
    assert wait_for(lambda: _on_pods(fake_kube)["pod-1"] == "busy"), "no ping needed"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    writer.stop(time.monotonic() + 5)


def test_when_the_api_answers_again_every_pod_in_backoff_is_written_at_once(
    fake_kube: FakeKubeServer, port: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    writer, pending = _writer(port, ManualClock())  # frozen: no backoff ever runs out
    fake_kube.set_unreachable(True)
    assert wait_for(lambda: port.outage.down())
    for n in range(5):
        writer.enqueue(f"pod-{n}")
    assert wait_for(lambda: port.outage.problem() is not None and _failed_writes(caplog) == 5)
    fake_kube.set_unreachable(False)  # the watch lists again: the outage is over
    assert wait_for(lambda: set(_on_pods(fake_kube).values()) == {"busy"}, 10)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2 and "unreachable" in warnings[0] and "reachable again" in warnings[1], warnings
    assert wait_for(lambda: len(pending.problems) == 5)
    assert pending.problems == [None] * 5, "an outage is no write problem of its own in GoCD"
    writer.stop(time.monotonic() + 5)


def _failed_writes(caplog: pytest.LogCaptureFixture) -> int:
    return sum(
        1 for r in caplog.records if r.name.endswith("writer") and "could not persist" in r.getMessage()
    )


def test_the_watch_logs_an_outage_through_the_tracker(
    fake_kube: FakeKubeServer, port: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    fake_kube.set_unreachable(True)
    assert wait_for(lambda: port.api_calls.get("list", 0) >= 6), "the watch retries"
    fake_kube.set_unreachable(False)
    assert wait_for(lambda: port.sync_problem() is None and not port.outage.down())
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
